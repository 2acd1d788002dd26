/**
 * The cluster flags (docs/scale-out.md "Flags"): where the cluster's PostgreSQL is, where a runner is reached, what
 * agents dial, and the failover settings. Read by `relax-agentic runner` and by `rollout` / `serve`, which become the
 * cluster's controller when `--cluster-database-url` is given.
 *
 * **Details**
 * These flags are consumed by the command itself (no `RolloutOptions` field): they say how a process takes part in a
 * cluster, not what the rollout samples. Durations are seconds.
 */
import type * as FlagTable from "../config/FlagTable.ts"

const section = "Cluster (scale-out)"

/** Flags of every cluster member (controller and runners). */
export const memberFlags: ReadonlyArray<FlagTable.FlagSpec> = [
  {
    name: "cluster-database-url",
    field: null,
    kind: "string",
    section,
    description:
      "PostgreSQL URL of the cluster's membership and shard locks (`postgres://user:password@host:5432/db`). " +
      "With it, `rollout` and `serve` run their Groups on the cluster's runners. Also read from " +
      "RELAX_CLUSTER_DATABASE_URL, which keeps the password out of the process list.",
    defaultText: "none (single process)"
  },
  {
    name: "cluster-shards",
    field: null,
    kind: "int",
    section,
    description: "Shards the Groups are spread over; must be the same on every member.",
    defaultText: "64"
  },
  {
    name: "cluster-lock-expiration",
    field: null,
    kind: "number",
    section,
    description:
      "Seconds after its last heartbeat before a runner's shards are taken over (failover time ~ this + 2 s).",
    defaultText: "8"
  },
  {
    name: "cluster-lock-refresh",
    field: null,
    kind: "number",
    section,
    description: "Seconds between a runner's shard-lock heartbeats.",
    defaultText: "2"
  },
  {
    name: "cluster-health-check",
    field: null,
    kind: "number",
    section,
    description: "Seconds between the runners' health pings (a runner that stops answering is marked unhealthy).",
    defaultText: "4"
  },
  {
    name: "cluster-call-timeout",
    field: null,
    kind: "number",
    section,
    description: "Controller: deadline of one cluster call, and the longest silence of a running Session's events " +
      "(runners report every 2 s) before its Group is dropped.",
    defaultText: "30"
  }
]

/** Flags of `relax-agentic runner` only. */
export const runnerFlags: ReadonlyArray<FlagTable.FlagSpec> = [
  {
    name: "runner-address",
    field: null,
    kind: "string",
    section,
    description: "`runner` only: `host:port` the other members dial to reach this runner (required).",
    defaultText: "required"
  },
  {
    name: "runner-listen-address",
    field: null,
    kind: "string",
    section,
    description: "`runner` only: `host:port` this runner binds for cluster traffic, when it differs from " +
      "--runner-address (behind NAT or in a container).",
    defaultText: "--runner-address"
  },
  {
    name: "cluster-orphan-timeout",
    field: null,
    kind: "number",
    section,
    description: "`runner` only: seconds after which a Session that no controller touched (controllers touch theirs " +
      "every 5 s) is reaped with its agent: its controller died without stopping it.",
    defaultText: "30"
  },
  {
    name: "gateway-public-url",
    field: null,
    kind: "string",
    section,
    description: "`runner` only: the agents' RELAX_BASE_URL: the one address in front of every runner's gateway " +
      "(a load balancer or Kubernetes Service), ending in `/agentic_api/`.",
    defaultText: "this runner's gateway"
  },
  {
    name: "gateway-splice",
    field: null,
    kind: "boolean",
    section,
    description: "`runner` only: splice an agent's connection to the gateway of the runner holding its Session once " +
      "that runner answered for it (its requests then cost this runner byte copies); `false` relays each request " +
      "instead. Connections through an HTTP proxy (X-Forwarded-For, Forwarded, Via) are never spliced.",
    defaultText: "true"
  },
  {
    name: "runner-slots",
    field: null,
    kind: "int",
    section,
    description: "`runner` only: agent processes (Sessions) this runner may hold at once. A Group is placed on a " +
      "runner only when all its Sessions fit; when no runner has room, the controller waits. Must be at least the " +
      "largest Group (--n-samples-per-prompt, --n-samples-per-eval-prompt).",
    defaultText: "unlimited"
  },
  {
    name: "runner-drain-timeout",
    field: null,
    kind: "number",
    section,
    description: "`runner` only: seconds a runner stopped with SIGTERM waits for its resident Groups to finish " +
      "(it takes no new Group meanwhile) before it stops what still runs; those Groups are refilled elsewhere.",
    defaultText: "300"
  }
]

/** `host:port` → its parts; `undefined` when it is not one. */
export const parseAddress = (text: string): { readonly host: string; readonly port: number } | undefined => {
  const at = text.lastIndexOf(":")
  if (at <= 0) return undefined
  const host = text.slice(0, at).replace(/^\[(.*)\]$/, "$1")
  const port = Number(text.slice(at + 1))
  return Number.isInteger(port) && port > 0 && port < 65536 ? { host, port } : undefined
}
