/**
 * The cluster's configuration check at join and its runners' slots (docs/scale-out.md "One configuration",
 * "Capacity"): every member writes its sample-changing settings (`src/cluster/Fingerprint.ts`) and, for a runner, its
 * `--runner-slots` to a table next to the cluster's own, and keeps the row fresh while it is a member.
 *
 * **Details**
 * A runner joining compares its settings with every live controller's, and a controller starting compares its
 * settings with every live runner's; the one that joins second is refused with `ConfigMismatchError` naming the first
 * differing flag, before it takes any shard or starts any Group. (Runners are not compared with each other, so the
 * runners of a new configuration can replace the old ones one at a time.) A row counts as live while its member
 * refreshed it within the cluster's lock expiration; a member removes its row when it leaves, and rows of members
 * that died are ignored and deleted by the next one to join. The table is `relax_agentic_members`, created on first
 * use; nothing of a Session is stored there.
 */
import { Duration, Effect, Layer, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"

/** A cluster member as it announces itself. */
export interface Member {
  /** Unique per process start (a runner's incarnation, a controller's run id). */
  readonly id: string
  readonly role: "runner" | "controller"
  /** What to call it in messages: a runner's address, a controller's host and pid. */
  readonly address: string
  /** `--runner-slots` (runners; `undefined` = unlimited). */
  readonly slots?: number | undefined
  readonly fingerprint: Fingerprint.Fingerprint
}

/** A live member as read from the table. */
export interface LiveMember {
  readonly id: string
  readonly role: "runner" | "controller"
  readonly address: string
  readonly slots: number | undefined
  readonly fingerprint: Fingerprint.Fingerprint
}

const Row = Schema.Struct({
  id: Schema.String,
  role: Schema.Literals(["runner", "controller"]),
  address: Schema.String,
  slots: Schema.NullOr(Schema.Number),
  fingerprint: Schema.String
})
const decodeRow = Schema.decodeUnknownEffect(Row)
const decodeFingerprint = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Record(Schema.String, Schema.String)))

const ensureTable = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`create table if not exists relax_agentic_members (
    id text primary key,
    role text not null,
    address text not null,
    slots integer,
    fingerprint text not null,
    seen_at timestamptz not null default now()
  )`.pipe(
    // Two members creating the table at the same moment: one of them fails on the catalog's unique index.
    Effect.retry({ times: 3, schedule: Schedule.spaced("200 millis") })
  )
})

/** The members that refreshed their row within `freshness` (stale rows are deleted). */
export const live = (freshness: Duration.Duration) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* ensureTable
    const seconds = Duration.toMillis(freshness) / 1000
    yield* sql`delete from relax_agentic_members where seen_at < now() - make_interval(secs => ${seconds})`
    const rows = yield* sql`select id, role, address, slots, fingerprint from relax_agentic_members order by id`
    return yield* Effect.forEach(rows, (raw) =>
      Effect.gen(function*() {
        const row = yield* decodeRow(raw).pipe(Effect.orDie)
        return {
          id: row.id,
          role: row.role,
          address: row.address,
          slots: row.slots ?? undefined,
          fingerprint: yield* decodeFingerprint(row.fingerprint).pipe(Effect.orElseSucceed(() => ({})))
        } satisfies LiveMember
      }))
  })

/** The first live member of the other role whose settings differ from `member`'s, as the refusal. */
export const refusal = (
  member: Member,
  others: ReadonlyArray<LiveMember>
): ClusterError.ConfigMismatchError | undefined => {
  for (const other of others) {
    if (other.role === member.role || other.id === member.id) continue
    const detail = Fingerprint.mismatch(
      member.role === "runner" ? other.fingerprint : member.fingerprint,
      member.role === "runner" ? member.fingerprint : other.fingerprint,
      member.role === "runner"
        ? { ours: "this runner", theirs: `the controller (${other.address})` }
        : { ours: `the runner ${other.address}`, theirs: "this controller" }
    )
    if (detail !== undefined) {
      return new ClusterError.ConfigMismatchError({
        reason: member.role,
        detail: `${member.role === "runner" ? "this runner is refused at join" : "this controller is refused"}: ${
          member.role === "runner"
            ? detail
            : `${detail}. Restart the runners with this configuration, or run this controller with theirs`
        }`
      })
    }
  }
  return undefined
}

/**
 * Join as `member`: refused with `ConfigMismatchError` when a live member of the other role has other
 * sample-changing settings; else the member's row is written, refreshed every `refresh` and removed when the scope
 * closes. Succeeds with the live members seen at join.
 */
export const join = (
  member: Member,
  options: { readonly refresh: Duration.Duration; readonly freshness: Duration.Duration }
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const others = yield* live(options.freshness)
    const refused = refusal(member, others)
    if (refused !== undefined) return yield* Effect.fail(refused)
    const fingerprint = JSON.stringify(member.fingerprint)
    yield* Effect.acquireRelease(
      sql`insert into relax_agentic_members (id, role, address, slots, fingerprint)
        values (${member.id}, ${member.role}, ${member.address}, ${member.slots ?? null}, ${fingerprint})
        on conflict (id) do update set seen_at = now()`,
      () => sql`delete from relax_agentic_members where id = ${member.id}`.pipe(Effect.ignore)
    )
    yield* Effect.forkScoped(
      sql`update relax_agentic_members set seen_at = now() where id = ${member.id}`.pipe(
        Effect.ignore,
        Effect.repeat(Schedule.spaced(options.refresh))
      )
    )
    return others.filter((other) => other.id !== member.id)
  })

/** As a layer: the member's row for the layer's lifetime. */
export const layer = (
  member: Member,
  options: { readonly refresh: Duration.Duration; readonly freshness: Duration.Duration }
) => Layer.effectDiscard(join(member, options))
