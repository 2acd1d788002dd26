import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"

/** A scheduler whose clock advances one "millisecond" per reading and whose slices wait until `step` runs them. */
const manual = (sliceMs: number) => {
  let clock = 0
  const slices: Array<() => void> = []
  const scheduler = new FairScheduler.FairScheduler({
    sliceMs,
    now: () => clock++,
    defer: (run) => void slices.push(run)
  })
  return {
    dispatcher: scheduler.makeDispatcher(),
    pendingSlices: () => slices.length,
    step: () => slices.shift()?.()
  }
}

describe("FairScheduler", () => {
  it("runs tasks by priority, first in first out within one priority", () => {
    const { dispatcher, step } = manual(1000)
    const order: Array<string> = []
    dispatcher.scheduleTask(() => order.push("a0"), 0)
    dispatcher.scheduleTask(() => order.push("b1"), 1)
    dispatcher.scheduleTask(() => order.push("c-1"), -1)
    dispatcher.scheduleTask(() => order.push("d0"), 0)
    step()
    assert.deepStrictEqual(order, ["c-1", "a0", "d0", "b1"])
  })

  it("stops a slice when its time is used and continues in the next one, so the event loop gets a turn in between", () => {
    const { dispatcher, pendingSlices, step } = manual(4)
    const ran: Array<number> = []
    for (let i = 0; i < 10; i++) dispatcher.scheduleTask(() => ran.push(i), 0)
    assert.strictEqual(pendingSlices(), 1)
    step()
    // The clock is read once at the start and once after each task: 4 "ms" allow 4 tasks.
    assert.deepStrictEqual(ran, [0, 1, 2, 3])
    assert.strictEqual(pendingSlices(), 1)
    step()
    step()
    assert.deepStrictEqual(ran, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert.strictEqual(pendingSlices(), 0)
  })

  it("runs tasks scheduled during a slice in the same queue, and flush drains everything at once", () => {
    const { dispatcher, step } = manual(1000)
    const ran: Array<string> = []
    dispatcher.scheduleTask(() => {
      ran.push("first")
      dispatcher.scheduleTask(() => ran.push("scheduled by first"), 0)
    }, 0)
    step()
    assert.deepStrictEqual(ran, ["first", "scheduled by first"])
    dispatcher.scheduleTask(() => ran.push("flushed"), 0)
    dispatcher.flush()
    assert.deepStrictEqual(ran, ["first", "scheduled by first", "flushed"])
  })

  it("runs Effect programs: forked fibers, yields and joins complete with their results", async () => {
    const program = Effect.gen(function*() {
      const fibers = yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) =>
        Effect.gen(function*() {
          yield* Effect.yieldNow
          yield* Effect.sleep("1 millis")
          return i * 2
        }).pipe(Effect.forkChild))
      return yield* Fiber.joinAll(fibers)
    })
    const results = await Effect.runPromise(FairScheduler.provide(program))
    assert.deepStrictEqual(results, Array.from({ length: 200 }, (_, i) => i * 2))
  })

  it("numbers the task it runs (currentTask): one number through a task, a new one for the next, none outside", () => {
    const { dispatcher, step } = manual(1000)
    const seen: Array<number | undefined> = []
    assert.isUndefined(FairScheduler.currentTask())
    dispatcher.scheduleTask(() => {
      seen.push(FairScheduler.currentTask())
      seen.push(FairScheduler.currentTask())
      dispatcher.scheduleTask(() => seen.push(FairScheduler.currentTask()), 0)
    }, 0)
    dispatcher.scheduleTask(() => {
      seen.push(FairScheduler.currentTask())
      // A flush inside a task runs the queued tasks under their own numbers, then this task's number is back.
      dispatcher.flush()
      seen.push(FairScheduler.currentTask())
    }, 0)
    step()
    assert.isUndefined(FairScheduler.currentTask())
    const [a, a2, b, c, b2] = seen
    assert.strictEqual(seen.length, 5)
    assert.isDefined(a)
    assert.strictEqual(a2, a)
    assert.notStrictEqual(b, a)
    assert.notStrictEqual(c, b)
    assert.strictEqual(b2, b)
  })

  it("tells a fiber that suspended and was resumed elsewhere from one still in its task", async () => {
    const program = Effect.gen(function*() {
      yield* Effect.yieldNow
      const start = FairScheduler.currentTask()
      yield* Effect.sync(() => 1)
      const same = FairScheduler.currentTask()
      yield* Effect.sleep("1 millis")
      const afterTimer = FairScheduler.currentTask()
      yield* FairScheduler.continueAsTask
      const asTask = FairScheduler.currentTask()
      return { start, same, afterTimer, asTask }
    })
    const { start, same, afterTimer, asTask } = await Effect.runPromise(FairScheduler.provide(program))
    assert.isDefined(start)
    assert.strictEqual(same, start)
    // Resumed inside the timer's callback: no task.
    assert.isUndefined(afterTimer)
    assert.isDefined(asTask)
    assert.notStrictEqual(asTask, start)
  })
})
