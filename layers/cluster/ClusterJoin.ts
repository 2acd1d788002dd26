/**
 * Joining the cluster: a runner (owns shards, hosts Groups) or a client-only member (the controller), over
 * PostgreSQL for membership and shard locks (docs/scale-out.md "Flags", "Failure").
 *
 * **Details**
 * Effect Cluster over TCP (`NodeClusterSocket`) with `SqlRunnerStorage` through `@effect/sql-pg`; the cluster creates
 * its tables (`cluster_runners`, `cluster_locks`) on first start. Only volatile messages are sent, so nothing of a
 * Session is stored, and there is no message storage (`MessageStorage.layerNoop`): with Effect Cluster's SQL one,
 * every runner would read its shards' stored messages from PostgreSQL once a second and find none. Every member must
 * use the same `shardsPerGroup` (a mismatch makes every call hang: the controller's deadlines then fail the Sessions).
 * The failover settings are explicit here (never read from `HOST` / `PORT` or other environment variables, which a
 * PaaS may set): a runner whose heartbeat is older than `lockExpiration` loses its shards, and the health check marks
 * a runner that stopped answering pings. The defaults (8 s / 2 s / 4 s / 1 s) bring a dead runner's shards back in
 * about 10 s; lower values fail over faster and cost more database traffic and a higher risk of taking shards from a
 * runner that was only slow.
 */
import { NodeClusterSocket } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Duration, Layer, Option, Redacted } from "effect"
import { MessageStorage, RunnerAddress, ShardingConfig, SqlRunnerStorage } from "effect/cluster"
import type { SqlError } from "effect/sql"
import type * as ClusterError from "../../src/cluster/ClusterError.ts"

/** The cluster settings shared by runners and the controller (`--cluster-*` flags). */
export interface ClusterOptions {
  /** `postgres://user:password@host:port/database`. */
  readonly databaseUrl: string
  /** Shards (must be equal on every member). */
  readonly shardsPerGroup: number
  /** A runner whose shard-lock heartbeat is older than this counts as gone. */
  readonly lockExpiration: Duration.Duration
  /** How often a runner renews its shard locks. */
  readonly lockRefresh: Duration.Duration
  /** How often runners ping each other. */
  readonly healthCheck: Duration.Duration
  /** How often members re-read membership and shard assignments. */
  readonly refreshAssignments: Duration.Duration
  /** Deadline of one controller call (and the longest silence of a running Session's event stream). */
  readonly callTimeout: Duration.Duration
}

/** The defaults: a dead runner's shards are taken over in about 10 s. */
export const defaults: Omit<ClusterOptions, "databaseUrl"> = {
  shardsPerGroup: 64,
  lockExpiration: Duration.seconds(8),
  lockRefresh: Duration.seconds(2),
  healthCheck: Duration.seconds(4),
  refreshAssignments: Duration.seconds(1),
  callTimeout: Duration.seconds(30)
}

/** The cluster's PostgreSQL client (`relax_agentic_members`, layers/cluster/MemberTable.ts, uses it too). */
export const sql = (options: ClusterOptions) =>
  PgClient.layer({ url: Redacted.make(options.databaseUrl), applicationName: "relax-agentic" })

const sharding = (options: ClusterOptions) => ({
  shardsPerGroup: options.shardsPerGroup,
  shardLockExpiration: options.lockExpiration,
  shardLockRefreshInterval: options.lockRefresh,
  runnerHealthCheckInterval: options.healthCheck,
  refreshAssignmentsInterval: options.refreshAssignments,
  // With no message storage nothing is polled, but this interval still paces the shard acquisition loop: how soon a
  // runner takes the shards a join or a failover gave it.
  entityMessagePollInterval: Duration.seconds(1),
  entityTerminationTimeout: Duration.seconds(15)
})

/**
 * Membership and shard locks in PostgreSQL; no message storage (every message is volatile). The runner storage reads
 * the same sharding settings the member does (`NodeClusterSocket` derives them the same way).
 */
const storage = (config: Partial<ShardingConfig.ShardingConfig["Service"]>) =>
  Layer.merge(
    MessageStorage.layerNoop,
    Layer.orDie(SqlRunnerStorage.layer).pipe(Layer.provide(ShardingConfig.layerFromEnv(config)))
  )

/**
 * A cluster member over TCP with `storage` (the one way runners, the controller and the benchmarks join): a runner
 * when `shardingConfig` names its address, else `clientOnly`.
 */
export const member = <const ClientOnly extends boolean = false>(options: {
  readonly clientOnly?: ClientOnly
  readonly shardingConfig: Partial<ShardingConfig.ShardingConfig["Service"]>
}) => NodeClusterSocket.layer({ ...options, storage: "byo" }).pipe(Layer.provide(storage(options.shardingConfig)))

/** A `host:port`. */
export interface Address {
  readonly host: string
  readonly port: number
}

/** Join as a runner: peers dial `address`; the runner listens on `listen` (default: the same). */
export const runner = (options: ClusterOptions, address: Address, listen?: Address) =>
  member({
    shardingConfig: {
      ...sharding(options),
      runnerAddress: Option.some(RunnerAddress.make(address.host, address.port)),
      runnerListenAddress: listen === undefined
        ? Option.none()
        : Option.some(RunnerAddress.make(listen.host, listen.port))
    }
  }).pipe(Layer.provide(sql(options)))

/** Join as a client-only member: sends to runners, owns no shard. */
export const client = (options: ClusterOptions) =>
  member({ clientOnly: true, shardingConfig: sharding(options) }).pipe(Layer.provide(sql(options)))

/** Why a process could not join: PostgreSQL unreachable or refusing, a runner port taken, a bad setting. */
export type JoinError =
  | Layer.Error<ReturnType<typeof runner>>
  | Layer.Error<ReturnType<typeof client>>
  | ClusterError.ConfigMismatchError
  | SqlError.SqlError
