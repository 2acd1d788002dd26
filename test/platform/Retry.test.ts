import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber, Schedule } from "effect"
import { TestClock } from "effect/testing"
import * as Retry from "../../layers/platform/Retry.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

/** What one attempt does: succeed, fail with an error the `while` predicate retries, or fail with one it does not. */
type Outcome = "ok" | "retryable" | "final"

interface Failure {
  readonly retryable: boolean
  readonly attempt: number
}

const random = SeededRandom.ints

interface Case {
  readonly script: ReadonlyArray<Outcome>
  readonly schedule: Schedule.Schedule<unknown, Failure>
  readonly times: number | undefined
  /** Interrupt the retrying fiber after this many simulated milliseconds (undefined: never). */
  readonly interruptAt: number | undefined
}

const makeCase = (seed: number): Case => {
  const next = random(seed)
  const outcomes: ReadonlyArray<Outcome> = ["ok", "retryable", "retryable", "retryable", "final"]
  const script = Array.from({ length: 1 + next(8) }, () => outcomes[next(outcomes.length)]!)
  const schedules: ReadonlyArray<Schedule.Schedule<unknown, Failure>> = [
    Schedule.exponential(`${1 + next(50)} millis`),
    Schedule.spaced(`${next(30)} millis`),
    Schedule.recurs(next(5)),
    Schedule.max([Schedule.exponential(`${1 + next(20)} millis`, 1.5), Schedule.recurs(next(6))])
  ]
  return {
    script,
    schedule: schedules[next(schedules.length)]!,
    times: next(6),
    interruptAt: next(4) === 0 ? next(200) : undefined
  }
}

/** Run `retried` over `c`'s script under the TestClock: each attempt's index and time (from the start), and the exit. */
const trace = (
  c: Case,
  retried: (
    attempt: Effect.Effect<string, Failure>,
    options: Retry.Options<Failure>
  ) => Effect.Effect<string, Failure>
) =>
  Effect.gen(function*() {
    const log: Array<readonly [number, number]> = []
    const start = yield* Clock.currentTimeMillis
    let attempt = 0
    const once = Effect.gen(function*() {
      const index = attempt++
      log.push([index, (yield* Clock.currentTimeMillis) - start])
      const outcome = c.script[Math.min(index, c.script.length - 1)]!
      if (outcome === "ok") return `ok at ${index}`
      return yield* Effect.fail({ retryable: outcome === "retryable", attempt: index })
    })
    const fiber = yield* Effect.forkChild(
      retried(once, { schedule: c.schedule, times: c.times, while: (error) => error.retryable })
    )
    // One adjustment wakes every sleep up to its end in order, those registered meanwhile included.
    if (c.interruptAt !== undefined) {
      yield* TestClock.adjust(`${c.interruptAt} millis`)
      yield* Fiber.interrupt(fiber)
    }
    yield* TestClock.adjust("1 hour")
    const exit = yield* Fiber.await(fiber)
    return { log, exit: Exit.isSuccess(exit) ? exit.value : Exit.hasInterrupts(exit) ? "interrupted" : exit.cause }
  })

describe("Retry.afterFailure", () => {
  it.effect("makes the attempts of Effect.retry at the same times with the same outcome (400 random cases)", () =>
    Effect.gen(function*() {
      for (let seed = 1; seed <= 400; seed++) {
        const c = makeCase(seed)
        const expected = yield* trace(c, (attempt, options) => Effect.retry(attempt, options))
        const actual = yield* trace(c, Retry.afterFailure)
        assert.deepStrictEqual(actual, expected, `seed ${seed}: ${JSON.stringify(c.script)} times ${c.times}`)
      }
    }))

  it.effect("runs a first attempt that succeeds once, with no retry", () =>
    Effect.gen(function*() {
      let runs = 0
      const result = yield* Retry.afterFailure(Effect.sync(() => ++runs), {
        schedule: Schedule.exponential("1 second"),
        times: 3
      })
      assert.strictEqual(result, 1)
      assert.strictEqual(runs, 1)
    }))
})
