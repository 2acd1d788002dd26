/**
 * The controller following a whole Group by polls (layers/cluster/GroupPolls.ts), on the TestClock over a scripted
 * holder: each poll names the Sessions not ended with what the controller has seen of them, each event reaches its
 * Session once (a first request repeated by the runner is not counted twice), the Sessions whose end an answer carried
 * are released, an unanswered poll is asked again once and then its Sessions fail with the deadline, and interrupting
 * the Group ends the Sessions not ended with the interrupt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Queue } from "effect"
import { TestClock } from "effect/testing"
import * as GroupPolls from "../../layers/cluster/GroupPolls.ts"
import type * as GroupStreams from "../../layers/cluster/GroupStreams.ts"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as GroupEvents from "../support/groupEvents.ts"

const silence = Duration.seconds(30)

/** One poll the scripted holder received: what it named, and its answer (given by the test). */
interface Asked {
  readonly context: string
  readonly sessions: ReadonlyArray<ClusterWire.PolledSession>
  readonly answer: Deferred.Deferred<ReadonlyArray<ClusterWire.GroupEvent>, GroupStreams.StreamError>
}

/** A Group of `ids` followed by polls to a scripted holder; what each Session saw and how it ended. */
const scripted = (ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const polls = yield* Queue.unbounded<Asked>()
    const asked: Array<Asked> = []
    const firstRequests: Array<string> = []
    const ends = new Map<string, Exit.Exit<ClusterWire.SessionResult, GroupStreams.StreamError>>()
    const released: Array<string> = []
    const follow = GroupPolls.make({
      onGate: () => {},
      silentRetries: 1,
      // As the controller's message to the holder: unanswered within the call deadline, it fails with it.
      poll: (context: string, sessions) =>
        Effect.gen(function*() {
          const answer = yield* Deferred.make<ReadonlyArray<ClusterWire.GroupEvent>, GroupStreams.StreamError>()
          const poll = { context, sessions, answer }
          asked.push(poll)
          yield* Queue.offer(polls, poll)
          return yield* Deferred.await(answer).pipe(
            Effect.timeoutOrElse({
              duration: silence,
              orElse: () => Effect.fail(new ClusterError.ClusterCallError({ reason: "deadline", detail: "a poll" }))
            })
          )
        })
    })
    const readers = ids.map((sessionId, position): GroupStreams.Reader => ({
      session: { sessionId, position },
      firstRequest: Effect.sync(() => void firstRequests.push(sessionId)),
      end: (exit) => Effect.sync(() => void ends.set(sessionId, exit))
    }))
    const fiber = yield* Effect.forkChild(
      follow("holder", readers, (sessionIds) => Effect.sync(() => void released.push(...sessionIds)))
    )
    /** The next poll the holder receives. */
    const next = Queue.take(polls)
    const answer = (poll: Asked, events: ReadonlyArray<ClusterWire.GroupEvent>) =>
      Effect.andThen(Deferred.succeed(poll.answer, events), GroupEvents.settle)
    return { asked, answer, ends, fiber, firstRequests, next, released }
  })

/** What a poll named: each Session and whether its first request was seen. */
const named = (poll: Asked) => poll.sessions.map((s) => `${s.sessionId}${s.arrived ? " asked" : ""}`)

describe("GroupPolls", () => {
  it.effect("each poll names the Sessions not ended and what was seen; each event reaches its Session once", () =>
    Effect.gen(function*() {
      const { answer, ends, fiber, firstRequests, next, released } = yield* scripted(["a", "b", "c"])
      const first = yield* next
      assert.strictEqual(first.context, "holder")
      assert.deepStrictEqual(named(first), ["a", "b", "c"])
      yield* answer(first, [{ _tag: "FirstRequest", sessionId: "a" }, { _tag: "FirstRequest", sessionId: "b" }])
      // Nothing new (the runner is there): an empty answer, and the next poll.
      const second = yield* next
      assert.deepStrictEqual(named(second), ["a asked", "b asked", "c"])
      yield* answer(second, [])
      const third = yield* next
      // A first request the runner repeats is not counted twice.
      yield* answer(third, [
        { _tag: "FirstRequest", sessionId: "a" },
        { _tag: "FirstRequest", sessionId: "c" },
        { _tag: "Failed", sessionId: "c", type: "AgentExecutionError", detail: "exit 1" }
      ])
      assert.deepStrictEqual(firstRequests, ["a", "b", "c"])
      assert.deepStrictEqual(released, ["c"])
      const fourth = yield* next
      assert.deepStrictEqual(named(fourth), ["a asked", "b asked"])
      yield* answer(fourth, [GroupEvents.done("b"), GroupEvents.done("a")])
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(released, ["c", "b", "a"])
      assert.deepStrictEqual([...ends.keys()], ["c", "b", "a"])
      const c = ends.get("c")
      const error = c !== undefined && Exit.isFailure(c) ? Cause.findErrorOption(c.cause) : undefined
      assert.strictEqual(
        error?._tag === "Some" && error.value._tag === "SessionFailedError" ? error.value.type : "",
        "AgentExecutionError"
      )
      assert.isTrue(Exit.isSuccess(ends.get("a")!) && Exit.isSuccess(ends.get("b")!))
    }))

  it.effect("an unanswered poll is asked again once; unanswered again, its Sessions fail with the deadline", () =>
    Effect.gen(function*() {
      const { answer, asked, ends, fiber, next } = yield* scripted(["a", "b"])
      yield* answer(yield* next, [GroupEvents.done("a")])
      const silent = yield* next
      assert.deepStrictEqual(named(silent), ["b"])
      yield* TestClock.adjust(silence)
      yield* GroupEvents.settle
      assert.strictEqual(asked.length, 3, "the unanswered poll was not asked again")
      // An answer after one silent poll resets the count.
      yield* answer(asked[2]!, [])
      yield* next
      yield* TestClock.adjust(silence)
      yield* next
      yield* TestClock.adjust(silence)
      yield* Fiber.join(fiber)
      assert.strictEqual(asked.length, 5)
      const b = ends.get("b")
      const error = b !== undefined && Exit.isFailure(b) ? Cause.findErrorOption(b.cause) : undefined
      assert.strictEqual(
        error?._tag === "Some" && error.value._tag === "ClusterCallError" ? error.value.reason : "",
        "deadline"
      )
      assert.isTrue(Exit.isSuccess(ends.get("a")!))
    }))

  it.effect("interrupting the Group ends every Session not ended with the interrupt", () =>
    Effect.gen(function*() {
      const { answer, ends, fiber, next } = yield* scripted(["a", "b"])
      yield* answer(yield* next, [GroupEvents.done("a")])
      yield* next
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isSuccess(ends.get("a")!))
      const b = ends.get("b")
      assert.isTrue(b !== undefined && Exit.isFailure(b) && Cause.hasInterruptsOnly(b.cause))
    }))
})
