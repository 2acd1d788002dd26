import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Scheduler } from "effect"
import { TestClock, TestConsole } from "effect/testing"
import * as SimulationClock from "../../layers/platform/SimulationClock.ts"
import * as Dataset from "../../src/schedule/Dataset.ts"

const DURATIONS = [0, 0.25, 1, 1, 2.5, 3, 10, 250] as const
const STEPS = [0, 1, 3.5, 7, 100, 1000] as const

/**
 * Forty fibers sleeping, forking, yielding, racing sleeps (the loser's sleep is interrupted) and interrupting children,
 * driven by one seeded generator that every fiber draws from in the order they run, while the driver moves the clock
 * in random steps (now and then with `setTime`). The log records every wake with the times the fiber reads: any
 * difference in which fiber runs when, or at what time, changes the log (and the draws after it).
 */
const scenario = (seed: number) =>
  Effect.gen(function*() {
    const next = Dataset.seededRandom(seed)
    const pick = <A>(values: ReadonlyArray<A>): A => values[Math.floor(next() * values.length)]!
    const log: Array<string> = []
    const note = (event: string) =>
      Effect.gen(function*() {
        const clock = yield* Clock.Clock
        log.push(`${event} @${clock.currentTimeMillisUnsafe()} ${clock.monotonicTimeNanosUnsafe()}`)
      })
    const worker = (name: string, depth: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        const steps = 1 + Math.floor(next() * 6)
        for (let step = 0; step < steps; step++) {
          const roll = next()
          if (roll < 0.55) {
            yield* Effect.sleep(pick(DURATIONS))
            yield* note(`${name} woke`)
          } else if (roll < 0.7 && depth < 2) {
            const child = yield* Effect.forkChild(worker(`${name}.${step}`, depth + 1))
            if (next() < 0.5) {
              yield* Effect.sleep(pick(DURATIONS))
              yield* Fiber.interrupt(child)
              yield* note(`${name} interrupted ${name}.${step}`)
            }
          } else if (roll < 0.8) {
            yield* Effect.yieldNow
            yield* note(`${name} yielded`)
          } else {
            const winner = yield* Effect.race(
              Effect.as(Effect.sleep(pick(DURATIONS)), "left"),
              Effect.as(Effect.sleep(pick(DURATIONS)), "right")
            )
            yield* note(`${name} race ${winner}`)
          }
        }
        yield* note(`${name} done`)
      })
    const fibers = yield* Effect.forEach(
      Array.from({ length: 40 }, (_, index) => index),
      (index) => Effect.forkChild(worker(`w${index}`, 0))
    )
    let moves = 0
    while (fibers.some((fiber) => fiber.pollUnsafe() === undefined)) {
      if (next() < 0.05) {
        const now = yield* Clock.currentTimeMillis
        yield* TestClock.setTime(now + pick(STEPS))
      } else {
        yield* TestClock.adjust(pick(STEPS))
      }
      yield* note(`moved ${++moves}`)
    }
    return log
  })

describe("SimulationClock", () => {
  it.effect("runs every program as Effect's TestClock runs it: the same fibers wake in the same order at the same times", () =>
    Effect.gen(function*() {
      for (let seed = 1; seed <= 40; seed++) {
        const effect = yield* scenario(seed).pipe(Effect.provide(TestClock.layer()))
        const simulation = yield* scenario(seed).pipe(Effect.provide(SimulationClock.layer()))
        assert.isAbove(effect.length, 100)
        assert.deepStrictEqual(simulation, effect, `seed ${seed}`)
      }
    }))

  it.effect("forgets interrupted sleeps and answers the TestClock accessors", () =>
    Effect.gen(function*() {
      const made = yield* SimulationClock.make()
      yield* Effect.gen(function*() {
        const sleepers = yield* Effect.forEach(
          Array.from({ length: 1000 }, (_, index) => index),
          (index) => Effect.forkChild(Effect.sleep(`${index + 1} millis`))
        )
        yield* Effect.yieldNow
        assert.strictEqual(made.pendingSleeps(), 1000)
        yield* Fiber.interruptAll(sleepers.slice(0, 900))
        assert.strictEqual(made.pendingSleeps(), 100)
        yield* TestClock.adjust("950 millis")
        assert.strictEqual(made.pendingSleeps(), 50)
        assert.strictEqual(sleepers.filter((fiber) => fiber.pollUnsafe() !== undefined).length, 950)
        yield* TestClock.setTime(2000)
        assert.strictEqual(made.pendingSleeps(), 0)
        yield* Fiber.joinAll(sleepers.slice(900))
        assert.strictEqual(yield* Clock.currentTimeMillis, 2000)
        // withLive reads the clock this one was made in (the test's own TestClock, still at 0).
        assert.strictEqual(yield* TestClock.withLive(Clock.currentTimeMillis), 0)
      }).pipe(
        Effect.provideService(Clock.Clock, made.clock),
        Effect.provideService(Scheduler.Scheduler, made.scheduler)
      )
    }))

  it.effect("warns on the clock it was made in when a program sleeps and nothing moves the time", () =>
    Effect.gen(function*() {
      const made = yield* SimulationClock.make({ warningDelay: "1 second" })
      yield* Effect.forkChild(Effect.sleep("1 minute").pipe(Effect.provideService(Clock.Clock, made.clock)))
      yield* Effect.yieldNow
      assert.deepStrictEqual(yield* TestConsole.logLines, [])
      // The test's own TestClock is the "live" clock here: a second on it passes the warning delay.
      yield* TestClock.adjust("1 second")
      const lines = (yield* TestConsole.logLines).map(String).join("\n")
      assert.include(lines, "A test is using time, but is not advancing the test clock")
    }).pipe(Effect.provide(TestConsole.layer)))

  it.effect("stops waiting for a woken fiber that keeps running, with a warning, on the clock it was made in", () =>
    Effect.gen(function*() {
      const made = yield* SimulationClock.make({ warningDelay: "1 second" })
      const inSimulation = <A>(effect: Effect.Effect<A>) =>
        effect.pipe(
          Effect.provideService(Clock.Clock, made.clock),
          Effect.provideService(Scheduler.Scheduler, made.scheduler)
        )
      // Woken at 5 ms, it never suspends for good: every yield schedules its next task, so the wake never settles.
      const busy = yield* Effect.forkChild(inSimulation(Effect.gen(function*() {
        yield* Effect.sleep("5 millis")
        for (;;) yield* Effect.yieldNow
      })))
      const adjusting = yield* Effect.forkChild(inSimulation(TestClock.adjust("10 millis")))
      yield* Effect.yieldNow
      assert.strictEqual(adjusting.pollUnsafe(), undefined)
      // The test's own TestClock is the "live" clock: a second on it ends the wait.
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(adjusting)
      assert.strictEqual(made.clock.currentTimeMillisUnsafe(), 10)
      const lines = (yield* TestConsole.logLines).map(String).join("\n")
      assert.include(lines, "A fiber woken by the test clock is still running without suspending")
      yield* Fiber.interrupt(busy)
    }).pipe(Effect.provide(TestConsole.layer)))
})
