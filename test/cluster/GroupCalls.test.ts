/**
 * The controller's per-Group calls (layers/cluster/GroupCalls.ts), on the TestClock: the calls of one Group issued
 * within the batch window become one call naming all their Sessions, a later call opens a new batch, another Group's
 * calls go apart; a Session interrupted while it waits does not cancel its batch. The `Touch` loop sends one call a
 * Group with its running Sessions, none for a Group whose Sessions all ended, and skips a Group whose last call has
 * not answered. The receipts of Session ends ride the next poll to their runner, or go as one call after a delay.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as GroupCalls from "../../layers/cluster/GroupCalls.ts"

describe("GroupCalls", () => {
  it.effect("a Group's calls within the window are one call; a later one and another Group's go apart", () =>
    Effect.gen(function*() {
      const sent: Array<[string, ReadonlyArray<string>]> = []
      const call = GroupCalls.batcher({
        scope: yield* Effect.scope,
        send: (context: string, sessionIds) => Effect.sync(() => void sent.push([context, [...sessionIds]]))
      })
      const waiting = yield* Effect.forkChild(
        Effect.all(
          [call("g1", "s1", "to g1"), call("g1", "s2", "ignored"), call("g2", "t1", "to g2"), call("g1", "s3", "x")],
          { concurrency: "unbounded" }
        )
      )
      yield* Effect.yieldNow
      assert.deepStrictEqual(sent, [], "sent before the window closed")
      yield* TestClock.adjust(GroupCalls.batchWindow)
      yield* Fiber.join(waiting)
      assert.deepStrictEqual(sent, [["to g1", ["s1", "s2", "s3"]], ["to g2", ["t1"]]])
      const later = yield* Effect.forkChild(call("g1", "s4", "again"))
      yield* TestClock.adjust(GroupCalls.batchWindow)
      yield* Fiber.join(later)
      assert.deepStrictEqual(sent.slice(2), [["again", ["s4"]]])
    }))

  it.effect("a Session interrupted while it waits leaves its batch to the others; a failure reaches every caller", () =>
    Effect.gen(function*() {
      const sent: Array<ReadonlyArray<string>> = []
      const call = GroupCalls.batcher({
        scope: yield* Effect.scope,
        send: (_: undefined, sessionIds) =>
          Effect.andThen(Effect.sync(() => void sent.push([...sessionIds])), Effect.fail("refused" as const))
      })
      const opener = yield* Effect.forkChild(call("g", "s1", undefined))
      const other = yield* Effect.forkChild(Effect.flip(call("g", "s2", undefined)))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(opener)
      yield* TestClock.adjust(GroupCalls.batchWindow)
      assert.strictEqual(yield* Fiber.join(other), "refused")
      assert.deepStrictEqual(sent, [["s1", "s2"]])
    }))

  it.effect("the Touch loop: one call a Group with its running Sessions, none while its last call is unanswered", () =>
    Effect.gen(function*() {
      const interval = Duration.seconds(5)
      const touched: Array<[string, ReadonlyArray<string>]> = []
      const answer = yield* Deferred.make<void>()
      const touching = GroupCalls.toucher({
        scope: yield* Effect.scope,
        interval,
        touch: (context: string, sessionIds) =>
          Effect.andThen(
            Effect.sync(() => void touched.push([context, [...sessionIds]])),
            context === "slow" ? Deferred.await(answer) : Effect.void
          )
      })
      yield* touching.start
      touching.add("g1", "s1", "g1")
      touching.add("g1", "s2", "g1")
      touching.add("g2", "t1", "slow")
      touching.add("g3", "u1", "g3")
      touching.remove("g3", "u1")
      yield* TestClock.adjust(interval)
      assert.deepStrictEqual(touched, [["g1", ["s1", "s2"]], ["slow", ["t1"]]])
      touching.remove("g1", "s1")
      yield* TestClock.adjust(interval)
      // g2's first Touch has not answered: it is not sent again meanwhile.
      assert.deepStrictEqual(touched.slice(2), [["g1", ["s2"]]])
      yield* Deferred.succeed(answer, undefined)
      yield* TestClock.adjust(interval)
      assert.deepStrictEqual(touched.slice(3), [["g1", ["s2"]], ["slow", ["t1"]]])
    }))

  it.effect("receipts ride the next poll to their runner; those no poll took go as one call after the delay", () =>
    Effect.gen(function*() {
      const sent: Array<[string, ReadonlyArray<string>]> = []
      const receipts = GroupCalls.receipts({
        scope: yield* Effect.scope,
        delay: GroupCalls.receiptDelay,
        send: (context: string, sessionIds) => Effect.sync(() => void sent.push([context, [...sessionIds]]))
      })
      // A Group's ends, then the next poll to the same runner: they ride it, no call of their own.
      yield* receipts.add("r1", "to r1", ["a", "b"])
      yield* receipts.add("r1", "ignored", ["c"])
      assert.deepStrictEqual(receipts.take("r1"), ["a", "b", "c"])
      assert.deepStrictEqual(receipts.take("r1"), [])
      // Ends that come after: the first list's delay must not send them early.
      yield* TestClock.adjust(Duration.millis(600))
      yield* receipts.add("r1", "later", ["d"])
      yield* receipts.add("r2", "to r2", ["x"])
      yield* TestClock.adjust(Duration.millis(600))
      assert.deepStrictEqual(sent, [], "sent before their own delay")
      assert.deepStrictEqual(receipts.take("r2"), ["x"])
      yield* TestClock.adjust(GroupCalls.receiptDelay)
      // No poll to r1 took "d": one call; r2's went with a poll.
      assert.deepStrictEqual(sent, [["later", ["d"]]])
      assert.deepStrictEqual(receipts.take("r1"), [])
    }))
})
