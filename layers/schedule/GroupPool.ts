/**
 * The Group pool: resident Group capacity, Runtime leases and the step loop (docs/runtime.md "Steps", "Resident
 * capacity"; the barrier is layers/schedule/FirstRequestBarrier.ts, prelaunch src/schedule/Prelaunch.ts).
 *
 * **Details**
 * A `Pool` owns `capacity` resident Groups, shared by Prepare (agents started, waiting for their lease) and Runtime
 * (leased, agents running). Every Group is a fiber forked into the pool's scope and every Session a fiber inside its
 * Group, so closing the scope (the rollout ended, or Ctrl-C) interrupts and reaps everything.
 *
 * - A Session's first model request counts toward its Group's barrier (layers/schedule/FirstRequestBarrier.ts); the
 *   Group becomes *ready* when every Session has sent one, and requests wait (held) until the Group holds its lease.
 * - A Session that ends before the barrier, or fails at any time, drops its whole Group: the other agents are
 *   interrupted, held requests are answered with `SessionClosedError`, the slot is released, and the step's demand
 *   starts a replacement. A Session runner or Reward that *dies* (a defect) drops its Group the same way
 *   (`RunnerDiedError`, logged `error_type=RunnerDied`), so no record stays resident and blocks refills.
 * - A Group leaves capacity when its Sessions have all finished (Reward runs outside capacity) or when it is dropped.
 * - `runStep` asks `src/schedule/Leasing.ts` at every wake-up which ready Groups get their lease and how many Groups
 *   start, folds each finished Group into the step's ledger, and at the step's end asks it what happens to the Groups
 *   still leased or in Prepare; this layer only carries the moves out (Deferreds, forks, interrupts) and returns once
 *   `debt` Groups were accepted, or (fully async) once the debt is at most the interrupted resident Groups.
 * - With retention (partial rollout / fully async) leased Groups still running at the close stay leased: their
 *   generations are parked by the generation gate (layers/schedule/GenerationGate.ts), they keep their slot, and when they
 *   finish (during the pause or later) they count in the next step's ledger. A Group is *interrupted* when every
 *   unfinished Session of it is (`PoolOptions.interruption`).
 * - A `DropStreak` (`src/schedule/DropStreak.ts`, shared by every pool of a rollout) counts Groups dropped in a row.
 *   When it reaches its limit, the pool's `runStep` interrupts every Group of the pool and fails with
 *   `TooManyDroppedGroupsError`: an agent that fails on every Group would otherwise be refilled forever.
 */
import { Context, Data, Deferred, Effect, Fiber, Layer, Option, Queue, Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as Errors from "../../src/errors.ts"
import { type DropReason, dropStreak } from "../../src/schedule/DropStreak.ts"
import * as Leasing from "../../src/schedule/Leasing.ts"
import * as Retention from "../../src/schedule/Retention.ts"
import { Telemetry, type TelemetryShape } from "../runtime/Telemetry.ts"
import * as FirstRequestBarrier from "./FirstRequestBarrier.ts"
import * as Pool from "./Pool.ts"

export {
  type DropReason,
  type DropStreak,
  dropStreak,
  TooManyDroppedGroupsError
} from "../../src/schedule/DropStreak.ts"

type Phase = "prepare" | "runtime" | "reward" | "done"

interface GroupRecord<G> {
  readonly group: G
  readonly lease: Deferred.Deferred<boolean>
  phase: Phase
  ready: boolean
  rolloutId: number
  released: boolean
  fiber: Fiber.Fiber<void> | undefined
  /** Session ids in Group order (set when the Group's fiber starts). */
  sessionIds: ReadonlyArray<string>
  /** Per Session: its agent ended. */
  readonly finished: Array<boolean>
}

type Finish<A> =
  | { readonly _tag: "Accepted"; readonly value: A }
  | { readonly _tag: "Filtered" }
  | { readonly _tag: "Dropped" }

type Signal<G, A> =
  | { readonly _tag: "Changed" }
  | { readonly _tag: "Finished"; readonly record: GroupRecord<G>; readonly finish: Finish<A> }

/** A Session ended before its first model request (it never joined the barrier); logged as `silent-success`. */
export class ExitedBeforeFirstRequestError extends Data.TaggedError("ExitedBeforeFirstRequestError")<{
  readonly sessionId: string
}> {
  override get message(): string {
    return `session ${this.sessionId} exited without error before its first model request ` +
      `(check that the agent reads RELAX_INPUT_JSON and calls RELAX_BASE_URL)`
  }
}

/**
 * A Session runner or Reward that died (a defect: a bug, a rejected promise) instead of failing with a typed error.
 * It drops the Group like a failure, so the slot is freed and the step refills, and its text is logged
 * (`error_type=RunnerDied`).
 */
export class RunnerDiedError extends Data.TaggedError("RunnerDiedError")<{ readonly cause: unknown }> {
  override get message(): string {
    return `a Session runner or Reward died: ${Errors.messageOf(this.cause)}`
  }
  /** The defect's stack (or message, or text). */
  get detail(): string {
    return this.cause instanceof Error ? (this.cause.stack ?? this.cause.message) : String(this.cause)
  }
}

/** Defects of `effect` as a `RunnerDiedError` failure; typed failures and interruptions pass unchanged. */
const surviveDefects = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | RunnerDiedError> =>
  Effect.catchDefect(effect, (defect) => Effect.fail(new RunnerDiedError({ cause: defect })))

interface SessionFailure<E> {
  readonly position: number
  readonly sessionId: string
  readonly error: E | ExitedBeforeFirstRequestError | RunnerDiedError
}

const finishOf = <A>(finish: Finish<A>): Leasing.Finish =>
  finish._tag === "Accepted" ? "accepted" : finish._tag === "Filtered" ? "filtered" : "dropped"

const defaultSessionId = Effect.sync(() => randomBytes(16).toString("hex"))

const defaultDescribe = (error: unknown): { readonly type: string; readonly detail: string } => {
  const type = typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag
    : "Error"
  const detail = Errors.messageOf(error)
  return { type, detail }
}

/** Create a pool in the current scope. */
export const makePool = <G extends Pool.GroupLike, O, A, E>(
  options: Pool.PoolOptions<G, O, A, E>
): Effect.Effect<Pool.Pool<G, A>, never, Scope.Scope | Telemetry> =>
  Effect.gen(function*() {
    const telemetry = yield* Telemetry
    const scope = yield* Effect.scope
    const signals = yield* Queue.unbounded<Signal<G, A>>()
    const mintSessionId = options.sessionId ?? defaultSessionId
    const describeTyped = options.describeError ?? defaultDescribe
    const describe = (error: E | RunnerDiedError) =>
      error instanceof RunnerDiedError ? { type: "RunnerDied", detail: error.detail } : describeTyped(error)
    const heartbeat = options.heartbeatSeconds ?? 30
    const streak = options.dropStreak ?? dropStreak(0)
    const prepared: Array<GroupRecord<G>> = []
    // Inputs of Prepare Groups interrupted at a step's end, started again before new ones.
    const pending: Array<G> = []
    const all = new Set<GroupRecord<G>>()
    let resident = 0
    let currentRolloutId = 0

    const notify = (signal: Signal<G, A>) => Queue.offer(signals, signal).pipe(Effect.asVoid)

    const release = (record: GroupRecord<G>) =>
      Effect.suspend(() => {
        if (record.released) return Effect.void
        record.released = true
        resident -= 1
        return notify({ _tag: "Changed" })
      })

    const runGroup = (record: GroupRecord<G>): Effect.Effect<void> =>
      Effect.gen(function*() {
        const { group } = record
        const mint = options.runner.newSessionId?.(group) ?? mintSessionId
        const sessionIds = yield* Effect.forEach(Array.from({ length: group.size }), () => mint)
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
            Effect.mapError((error): SessionFailure<E> => ({ position, sessionId: sessionIds[position]!, error })),
            Effect.flatMap((outcome) =>
              barrier.arrived(position)
                ? Effect.succeed(outcome)
                : Effect.fail<SessionFailure<E>>({
                  position,
                  sessionId: sessionIds[position]!,
                  error: new ExitedBeforeFirstRequestError({ sessionId: sessionIds[position]! })
                })
            )
          )
        const sessions = yield* Effect.forEach(sessionIds.map((_, i) => i), runSession, { concurrency: "unbounded" })
          .pipe(Effect.result)
        if (sessions._tag === "Failure") {
          // The rollout is stopping (the streak tripped): this Group is being reaped, not dropped and refilled.
          if (streak.tripped() !== undefined) return
          yield* logSessionFailure(record, sessions.failure)
          if (!record.ready) {
            yield* telemetry.warn(
              `Dropping group ${group.groupId} because an agent exited before every first IR existed`
            )
          }
          return yield* drop(record, sessionDropReason(record, sessions.failure))
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
          return yield* drop(record, { groupId: group.groupId, type, detail })
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

    const logSessionFailure = (record: GroupRecord<G>, failure: SessionFailure<E>) => {
      const groupId = record.group.groupId
      if (failure.error instanceof ExitedBeforeFirstRequestError) {
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

    const sessionDropReason = (record: GroupRecord<G>, failure: SessionFailure<E>): DropReason =>
      failure.error instanceof ExitedBeforeFirstRequestError
        ? { groupId: record.group.groupId, type: "silent-success", detail: failure.error.message }
        : { groupId: record.group.groupId, ...describe(failure.error) }

    const drop = (record: GroupRecord<G>, reason: DropReason) =>
      Effect.gen(function*() {
        record.phase = "done"
        yield* Deferred.succeed(record.lease, false)
        yield* release(record)
        streak.dropped(reason)
        yield* telemetry.status("Dropped 1 group")
        yield* notify({ _tag: "Finished", record, finish: { _tag: "Dropped" } })
      })

    const start = Effect.gen(function*() {
      const group = pending.shift() ?? (yield* options.next)
      const record: GroupRecord<G> = {
        group,
        lease: yield* Deferred.make<boolean>(),
        phase: "prepare",
        ready: false,
        rolloutId: currentRolloutId,
        released: false,
        fiber: undefined,
        sessionIds: [],
        finished: Array.from({ length: group.size }, () => false)
      }
      resident += 1
      prepared.push(record)
      all.add(record)
      record.fiber = yield* Effect.forkIn(
        runGroup(record).pipe(Effect.ensuring(Effect.sync(() => all.delete(record)))),
        scope
      )
    })

    // A fiber interrupted before it ran never reaches its own `ensuring`: release its slot here too (idempotent).
    const stop = (records: ReadonlyArray<GroupRecord<G>>) =>
      Effect.forEach(records, (r) =>
        (r.fiber === undefined ? Effect.void : Fiber.interrupt(r.fiber)).pipe(
          Effect.andThen(release(r)),
          Effect.andThen(Effect.sync(() => all.delete(r)))
        ), {
        concurrency: "unbounded",
        discard: true
      })

    const state = Effect.sync((): Pool.PoolState => {
      let runtime = 0
      let reward = 0
      for (const r of all) {
        if (r.phase === "runtime") runtime += 1
        if (r.phase === "reward") reward += 1
      }
      const ready = prepared.filter((r) => r.ready).length
      return {
        activeRolloutId: currentRolloutId,
        preparing: prepared.length - ready,
        ready,
        runtime,
        reward,
        resident
      }
    })

    // Reap every Group of the pool (waiting for their agents to end), then fail the step.
    const failIfTripped = Effect.suspend(() => {
      const error = streak.tripped()
      if (error === undefined) return Effect.void
      return Effect.gen(function*() {
        prepared.length = 0
        retained.clear()
        yield* stop([...all])
        yield* Queue.clear(signals)
        return yield* Effect.fail(error)
      })
    })

    // Leased Groups kept from the last step (partial rollout / fully async), still running or parked.
    const retained = new Set<GroupRecord<G>>()
    if (options.interruption?.onChange !== undefined) {
      options.interruption.onChange(() => {
        Queue.offerUnsafe(signals, { _tag: "Changed" })
      })
    }

    const isInterrupted = (record: GroupRecord<G>): boolean => {
      const check = options.interruption?.isSessionInterrupted
      if (check === undefined || record.phase !== "runtime") return false
      let unfinished = 0
      let interrupted = 0
      record.sessionIds.forEach((sessionId, i) => {
        if (record.finished[i]) return
        unfinished += 1
        if (check(sessionId)) interrupted += 1
      })
      return Retention.isGroupInterrupted({
        runtime: true,
        failed: false,
        unfinishedSessions: unfinished,
        interruptedSessions: interrupted
      })
    }
    const countInterrupted = (records: Iterable<GroupRecord<G>>): number => {
      let n = 0
      for (const r of records) if (isInterrupted(r)) n += 1
      return n
    }

    const prepareView = (): Array<Leasing.PrepareGroup<GroupRecord<G>>> =>
      prepared.map((r) => ({ key: r, ready: r.ready, live: r.phase === "prepare" }))

    const runStep = Effect.fn("GroupPool.runStep")(function*(plan: Pool.StepPlan) {
      yield* failIfTripped
      currentRolloutId = plan.rolloutId
      for (const r of prepared) r.rolloutId = plan.rolloutId
      // Groups retained by the last step are leased by this one: their next responses are recorded under it.
      const leased = new Set<GroupRecord<G>>(retained)
      retained.clear()
      for (const r of leased) r.rolloutId = plan.rolloutId
      const acceptedGroups: Array<Pool.AcceptedGroup<G, A>> = []
      let ledger = Leasing.openStep(plan, options.prelaunch)

      while (!Leasing.closes(ledger, countInterrupted(leased))) {
        // Before leasing or starting anything: a tripped streak must not start one more agent.
        yield* failIfTripped
        const moves = Leasing.nextMoves(
          { capacity: options.capacity, resident, prepare: prepareView(), leased: leased.size },
          ledger
        )
        for (const record of moves.lease) {
          prepared.splice(prepared.indexOf(record), 1)
          leased.add(record)
          record.phase = "runtime"
          record.rolloutId = plan.rolloutId
          yield* Deferred.succeed(record.lease, true)
        }
        for (let i = 0; i < moves.start; i++) yield* start
        ledger = Leasing.started(ledger, moves.start)
        if (plan.progress !== undefined) {
          yield* plan.progress.setPrepared(prepared.filter((r) => r.ready).length)
        }
        const signal = yield* Queue.take(signals).pipe(Effect.timeoutOption(`${heartbeat} seconds`))
        if (Option.isNone(signal)) {
          const s = yield* state
          yield* telemetry.event("idle_heartbeat", {
            rollout: plan.rolloutId,
            debt: ledger.debt,
            state: {
              active_rollout_id: s.activeRolloutId,
              warming_prepare_group_count: s.preparing,
              ready_prepare_group_count: s.ready,
              prepare_group_count: s.preparing + s.ready,
              runtime_reward_group_count: s.runtime + s.reward,
              finalized_group_count: acceptedGroups.length,
              resident_group_count: s.resident,
              interrupted_runtime_group_count: countInterrupted(leased)
            }
          })
          continue
        }
        if (signal.value._tag !== "Finished") continue
        const { record, finish } = signal.value
        const wasLeased = leased.delete(record)
        const waiting = prepared.indexOf(record)
        if (waiting !== -1) prepared.splice(waiting, 1)
        if (!wasLeased && waiting === -1) continue
        const recorded = Leasing.recordFinish(ledger, finishOf(finish))
        ledger = recorded.ledger
        if (recorded.take && finish._tag === "Accepted") {
          acceptedGroups.push({ group: record.group, value: finish.value })
          if (plan.progress !== undefined) yield* plan.progress.advance(record.group.size)
        }
      }
      // The last Group an Eval step waited for may be the drop that tripped the streak.
      yield* failIfTripped
      const interruptedGroups = countInterrupted(leased)
      const runtimeClose = Leasing.closeRuntime(ledger, [...leased])
      yield* stop(runtimeClose.interrupt)
      for (const r of runtimeClose.retain) retained.add(r)
      // Signals of stopped Groups belong to no step; a kept Prepare Group that was dropped meanwhile leaves the queue;
      // a retained Group that already finished counts in the next step.
      const kept: Array<Signal<G, A>> = []
      for (const signal of yield* Queue.clear(signals)) {
        if (signal._tag !== "Finished") continue
        if (retained.has(signal.record)) {
          kept.push(signal)
          continue
        }
        const waiting = prepared.indexOf(signal.record)
        if (waiting !== -1) prepared.splice(waiting, 1)
      }
      for (const signal of kept) yield* notify(signal)
      const close = Leasing.closePrepare(ledger, prepareView())
      prepared.splice(0, prepared.length, ...close.keep)
      const restart = close.restart.map((r) => r.group)
      yield* stop(close.interrupt)
      pending.unshift(...restart)
      return {
        accepted: acceptedGroups,
        dropped: ledger.dropped,
        filtered: ledger.filtered,
        residentGroups: resident,
        debt: Math.max(0, ledger.debt),
        retainedGroups: retained.size,
        interruptedGroups
      } satisfies Pool.StepOutcome<G, A>
    })

    return {
      runStep,
      state: state.pipe(Effect.withSpan("GroupPool.state")),
      interruptedRetained: Effect.sync(() => countInterrupted(retained)).pipe(
        Effect.withSpan("GroupPool.interruptedRetained")
      )
    }
  })

/** The Group pool service: builds pools whose log lines go to `Telemetry`. */
export class GroupPool extends Context.Service<GroupPool, {
  readonly pool: <G extends Pool.GroupLike, O, A, E>(
    options: Pool.PoolOptions<G, O, A, E>
  ) => Effect.Effect<Pool.Pool<G, A>, never, Scope.Scope>
}>()("relax-agentic/GroupPool") {
  static readonly layer: Layer.Layer<GroupPool, never, Telemetry> = Layer.effect(
    GroupPool,
    Effect.gen(function*() {
      const telemetry: TelemetryShape = yield* Telemetry
      return {
        pool: (options) =>
          makePool(options).pipe(Effect.provideService(Telemetry, telemetry), Effect.withSpan("GroupPool.pool"))
      }
    })
  )
}
