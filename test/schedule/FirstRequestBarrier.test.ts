import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as FirstRequestBarrier from "../../layers/schedule/FirstRequestBarrier.ts"

const barrierOf = (size: number) =>
  Effect.gen(function*() {
    const lease = yield* Deferred.make<boolean>()
    let ready = 0
    const barrier = yield* FirstRequestBarrier.make({
      groupId: "group-0",
      sessionIds: Array.from({ length: size }, (_, i) => `session-${i}`),
      lease,
      rolloutId: () => 3,
      onReady: Effect.sync(() => void (ready += 1))
    })
    return { barrier, lease, readyCalls: () => ready }
  })

describe("FirstRequestBarrier", () => {
  it.effect("is ready once every Session sent its first request, and holds requests until the lease", () =>
    Effect.gen(function*() {
      const { barrier, lease, readyCalls } = yield* barrierOf(2)
      const first = yield* Effect.forkChild(barrier.ticket(0).awaitLease)
      yield* Effect.yieldNow
      assert.isTrue(barrier.arrived(0))
      assert.isFalse(barrier.arrived(1))
      assert.strictEqual(readyCalls(), 0)
      const second = yield* Effect.forkChild(barrier.ticket(1).awaitLease)
      yield* Effect.yieldNow
      assert.strictEqual(readyCalls(), 1)
      assert.isUndefined(first.pollUnsafe())
      yield* Deferred.succeed(lease, true)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      // A later request passes straight through and never counts twice.
      yield* barrier.ticket(0).awaitLease
      assert.strictEqual(readyCalls(), 1)
      yield* barrier.ticket(1).firstRequest
      assert.strictEqual(barrier.ticket(1).rolloutId(), 3)
    }))

  it.effect("fails held requests with SessionClosedError when the Group is dropped", () =>
    Effect.gen(function*() {
      const { barrier, lease } = yield* barrierOf(2)
      const held = yield* Effect.forkChild(barrier.ticket(0).awaitLease)
      yield* Effect.yieldNow
      yield* Deferred.succeed(lease, false)
      const exit = yield* Fiber.await(held)
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(barrier.ticket(1).awaitLease)
      assert.strictEqual(error._tag, "SessionClosedError")
      assert.strictEqual(error.sessionId, "session-1")
    }))

  it.effect("reports the lease held only where awaitLease would pass at once with nothing to do", () =>
    Effect.gen(function*() {
      const { barrier, lease, readyCalls } = yield* barrierOf(3)
      const held = (position: number) => barrier.ticket(position).leaseHeld?.() === true
      assert.isFalse(held(0))
      const first = yield* Effect.forkChild(barrier.ticket(0).awaitLease)
      yield* Effect.yieldNow
      // Arrived, the lease not granted yet.
      assert.isFalse(held(0))
      yield* Deferred.succeed(lease, true)
      yield* Fiber.join(first)
      assert.isTrue(held(0))
      // Not arrived: its first awaitLease still counts toward the barrier (and runs onReady when it is the last).
      assert.isFalse(held(1))
      yield* barrier.ticket(1).awaitLease
      assert.isTrue(held(1))
      assert.isFalse(held(2))
      assert.strictEqual(readyCalls(), 0)
      yield* barrier.ticket(2).awaitLease
      assert.strictEqual(readyCalls(), 1)
      assert.isTrue([0, 1, 2].every(held))
    }))

  it.effect("never reports a dropped Group's lease held", () =>
    Effect.gen(function*() {
      const { barrier, lease } = yield* barrierOf(2)
      yield* Deferred.succeed(lease, false)
      yield* Effect.flip(barrier.ticket(0).awaitLease)
      assert.isTrue(barrier.arrived(0))
      assert.isFalse(barrier.ticket(0).leaseHeld?.() === true)
    }))
})
