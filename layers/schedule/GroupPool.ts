/**
 * The Group pool: the step loop over resident Group capacity (docs/runtime.md "Steps", "Resident capacity"; the
 * records and leases are layers/schedule/ResidentGroups.ts, one Group's fiber layers/schedule/GroupRun.ts, the barrier
 * layers/schedule/FirstRequestBarrier.ts, prelaunch src/schedule/Prelaunch.ts, failures src/schedule/GroupFailure.ts).
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
import { Context, Effect, Layer, Option, Queue, Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as DropStreak from "../../src/schedule/DropStreak.ts"
import * as GroupFailure from "../../src/schedule/GroupFailure.ts"
import * as Leasing from "../../src/schedule/Leasing.ts"
import * as Telemetry from "../observability/Telemetry.ts"
import * as GroupRun from "./GroupRun.ts"
import * as PoolContract from "./PoolContract.ts"
import * as ResidentGroups from "./ResidentGroups.ts"

export {
  type DropReason,
  type DropStreak,
  dropStreak,
  TooManyDroppedGroupsError
} from "../../src/schedule/DropStreak.ts"

const defaultSessionId = Effect.sync(() => randomBytes(16).toString("hex"))

/** Create a pool in the current scope. */
export const makePool = <G extends PoolContract.GroupLike, O, A, E>(
  options: PoolContract.PoolOptions<G, O, A, E>
): Effect.Effect<PoolContract.Pool<G, A>, never, Scope.Scope | Telemetry.Telemetry> =>
  Effect.gen(function*() {
    const telemetry = yield* Telemetry.Telemetry
    const scope = yield* Effect.scope
    const residents = yield* ResidentGroups.make<G, A>(scope, options.interruption?.isSessionInterrupted)
    const { countInterrupted, notify, prepared, prepareView, retained, signals, stop } = residents
    const heartbeat = options.heartbeatSeconds ?? 30
    const streak = options.dropStreak ?? DropStreak.dropStreak(0)
    const runContext: GroupRun.GroupRunContext<G, O, A, E> = {
      options,
      telemetry,
      streak,
      residents,
      mintSessionId: options.sessionId ?? defaultSessionId,
      describe: GroupFailure.describeWith(options.describeError ?? GroupFailure.describeTagged)
    }
    let currentRolloutId = 0

    const start = Effect.suspend(() => {
      const input = residents.pending.shift()
      return (input === undefined ? options.next : Effect.succeed(input)).pipe(
        Effect.flatMap((group) =>
          residents.admit(group, currentRolloutId, (record) => GroupRun.run(runContext, record))
        )
      )
    })

    const state = Effect.sync(() => residents.state(currentRolloutId))

    // Reap every Group of the pool (waiting for their agents to end), then fail the step.
    const failIfTripped = Effect.suspend(() => {
      const error = streak.tripped()
      if (error === undefined) return Effect.void
      return Effect.gen(function*() {
        prepared.length = 0
        retained.clear()
        yield* stop([...residents.all])
        yield* Queue.clear(signals)
        return yield* Effect.fail(error)
      })
    })

    if (options.interruption?.onChange !== undefined) {
      options.interruption.onChange(() => {
        Queue.offerUnsafe(signals, { _tag: "Changed" })
      })
    }

    const runStep = Effect.fn("GroupPool.runStep")(function*(plan: PoolContract.StepPlan) {
      yield* failIfTripped
      currentRolloutId = plan.rolloutId
      for (const r of prepared) r.rolloutId = plan.rolloutId
      // Groups retained by the last step are leased by this one: their next responses are recorded under it.
      const leased = new Set<ResidentGroups.GroupRecord<G>>(retained)
      retained.clear()
      for (const r of leased) r.rolloutId = plan.rolloutId
      const acceptedGroups: Array<PoolContract.AcceptedGroup<G, A>> = []
      let ledger = Leasing.openStep(plan, options.prelaunch)

      while (!Leasing.closes(ledger, countInterrupted(leased))) {
        // Before leasing or starting anything: a tripped streak must not start one more agent.
        yield* failIfTripped
        const moves = Leasing.nextMoves(
          { capacity: options.capacity, resident: residents.resident(), prepare: prepareView(), leased: leased.size },
          ledger
        )
        for (const record of moves.lease) {
          prepared.splice(prepared.indexOf(record), 1)
          leased.add(record)
          yield* residents.lease(record, plan.rolloutId)
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
        const recorded = Leasing.recordFinish(ledger, ResidentGroups.finishOf(finish))
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
      const kept: Array<ResidentGroups.Signal<G, A>> = []
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
      residents.pending.unshift(...restart)
      return {
        accepted: acceptedGroups,
        dropped: ledger.dropped,
        filtered: ledger.filtered,
        residentGroups: residents.resident(),
        debt: Math.max(0, ledger.debt),
        retainedGroups: retained.size,
        interruptedGroups
      } satisfies PoolContract.StepOutcome<G, A>
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
  readonly pool: <G extends PoolContract.GroupLike, O, A, E>(
    options: PoolContract.PoolOptions<G, O, A, E>
  ) => Effect.Effect<PoolContract.Pool<G, A>, never, Scope.Scope>
}>()("relax-agentic/GroupPool") {
  static readonly layer: Layer.Layer<GroupPool, never, Telemetry.Telemetry> = Layer.effect(
    GroupPool,
    Effect.gen(function*() {
      const telemetry: Telemetry.TelemetryShape = yield* Telemetry.Telemetry
      return {
        pool: (options) =>
          makePool(options).pipe(
            Effect.provideService(Telemetry.Telemetry, telemetry),
            Effect.withSpan("GroupPool.pool")
          )
      }
    })
  )
}
