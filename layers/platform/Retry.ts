/**
 * `Effect.retry` whose schedule is set up only once the effect failed: the same attempts at the same times, without
 * the retry machinery on the path where the first attempt succeeds.
 *
 * **Details**
 * `Effect.retry` builds its schedule's state and driver every time the retried effect starts (a few KiB and a dozen
 * Effect steps per call), whether or not a retry happens. For a call that succeeds almost always (an engine request),
 * {@link afterFailure} runs the effect once; only when it fails does it hand the failure to `Effect.retry` with the
 * same options, which sees that failure as its first attempt's (replayed, not run again) and retries from there. What
 * runs, when, how often and with which outcome is `Effect.retry`'s (test/platform/Retry.test.ts compares both under
 * the TestClock).
 */
import { Effect, type Schedule } from "effect"

/** The retry options {@link afterFailure} takes: a schedule, at most `times` retries, while `while` holds. */
export interface Options<E> {
  readonly schedule: Schedule.Schedule<unknown, E>
  readonly times?: number | undefined
  readonly while?: ((error: E) => boolean) | undefined
}

/** `Effect.retry(effect, options)`, with the retry set up on the first failure. */
export const afterFailure = <A, E, R>(effect: Effect.Effect<A, E, R>, options: Options<E>): Effect.Effect<A, E, R> =>
  Effect.catch(effect, (first) => {
    let replay = true
    const again = Effect.suspend(() => {
      if (!replay) return effect
      replay = false
      return Effect.fail(first)
    })
    return Effect.retry(again, options)
  })
