/**
 * The active-time budget of one Session (`--agent-timeout`, default 1800 s), counted on Effect's Clock.
 *
 * **Details**
 * The budget only runs while the Session is active:
 * - `start` — the Session's Group got its Runtime lease (time spent prelaunched, waiting for a lease, is free);
 * - `pause` — the Session is parked between steps (partial rollout / fully async) or its generation is paused;
 *   a PROTECTED session is simply never paused;
 * - `resume` — generation resumes after a pause.
 *
 * All three are idempotent. When the remaining time reaches zero `expired` completes; both executors race the agent
 * against {@link timeUp} and stop it with {@link timeoutError}. Because it runs on `Clock`, whole schedules can be
 * simulated under `TestClock`.
 */
import { Clock, Deferred, Duration, Effect, FiberHandle, Option, Semaphore } from "effect"
import type { Scope } from "effect"
import * as SessionError from "../../src/session/SessionError.ts"

export interface ActiveBudget {
  /** The configured total, in seconds (what a timeout error reports). */
  readonly totalSeconds: number
  /** The Session entered Runtime: start counting. */
  readonly start: Effect.Effect<void>
  /** The Session is parked or its generation paused: stop counting. */
  readonly pause: Effect.Effect<void>
  /** Count again after a pause. */
  readonly resume: Effect.Effect<void>
  /** Time left; decreases only while active. */
  readonly remaining: Effect.Effect<Duration.Duration>
  readonly isActive: Effect.Effect<boolean>
  readonly isExpired: Effect.Effect<boolean>
  /** Completes once the budget is used up (never, if it is not). */
  readonly expired: Effect.Effect<void>
  /**
   * Run `effect` with the budget stopped (an attempt waiting for KV room: lease wait, not agent time). Holds nest: the
   * budget counts again once the last one ends, if it is started and not paused then.
   */
  readonly excluding: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/**
 * A budget of `totalSeconds` (must be > 0), initially not counting. Its timer lives in the current Scope (the
 * Session's), so closing the Session stops it.
 */
export const make = (totalSeconds: number): Effect.Effect<ActiveBudget, never, Scope.Scope> =>
  Effect.gen(function*() {
    const lock = yield* Semaphore.make(1)
    const timer = yield* FiberHandle.make<void, never>()
    const done = yield* Deferred.make<void>()
    let remainingMillis = totalSeconds * 1000
    // Counting since (the timer runs); `wanted`: started and not paused; `holds`: `excluding` calls running.
    let activeSince: number | undefined
    let wanted = false
    let holds = 0

    const serialized = lock.withPermits(1)
    let expiredNow = false
    const isDone = () => expiredNow

    // Runs in the timer fiber without the lock: `pause` holds the lock while it interrupts this fiber.
    const expire = Effect.uninterruptible(Effect.suspend(() => {
      remainingMillis = 0
      activeSince = undefined
      expiredNow = true
      return Deferred.succeed(done, undefined)
    }))

    const run = Effect.gen(function*() {
      if (!wanted || holds > 0 || activeSince !== undefined || (yield* Deferred.isDone(done))) return
      activeSince = yield* Clock.currentTimeMillis
      yield* FiberHandle.run(timer, Effect.sleep(Duration.millis(remainingMillis)).pipe(Effect.andThen(expire)))
    })

    const stop = Effect.gen(function*() {
      yield* FiberHandle.clear(timer)
      const since = activeSince
      if (since === undefined) return
      const now = yield* Clock.currentTimeMillis
      remainingMillis = Math.max(0, remainingMillis - (now - since))
      activeSince = undefined
    })

    const activate = serialized(Effect.suspend(() => {
      wanted = true
      return run
    }))

    const pause = serialized(Effect.suspend(() => {
      wanted = false
      return stop
    }))

    const hold = serialized(Effect.suspend(() => {
      holds++
      return stop
    }))

    const unhold = serialized(Effect.suspend(() => {
      holds--
      return run
    }))

    const remaining = Effect.gen(function*() {
      if (activeSince === undefined) return Duration.millis(remainingMillis)
      const now = yield* Clock.currentTimeMillis
      return Duration.millis(Math.max(0, remainingMillis - (now - activeSince)))
    })

    return {
      totalSeconds,
      start: activate.pipe(Effect.withSpan("ActiveBudget.start")),
      pause: pause.pipe(Effect.withSpan("ActiveBudget.pause")),
      resume: activate.pipe(Effect.withSpan("ActiveBudget.resume")),
      remaining: remaining.pipe(Effect.withSpan("ActiveBudget.remaining")),
      // Started and not paused (a hold stops the clock, not the Session's activity).
      isActive: Effect.sync(() => wanted && !isDone()).pipe(Effect.withSpan("ActiveBudget.isActive")),
      isExpired: Deferred.isDone(done).pipe(Effect.withSpan("ActiveBudget.isExpired")),
      expired: Deferred.await(done).pipe(Effect.withSpan("ActiveBudget.expired")),
      excluding: (effect) => Effect.acquireUseRelease(hold, () => effect, () => unhold)
    }
  })

/** The `detail` of a timeout for an agent that never sent its first model request. */
export const NoFirstRequest = "without sending its first model request"

/** Why a Session is stopped for time: `detail` says it sent no model request (else its budget ran out). */
export interface TimeUp {
  readonly detail?: string
}

/**
 * Completes when the Session must be stopped for time: its active-time budget ran out, or (with `firstRequest`, which
 * completes on the Session's first model request) it sent no model request within the budget's total of its start.
 * The budget only runs in Runtime, which an agent that never sends a request never reaches.
 */
export const timeUp = (budget: ActiveBudget, firstRequest: Effect.Effect<void> | undefined): Effect.Effect<TimeUp> => {
  const expired = budget.expired.pipe(Effect.as({}))
  if (firstRequest === undefined) return expired
  const silent = firstRequest.pipe(
    Effect.timeoutOption(Duration.seconds(budget.totalSeconds)),
    Effect.flatMap((sent) => Option.isSome(sent) ? Effect.never : Effect.succeed({ detail: NoFirstRequest }))
  )
  return Effect.raceFirst(expired, silent)
}

/** The error of an agent stopped for time (both executors answer with it). */
export const timeoutError = (
  sessionId: string,
  budget: ActiveBudget,
  up: TimeUp,
  log: { readonly logTail: string; readonly logPath?: string | undefined }
): SessionError.AgentExecutionError =>
  new SessionError.AgentExecutionError({
    sessionId,
    reason: "timeout",
    timeoutSeconds: budget.totalSeconds,
    detail: up.detail,
    ...log
  })
