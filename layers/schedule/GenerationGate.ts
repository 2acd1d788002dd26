/**
 * The training generation gate of partial rollout (docs/runtime.md, "Partial rollout and fully async"): between rollout steps, in-flight
 * generations are aborted and their requests parked until the next step resumes them.
 *
 * **Details**
 * - Every backend attempt of a model request runs through {@link LiveRequest.attempt}: it waits while the gate is
 *   closed (unless its Session is protected), then runs registered under its rid.
 * - `pause` (a step's close) closes the gate, asks the engine to abort every running attempt of an unprotected
 *   Session (`/abort_request` on every SGLang worker; the embedded engine's abort), and waits until those attempts
 *   have returned. An aborted attempt returns its partial output; the generation core keeps it pending (nothing is
 *   committed) and its next attempt waits at the gate: the request is *parked*, the agent's HTTP request stays open
 *   (Buffered SSE keeps sending heartbeats). The active-time budgets of unprotected Sessions stop counting.
 * - `resume` (the next step's start) promotes pending protection, restarts the budgets and opens the gate: parked
 *   requests continue from prompt ++ partial ids with the remaining `max_new_tokens`.
 * - A request aborted `--partial-rollout-max-aborted-count` times makes its Session protected from the next
 *   `resume` on: it bypasses the gate, is never aborted by `pause`, and its budget keeps running; a `pause` returns
 *   only once every protected Session has finished (protected Sessions can delay a step's close, as in Relax).
 * - A Session is *interrupted* (its Group can be retained and counted as `interrupted_groups`) when it is not
 *   protected and either its agent is between requests or all its live requests are parked after an abort.
 *
 * The Sessions a pause stopped, until the next step resumes them or they end, are the gauge
 * `relax_agentic_sessions_parked` (docs/observability.md).
 *
 * A trainer's weight push (`TrainerService.pauseGeneration` → push → `resumeGeneration`) pauses the engine itself (new
 * attempts wait there, layers/engine/Engine.ts) and every Session's active-time budget here: `pauseBudgets` stops every
 * budget that is counting (every Session's, tracked with `trackBudget`), `resumeBudgets` restarts exactly those. A step
 * boundary's `resume` during a trainer's pause leaves the budgets it would restart stopped until `resumeBudgets`.
 *
 * An abort that reaches the engine before the attempt's request does cannot stop it: that attempt then runs to its
 * end (its tokens are valid, the pause just waits for it), as with SGLang's own prefix-matched aborts.
 */
import { Context, Deferred, Effect, Latch, Layer, type Scope } from "effect"
import * as Retention from "../../src/schedule/Retention.ts"
import * as Engine from "../engine/Engine.ts"
import * as Instruments from "../observability/Instruments.ts"
import type * as ActiveBudget from "../session/ActiveBudget.ts"

/** One model request of a Session while it is live (from arrival to its answer). */
export interface LiveRequest {
  /** Run one backend attempt under `rid`: waits at the gate unless the Session is protected. */
  readonly attempt: <A, E, R>(rid: string, run: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * The last attempt ended in an engine abort; `abortCount` is the request's total so far. True when the abort was a
   * step boundary's pause (the request is parked, not failing).
   */
  readonly aborted: (abortCount: number) => Effect.Effect<boolean>
}

/** A Session's handle on the gate. */
export interface SessionGate {
  /** Track one model request while `body` runs. */
  readonly request: <A, E, R>(body: (live: LiveRequest) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  readonly isProtected: () => boolean
}

/** What a pause did. */
export interface PauseReport {
  /** Attempts aborted (their requests are now parked). */
  readonly aborted: number
  /** Sessions whose budget stopped counting. */
  readonly pausedSessions: number
}

export interface GenerationGateShape {
  /** The cross-step mode the gate serves (no mode: nothing is ever registered or paused). */
  readonly mode: Retention.Mode
  /** Register a training Session (with its active-time budget) for as long as the current scope lives. */
  readonly register: (
    sessionId: string,
    budget?: ActiveBudget.ActiveBudget
  ) => Effect.Effect<SessionGate, never, Scope.Scope>
  /**
   * Close the gate, abort and wait for unprotected running attempts, pause unprotected budgets, then wait until every
   * protected Session has finished.
   */
  readonly pause: Effect.Effect<PauseReport>
  /**
   * The first half of `pause`: close the gate, abort and wait for unprotected running attempts, pause unprotected
   * budgets; does not wait for protected Sessions (a cluster runner's part of a controller's pause, whose controller
   * waits for the protected Sessions it knows of).
   */
  readonly halt: Effect.Effect<PauseReport>
  /** Promote pending protection, restart paused budgets, open the gate. */
  readonly resume: Effect.Effect<void>
  /**
   * `resume` at the start of step `rolloutId` (what the rollout calls; a cluster controller's gate tells its runners
   * the step, layers/cluster/Fleet.ts; here Sessions read their step from their ticket).
   */
  readonly resumeStep: (rolloutId: number) => Effect.Effect<void>
  readonly isOpen: () => boolean
  /** Whether the Session could be retained across the step boundary now (unknown Sessions: false). */
  readonly isInterrupted: (sessionId: string) => boolean
  readonly isProtected: (sessionId: string) => boolean
  /** Call `listener` whenever a Session's interrupted state may have changed (a request or attempt began or ended). */
  readonly onChange: (listener: () => void) => void
  /** Track a Session's active-time budget (any Session, Eval included) for a trainer's pause while the scope lives. */
  readonly trackBudget: (budget: ActiveBudget.ActiveBudget) => Effect.Effect<void, never, Scope.Scope>
  /** A trainer's weight push begins: stop every counting budget; returns how many were stopped. */
  readonly pauseBudgets: Effect.Effect<number>
  /** The push is done: restart the budgets `pauseBudgets` stopped. */
  readonly resumeBudgets: Effect.Effect<void>
}

interface RequestState {
  running: boolean
  aborted: boolean
  /** The last attempt was aborted by a pause. */
  paused: boolean
  /**
   * Completes the current attempt's `done` once the request has taken in how it ended: the generation core reported
   * an abort (`aborted`, the request is parked) or the request ended.
   */
  settle: (() => void) | undefined
}

interface Running {
  readonly rid: string
  readonly session: SessionState
  readonly request: RequestState
  /** The attempt ended and its request took it in (parked after an abort, or ended): a pause waits for this. */
  readonly done: Deferred.Deferred<void>
}

interface SessionState {
  readonly budget: ActiveBudget.ActiveBudget | undefined
  readonly requests: Set<RequestState>
  protectionPending: boolean
  protected: boolean
  /** The budget was counting when a pause stopped it (a Session still waiting for its lease is not restarted). */
  budgetPaused: boolean
}

/**
 * A gate, open at first. `abort` is the engine's abort (`Engine.abort`); `mode` decides protection.
 */
export const make = (options: {
  readonly abort: (rid: string) => Effect.Effect<void>
  readonly mode: Retention.Mode
}): Effect.Effect<GenerationGateShape> =>
  Effect.gen(function*() {
    yield* Instruments.move(Instruments.sessionsParked, 0)
    const latch = yield* Latch.make(true)
    const sessions = new Map<string, SessionState>()
    const running = new Set<Running>()
    const listeners: Array<() => void> = []
    // Every tracked budget, and those a trainer's pause stopped (undefined: no trainer's pause now).
    const budgets = new Set<ActiveBudget.ActiveBudget>()
    let trainerPaused: Set<ActiveBudget.ActiveBudget> | undefined
    // Completed once no protected Session is registered any more (a pause waits for it).
    let protectedDone: Deferred.Deferred<void> | undefined
    const changed = () => {
      for (const listener of listeners) listener()
    }

    const attempt =
      (state: SessionState, request: RequestState) =>
      <A, E, R>(rid: string, run: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
        Effect.gen(function*() {
          const done = yield* Deferred.make<void>()
          const entry: Running = { rid, session: state, request, done }
          // Wait at the gate, then register in the same synchronous step that checks it is still open, so a pause
          // either sees this attempt (and aborts it) or this attempt sees the closed gate (and waits again).
          for (;;) {
            if (!state.protected) yield* latch.await
            const admitted = yield* Effect.sync(() => {
              if (!state.protected && !Latch.isOpen(latch)) return false
              running.add(entry)
              request.running = true
              request.paused = false
              request.settle = () => Deferred.doneUnsafe(done, Effect.void)
              changed()
              return true
            })
            if (admitted) break
          }
          // `done` completes only once the request has taken the outcome in (see `settle`): between the attempt's end
          // and the generation core's report of its abort, the request is neither running nor parked, and a pause
          // that returned then would see its Session as neither interrupted nor running.
          return yield* run.pipe(
            Effect.ensuring(Effect.sync(() => {
              running.delete(entry)
              request.running = false
              changed()
            }))
          )
        }).pipe(Effect.withSpan("GenerationGate.attempt", { attributes: { rid } }))

    const register = (sessionId: string, budget?: ActiveBudget.ActiveBudget) =>
      Effect.acquireRelease(
        Effect.sync((): SessionGate => {
          const state: SessionState = {
            budget,
            requests: new Set(),
            protectionPending: false,
            protected: false,
            budgetPaused: false
          }
          sessions.set(sessionId, state)
          return {
            request: (body) =>
              Effect.suspend(() => {
                const request: RequestState = { running: false, aborted: false, paused: false, settle: undefined }
                const settle = () => {
                  const settled = request.settle
                  request.settle = undefined
                  settled?.()
                }
                state.requests.add(request)
                changed()
                const live: LiveRequest = {
                  attempt: attempt(state, request),
                  aborted: (abortCount) =>
                    Effect.sync(() => {
                      request.aborted = true
                      if (Retention.isProtected(options.mode, abortCount)) state.protectionPending = true
                      changed()
                      settle()
                      return request.paused
                    }).pipe(Effect.withSpan("GenerationGate.aborted"))
                }
                return body(live).pipe(Effect.ensuring(Effect.sync(() => {
                  state.requests.delete(request)
                  changed()
                  settle()
                })))
              }).pipe(Effect.withSpan("GenerationGate.request", { attributes: { sessionId } })),
            isProtected: () => state.protected
          }
        }),
        () =>
          Effect.gen(function*() {
            const state = sessions.get(sessionId)
            sessions.delete(sessionId)
            if (state?.budgetPaused === true) yield* Instruments.move(Instruments.sessionsParked, -1)
            const waiter = protectedDone
            if (waiter === undefined || [...sessions.values()].some((s) => s.protected)) return
            protectedDone = undefined
            yield* Deferred.succeed(waiter, undefined)
          })
      ).pipe(Effect.withSpan("GenerationGate.register", { attributes: { sessionId } }))

    const halt = Effect.gen(function*() {
      const targets = yield* Effect.sync(() => {
        latch.closeUnsafe()
        const unprotected = [...running].filter((r) => !r.session.protected)
        for (const r of unprotected) r.request.paused = true
        return unprotected
      })
      yield* Effect.forEach(targets, (r) => options.abort(r.rid), { concurrency: "unbounded", discard: true })
      yield* Effect.forEach(targets, (r) => Deferred.await(r.done), { discard: true })
      let pausedSessions = 0
      for (const state of sessions.values()) {
        if (state.protected || state.budget === undefined || !(yield* state.budget.isActive)) continue
        yield* state.budget.pause
        state.budgetPaused = true
        pausedSessions++
      }
      yield* Instruments.move(Instruments.sessionsParked, pausedSessions)
      return { aborted: targets.length, pausedSessions } satisfies PauseReport
    }).pipe(Effect.withSpan("GenerationGate.halt"))

    const pause = Effect.gen(function*() {
      const report = yield* halt
      // Protected Sessions run on; the step's close waits until they have finished (they can delay it).
      if ([...sessions.values()].some((state) => state.protected)) {
        const waiter = protectedDone ?? (yield* Deferred.make<void>())
        protectedDone = waiter
        yield* Deferred.await(waiter)
      }
      return report
    }).pipe(Effect.withSpan("GenerationGate.pause"))

    const resume = Effect.gen(function*() {
      for (const state of sessions.values()) {
        if (state.protectionPending) state.protected = true
        if (state.budgetPaused && state.budget !== undefined) {
          state.budgetPaused = false
          yield* Instruments.move(Instruments.sessionsParked, -1)
          // A trainer's pause holds it until its own resume.
          if (trainerPaused !== undefined) trainerPaused.add(state.budget)
          else yield* state.budget.resume
        }
      }
      yield* latch.open
    }).pipe(Effect.withSpan("GenerationGate.resume"))

    return {
      register,
      pause,
      halt,
      resume,
      resumeStep: () => resume,
      isOpen: () => Latch.isOpen(latch),
      isInterrupted: (sessionId) => {
        const state = sessions.get(sessionId)
        return state !== undefined && Retention.isSessionInterrupted({
          active: true,
          protected: state.protected,
          requests: [...state.requests]
        })
      },
      isProtected: (sessionId) => sessions.get(sessionId)?.protected ?? false,
      onChange: (listener) => {
        listeners.push(listener)
      },
      trackBudget: (budget) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            budgets.add(budget)
          }),
          () =>
            Effect.sync(() => {
              budgets.delete(budget)
              trainerPaused?.delete(budget)
            })
        ),
      pauseBudgets: Effect.gen(function*() {
        const paused = trainerPaused ?? new Set<ActiveBudget.ActiveBudget>()
        trainerPaused = paused
        let stopped = 0
        for (const budget of budgets) {
          if (!(yield* budget.isActive)) continue
          yield* budget.pause
          paused.add(budget)
          stopped++
        }
        return stopped
      }).pipe(Effect.withSpan("GenerationGate.pauseBudgets")),
      resumeBudgets: Effect.gen(function*() {
        const paused = trainerPaused
        trainerPaused = undefined
        if (paused === undefined) return
        for (const budget of paused) yield* budget.resume
      }).pipe(Effect.withSpan("GenerationGate.resumeBudgets")),
      mode: options.mode
    } satisfies GenerationGateShape
  })

/** The rollout's training generation gate, aborting through the `Engine`. */
export class GenerationGate
  extends Context.Service<GenerationGate, GenerationGateShape>()("relax-agentic/GenerationGate")
{
  /** The gate in the cross-step `mode` the caller resolved (the rollout: `Settings.retentionMode` of its config). */
  static readonly layer = (mode: Retention.Mode): Layer.Layer<GenerationGate, never, Engine.Engine> =>
    Layer.effect(
      GenerationGate,
      Effect.gen(function*() {
        const engine = yield* Engine.Engine
        return yield* make({ abort: engine.abort, mode })
      })
    )
}
