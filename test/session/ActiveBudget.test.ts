/**
 * The active-time budget's holds (`excluding`: an attempt waiting for KV room is lease wait, not agent time), under
 * TestClock: the clock stops while any hold runs and counts again after the last, a pause during a hold stays a pause,
 * and an interrupted hold ends too.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as ActiveBudget from "../../layers/session/ActiveBudget.ts"

const remainingSeconds = (budget: ActiveBudget.ActiveBudget) =>
  Effect.map(budget.remaining, (left) => Duration.toSeconds(left))

describe("active-time budget holds", () => {
  it.effect("stop the clock while any hold runs", () =>
    Effect.scoped(Effect.gen(function*() {
      const budget = yield* ActiveBudget.make(100)
      yield* budget.start
      yield* TestClock.adjust("10 seconds")
      const first = yield* Effect.forkChild(budget.excluding(Effect.sleep("20 seconds")))
      const second = yield* Effect.forkChild(budget.excluding(Effect.sleep("30 seconds")))
      yield* TestClock.adjust("20 seconds")
      yield* Fiber.join(first)
      assert.strictEqual(yield* remainingSeconds(budget), 90, "one hold still runs")
      assert.isTrue(yield* budget.isActive, "a held budget's Session is still active")
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(second)
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* remainingSeconds(budget), 85)
    })))

  it.effect("keep a pause that came during a hold, and end with an interrupted hold", () =>
    Effect.scoped(Effect.gen(function*() {
      const budget = yield* ActiveBudget.make(100)
      yield* budget.start
      const held = yield* Effect.forkChild(budget.excluding(Effect.never))
      yield* TestClock.adjust("5 seconds")
      yield* budget.pause
      yield* Fiber.interrupt(held)
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* remainingSeconds(budget), 100)
      assert.isFalse(yield* budget.isActive)
      yield* budget.resume
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* remainingSeconds(budget), 95)
    })))
})
