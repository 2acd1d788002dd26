/**
 * The controller's Group streams (layers/cluster/GroupStreams.ts), on the TestClock over a scripted runner: a Group's
 * Sessions share one stream (opened at once when all joined, else when the window closes), a late joiner opens its
 * own, each Session gets its own events, a silent stream is followed again once naming only the Sessions not ended
 * (then given up: `ClusterCallError`), a stream that ends without a Session's result fails that Session, and the
 * stream whose Sessions all left is ended.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Queue, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as GroupCalls from "../../layers/cluster/GroupCalls.ts"
import * as GroupStreams from "../../layers/cluster/GroupStreams.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as GroupEvents from "../support/groupEvents.ts"

const silence = Duration.seconds(30)

/** One opening of a stream: the Sessions it named and the events the test sends on it. */
interface Opened {
  readonly context: string
  readonly sessions: ReadonlyArray<string>
  readonly events: Queue.Queue<ClusterWire.GroupEvent, Cause.Done>
  ended: boolean
}

const scripted = Effect.gen(function*() {
  const opened: Array<Opened> = []
  const streams = GroupStreams.make({
    scope: yield* Effect.scope,
    onGate: () => {},
    silence,
    silentRetries: 1,
    run: (context: string, sessions, onEvent) =>
      Effect.gen(function*() {
        const events = yield* Queue.unbounded<ClusterWire.GroupEvent, Cause.Done>()
        const opening: Opened = { context, sessions: sessions().map((s) => s.sessionId), events, ended: false }
        opened.push(opening)
        yield* Stream.runForEach(Stream.fromQueue(events), onEvent).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              opening.ended = true
            })
          )
        )
      })
  })
  const session = (sessionId: string, position: number, expected: number, batchKey = "g1") =>
    Effect.scoped(Effect.gen(function*() {
      const joined = yield* streams.join(batchKey, { sessionId, position }, `context of ${sessionId}`, expected)
      yield* joined.firstRequest
      return yield* joined.outcome
    }))
  return { opened, session }
})

describe("GroupStreams", () => {
  it.effect("a Group's Sessions share one stream, each reading its own events; a late joiner opens its own", () =>
    Effect.gen(function*() {
      const { opened, session } = yield* scripted
      const a = yield* Effect.forkChild(session("a", 0, 3))
      const b = yield* Effect.forkChild(session("b", 1, 3))
      yield* GroupEvents.settle
      assert.strictEqual(opened.length, 0, "opened before the window closed")
      yield* TestClock.adjust(GroupCalls.batchWindow)
      assert.deepStrictEqual(opened.map((o) => [o.context, o.sessions]), [["context of a", ["a", "b"]]])
      // The third Session joins after the stream opened: a stream of its own.
      const c = yield* Effect.forkChild(session("c", 2, 3))
      yield* TestClock.adjust(GroupCalls.batchWindow)
      assert.deepStrictEqual(opened.map((o) => o.sessions), [["a", "b"], ["c"]])
      const [ab, alone] = opened
      yield* Queue.offerAll(ab!.events, [{ _tag: "FirstRequest", sessionId: "b" }, {
        _tag: "FirstRequest",
        sessionId: "a"
      }])
      yield* Queue.offerAll(ab!.events, [GroupEvents.done("b"), { _tag: "Alive" }, GroupEvents.done("a")])
      yield* Queue.offerAll(alone!.events, [{ _tag: "FirstRequest", sessionId: "c" }, GroupEvents.done("c")])
      assert.deepStrictEqual((yield* Effect.forEach([a, b, c], Fiber.join)).map((r) => r.sessionId), ["a", "b", "c"])
    }))

  it.effect("a Group whose every Session joined opens at once; a Session's Failed event fails it alone", () =>
    Effect.gen(function*() {
      const { opened, session } = yield* scripted
      const fibers = yield* Effect.forEach(["a", "b"], (id, i) => Effect.forkChild(session(id, i, 2)))
      yield* GroupEvents.settle
      assert.deepStrictEqual(opened.map((o) => o.sessions), [["a", "b"]])
      yield* Queue.offerAll(opened[0]!.events, [
        { _tag: "FirstRequest", sessionId: "a" },
        { _tag: "FirstRequest", sessionId: "b" },
        { _tag: "Failed", sessionId: "a", type: "SessionStopped", detail: "Session a was stopped by its controller" },
        GroupEvents.done("b")
      ])
      const [a, b] = yield* Effect.forEach(fibers, (f) => Fiber.await(f))
      assert.isTrue(Exit.isFailure(a!))
      if (Exit.isFailure(a!)) {
        const error = Cause.findErrorOption(a.cause)
        assert.strictEqual(
          error._tag === "Some" && error.value._tag === "SessionFailedError" ? error.value.type : "",
          "SessionStopped"
        )
      }
      assert.isTrue(Exit.isSuccess(b!))
    }))

  it.effect("a silent stream is followed again once, naming the Sessions not ended; silent again, they fail", () =>
    Effect.gen(function*() {
      const { opened, session } = yield* scripted
      const fibers = yield* Effect.forEach(["a", "b"], (id, i) => Effect.forkChild(session(id, i, 2)))
      yield* GroupEvents.settle
      yield* Queue.offerAll(opened[0]!.events, [
        { _tag: "FirstRequest", sessionId: "a" },
        { _tag: "FirstRequest", sessionId: "b" },
        GroupEvents.done("a")
      ])
      yield* GroupEvents.settle
      // Nothing more for the longest silence: the stream is opened again for b alone.
      yield* TestClock.adjust(silence)
      assert.deepStrictEqual(opened.map((o) => o.sessions), [["a", "b"], ["b"]])
      assert.isTrue(opened[0]!.ended, "the silent stream was left open")
      assert.strictEqual((yield* Fiber.join(fibers[0]!)).sessionId, "a")
      // Silent again: b is given up with the deadline.
      yield* TestClock.adjust(silence)
      assert.strictEqual(opened.length, 2, "followed more than once")
      const b = yield* Fiber.await(fibers[1]!)
      const error = Exit.isFailure(b) ? Cause.findErrorOption(b.cause) : undefined
      assert.strictEqual(
        error?._tag === "Some" && error.value._tag === "ClusterCallError" ? error.value.reason : "",
        "deadline"
      )
    }))

  it.effect("a stream that ends without a Session's result fails it; one whose Sessions all left is ended", () =>
    Effect.gen(function*() {
      const { opened, session } = yield* scripted
      const lone = yield* Effect.forkChild(session("a", 0, 1))
      yield* GroupEvents.settle
      yield* Queue.offer(opened[0]!.events, { _tag: "FirstRequest", sessionId: "a" })
      yield* Queue.end(opened[0]!.events)
      const a = yield* Fiber.await(lone)
      const error = Exit.isFailure(a) ? Cause.findErrorOption(a.cause) : undefined
      assert.strictEqual(error?._tag === "Some" ? error.value._tag : "", "ClusterCallError")
      // Another Group's Sessions leave (their Group dropped): its stream is interrupted.
      const fibers = yield* Effect.forEach(["x", "y"], (id, i) => Effect.forkChild(session(id, i, 2, "g2")))
      yield* GroupEvents.settle
      assert.deepStrictEqual(opened[1]!.sessions, ["x", "y"])
      yield* Fiber.interrupt(fibers[0]!)
      yield* GroupEvents.settle
      assert.isFalse(opened[1]!.ended, "ended while a Session still reads it")
      yield* Fiber.interrupt(fibers[1]!)
      yield* GroupEvents.settle
      assert.isTrue(opened[1]!.ended)
    }))
})
