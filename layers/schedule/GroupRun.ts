/**
 * One Group's fiber in the Group pool (docs/runtime.md "Steps"): its Sessions behind their first-request barrier, then
 * Reward, then the signal that tells the step loop how the Group ended.
 *
 * **Details**
 * The fiber mints the Group's Session ids (the runner's whole-Group `newGroupIds` where it has one: a placement the
 * Group's run confirms, minted again under new ids while the runner answers `refused`), makes its barrier (layers/schedule/FirstRequestBarrier.ts; the last
 * Session's first request marks the Group ready and wakes the step loop) and runs every Session to its end. A
 * Session that fails, dies with a defect (`RunnerDiedError`) or ends before its first request
 * (`ExitedBeforeFirstRequestError`, src/schedule/GroupFailure.ts) drops the whole Group: its log line, the lease
 * answered `false` (held requests fail with `SessionClosedError`), the slot released, the drop counted in the streak.
 * Otherwise the slot is released before Reward (which runs outside capacity), and Reward's verdict (accepted,
 * filtered, or a failure that drops the Group) is the `Finished` signal. Once the drop streak tripped, a failing
 * Group is being reaped by the pool and logs nothing.
 */
import { Cause, Deferred, Effect, Exit } from "effect"
import type * as DropStreak from "../../src/schedule/DropStreak.ts"
import * as GroupFailure from "../../src/schedule/GroupFailure.ts"
import type * as Telemetry from "../observability/Telemetry.ts"
import * as FirstRequestBarrier from "./FirstRequestBarrier.ts"
import * as PoolContract from "./PoolContract.ts"
import type * as ResidentGroups from "./ResidentGroups.ts"

/** What a Group's fiber needs of its pool. */
export interface GroupRunContext<G extends PoolContract.GroupLike, O, A, E> {
  readonly options: PoolContract.PoolOptions<G, O, A, E>
  readonly telemetry: Telemetry.TelemetryShape
  readonly streak: DropStreak.DropStreak
  readonly residents: ResidentGroups.ResidentGroups<G, A>
  /** The pool's Session id minter (the runner's `newSessionId` overrides it). */
  readonly mintSessionId: Effect.Effect<string>
  readonly describe: (error: E | GroupFailure.RunnerDiedError) => GroupFailure.FailureText
}

interface SessionFailure<E> {
  readonly position: number
  readonly sessionId: string
  readonly error: E | GroupFailure.ExitedBeforeFirstRequestError | GroupFailure.RunnerDiedError
}

/** The failure of the Session at `position` (its id from the Group's `sessionIds`). */
const sessionFailure = <E>(
  sessionIds: ReadonlyArray<string>,
  position: number,
  error: SessionFailure<E>["error"]
): SessionFailure<E> => ({ position, sessionId: sessionIds[position]!, error })

/** The Session at `position` ended without a model request. */
const exitedBeforeFirstRequest = <E>(sessionIds: ReadonlyArray<string>, position: number): SessionFailure<E> =>
  sessionFailure<E>(
    sessionIds,
    position,
    new GroupFailure.ExitedBeforeFirstRequestError({ sessionId: sessionIds[position]! })
  )

/** Defects of `effect` as a `RunnerDiedError` failure; typed failures and interruptions pass unchanged. */
const surviveDefects = <A, E>(effect: Effect.Effect<A, E | GroupFailure.RunnerDiedError>) =>
  Effect.catchDefect(effect, (defect) => Effect.fail(new GroupFailure.RunnerDiedError({ cause: defect })))

/**
 * The Sessions of a Group that the runner runs together (`GroupRunner.group`): their outcomes in Session order, or
 * the first Session failure, judged as the per-Session path judges each Session's end (a defect is
 * `RunnerDiedError`, an end before the first request `ExitedBeforeFirstRequestError`); the Sessions still running
 * then end with the runner's effect, interrupted as `forEach` interrupts the per-Session fibers.
 */
const runTogether = <G extends PoolContract.GroupLike, O, E>(
  runGroup: NonNullable<PoolContract.GroupRunner<G, O, unknown, E>["group"]>,
  group: G,
  barrier: FirstRequestBarrier.FirstRequestBarrier,
  sessionIds: ReadonlyArray<string>,
  finished: Array<boolean>
): Effect.Effect<ReadonlyArray<O> | PoolContract.Refused, SessionFailure<E>> =>
  Effect.scoped(Effect.gen(function*() {
    const size = sessionIds.length
    const outcomes: Array<O> = []
    const reported: Array<boolean> = Array.from({ length: size }, () => false)
    let left = size
    const settled = Deferred.makeUnsafe<ReadonlyArray<O> | PoolContract.Refused, SessionFailure<E>>()
    const failWith = (position: number, error: SessionFailure<E>["error"]) =>
      Deferred.fail(settled, sessionFailure(sessionIds, position, error))
    const ended = (position: number, exit: Exit.Exit<O, E>): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (reported[position] !== false) return Effect.void
        reported[position] = true
        finished[position] = true
        if (Exit.isFailure(exit)) {
          const error = Cause.findErrorOption(exit.cause)
          if (error._tag === "Some") return failWith(position, error.value)
          if (Cause.hasDies(exit.cause)) {
            return failWith(position, new GroupFailure.RunnerDiedError({ cause: Cause.squash(exit.cause) }))
          }
          return Deferred.interrupt(settled)
        }
        if (!barrier.arrived(position)) return Deferred.fail(settled, exitedBeforeFirstRequest<E>(sessionIds, position))
        outcomes[position] = exit.value
        left -= 1
        return left === 0 ? Deferred.succeed(settled, outcomes) : Effect.void
      })
    const tickets = sessionIds.map((_, position) => barrier.ticket(position))
    yield* runGroup(group, { tickets, arrive: barrier.arrive }, ended).pipe(
      // A Session the runner's effect did not report ends with how that effect ended (without its outcome: a defect).
      Effect.exit,
      Effect.flatMap((exit) => {
        // The placement did not take: no Session started (none reported), and the Group is placed again.
        if (Exit.isSuccess(exit) && exit.value === PoolContract.refused && !reported.includes(true)) {
          return Deferred.succeed(settled, PoolContract.refused)
        }
        const rest: Exit.Exit<O, E> = Exit.isFailure(exit)
          ? Exit.failCause(exit.cause)
          : Exit.die(new Error(`the runner of Group ${group.groupId} ended before all its Sessions did`))
        return Effect.forEach(sessionIds.keys(), (position) => ended(position, rest), { discard: true })
      }),
      // Started at once, as the per-Session fibers of `forEach` start in this fiber's turn.
      Effect.forkScoped({ startImmediately: true })
    )
    return yield* Deferred.await(settled)
  }))

/** The fiber of the Group `record`, from its Sessions' start to its `Finished` signal. */
export const run = <G extends PoolContract.GroupLike, O, A, E>(
  context: GroupRunContext<G, O, A, E>,
  record: ResidentGroups.GroupRecord<G>
): Effect.Effect<void> => {
  const { describe, options, residents, streak, telemetry } = context
  const { notify, release } = residents

  const logSessionFailure = (failure: SessionFailure<E>) => {
    const groupId = record.group.groupId
    if (failure.error instanceof GroupFailure.ExitedBeforeFirstRequestError) {
      return options.mode === "eval"
        ? telemetry.error(
          `Dropping agentic eval session that exited before its first request session_id=${failure.sessionId} ` +
            `group_id=${groupId} error_type=silent-success`
        )
        : Effect.void
    }
    const { type, detail } = describe(failure.error)
    return telemetry.error(
      `Dropping failed resident agentic session session_id=${failure.sessionId} group_id=${groupId} ` +
        `error_type=${type}\n${detail}`
    )
  }

  const drop = (reason: DropStreak.DropReason) =>
    Effect.gen(function*() {
      record.phase = "done"
      yield* Deferred.succeed(record.lease, false)
      yield* release(record)
      streak.dropped(reason)
      yield* telemetry.status("Dropped 1 group")
      yield* notify({ _tag: "Finished", record, finish: { _tag: "Dropped" } })
    })

  /** The Group's Session ids: the runner's whole-Group placement where it has one, else one id at a time. */
  const mintIds = (group: G) => {
    const newGroupIds = options.runner.group === undefined ? undefined : options.runner.newGroupIds
    if (newGroupIds !== undefined) return newGroupIds(group)
    const mint = options.runner.newSessionId?.(group) ?? context.mintSessionId
    return Effect.forEach(Array.from({ length: group.size }), () => mint)
  }

  /**
   * The Group's Sessions under newly minted ids, behind a new barrier, to their ends; `refused` when the runner's
   * placement did not take (nothing started: the caller mints again).
   */
  const runSessions = (group: G) =>
    Effect.gen(function*() {
      const sessionIds = yield* mintIds(group)
      record.sessionIds = sessionIds
      const barrier = yield* FirstRequestBarrier.make({
        groupId: group.groupId,
        sessionIds,
        lease: record.lease,
        rolloutId: () => record.rolloutId,
        onReady: Effect.suspend(() => {
          record.ready = true
          return notify({ _tag: "Changed" })
        })
      })
      const runSession = (position: number) =>
        surviveDefects(options.runner.session(group, barrier.ticket(position))).pipe(
          Effect.ensuring(Effect.sync(() => {
            record.finished[position] = true
          })),
          Effect.mapError((error) => sessionFailure<E>(sessionIds, position, error)),
          Effect.flatMap((outcome) =>
            barrier.arrived(position)
              ? Effect.succeed(outcome)
              : Effect.fail(exitedBeforeFirstRequest<E>(sessionIds, position))
          )
        )
      const runGroup = options.runner.group
      return yield* runGroup === undefined
        ? Effect.forEach(sessionIds.map((_, i) => i), runSession, { concurrency: "unbounded" })
        : runTogether(runGroup, group, barrier, sessionIds, record.finished)
    })

  /** The Group's Sessions' outcomes, placed again (under new ids) as long as its placement does not take. */
  const untilPlaced = (group: G): Effect.Effect<ReadonlyArray<O>, SessionFailure<E>> =>
    Effect.flatMap(
      runSessions(group),
      (ran) => ran === PoolContract.refused ? untilPlaced(group) : Effect.succeed(ran)
    )

  return Effect.gen(function*() {
    const { group } = record
    const sessions = yield* Effect.result(untilPlaced(group))
    if (sessions._tag === "Failure") {
      // The rollout is stopping (the streak tripped): this Group is being reaped, not dropped and refilled.
      if (streak.tripped() !== undefined) return
      yield* logSessionFailure(sessions.failure)
      if (!record.ready) {
        yield* telemetry.warn(
          `Dropping group ${group.groupId} because an agent exited before every first IR existed`
        )
      }
      return yield* drop(GroupFailure.sessionDropReason(group.groupId, sessions.failure.error, describe))
    }
    record.phase = "reward"
    yield* release(record)
    const verdict = yield* surviveDefects(options.runner.reward(group, sessions.success)).pipe(Effect.result)
    if (verdict._tag === "Failure") {
      if (streak.tripped() !== undefined) return
      const { type, detail } = describe(verdict.failure)
      yield* telemetry.error(
        `Dropping group ${group.groupId} because Reward failed error_type=${type}\n${detail}`
      )
      return yield* drop({ groupId: group.groupId, type, detail })
    }
    record.phase = "done"
    streak.kept()
    if (verdict.success._tag === "Filtered") {
      yield* telemetry.status("Filtered 1 group")
      return yield* notify({ _tag: "Finished", record, finish: { _tag: "Filtered" } })
    }
    yield* notify({ _tag: "Finished", record, finish: { _tag: "Accepted", value: verdict.success.value } })
  }).pipe(
    // Held requests must get an answer however the Group ends (a no-op once leased).
    Effect.ensuring(Effect.suspend(() => Deferred.succeed(record.lease, false))),
    Effect.ensuring(Effect.suspend(() => release(record)))
  )
}
