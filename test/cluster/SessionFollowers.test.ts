/**
 * A runner's Group event streams (layers/cluster/SessionFollowers.ts), on the TestClock: a Group's events that come
 * within the batch window go out in one chunk (one cluster message and one acknowledgement, not one each), its first
 * requests wait for its last and its results for its last end (a failure or an end before asking does not); a stream
 * opened on Sessions that already asked or ended starts from their state, reports a refused Session at once, and ends
 * once every Session it follows has ended. Several Groups' polls (`pollMany`, a `PollRunner`) are answered together as
 * soon as one has something (at once when nothing more is due soon, else after the window, with what the others got
 * meanwhile), each in its place, all empty after the alive interval; their ends are handed over as answered, and a
 * moved shard fails the whole answer.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as SessionFollowers from "../../layers/cluster/SessionFollowers.ts"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as GroupEvents from "../support/groupEvents.ts"

const followers = (retains = false) => SessionFollowers.make({ incarnation: "r1", retains })

const chunks = <A, E>(stream: Stream.Stream<A, E>, n: number) =>
  stream.pipe(Stream.chunks, Stream.take(n), Stream.map((chunk) => [...chunk]), Stream.runCollect)

const named = (events: ReadonlyArray<ClusterWire.GroupEvent>) =>
  events.map((e) => e._tag === "Alive" ? e._tag : `${e._tag} ${e.sessionId}`)

/** Runner streams that record the Sessions whose end an answer carried (`answered`). */
const answering = (retains = false) => {
  const answered: Array<string> = []
  const streams = SessionFollowers.make({
    incarnation: "r1",
    retains,
    answered: (sessions) => Effect.sync(() => void answered.push(...sessions.map((s) => s.sessionId)))
  })
  return { answered, streams }
}

/** What a poll's controller has seen of a Session it has not heard from yet: nothing. */
const unseen = (): SessionFollowers.Known => ({ arrived: false, gate: null })

/**
 * One answer to several Groups' polls (a `PollRunner`) through `placement`: each Group's Sessions with what its
 * controller has seen of them (nothing, unless `known` says), each poll's events named.
 */
const answers = (
  streams: ReturnType<typeof SessionFollowers.make>,
  polls: ReadonlyArray<{
    readonly sessions: ReadonlyArray<SessionFollowers.Followed>
    readonly known?: (sessionId: string) => SessionFollowers.Known | undefined
  }>,
  placement?: SessionFollowers.Placement
) =>
  Effect.map(
    streams.pollMany(polls.map((p) => ({ sessions: p.sessions, refused: [], known: p.known ?? unseen })), placement),
    (events) => events.map(named)
  )

/** Every chunk of a stream, its events named. */
const namedChunks = <E>(stream: Stream.Stream<ClusterWire.GroupEvent, E>) =>
  stream.pipe(Stream.chunks, Stream.map((chunk) => named([...chunk])), Stream.runCollect)

describe("SessionFollowers", () => {
  it.effect("a Group's first requests within the window go out in one chunk", () =>
    Effect.gen(function*() {
      const streams = followers()
      const a = SessionFollowers.initial("a")
      const b = SessionFollowers.initial("b")
      const first = yield* Effect.forkChild(chunks(streams.follow([a, b], [], undefined), 1))
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      assert.strictEqual(streams.open(), 1)
      streams.arrived(a)
      // The reader took `a` and waits out the window; `b` asks within it.
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      assert.isUndefined(first.pollUnsafe(), "a chunk went out before the window closed")
      streams.arrived(b)
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      const [chunk] = yield* Fiber.join(first)
      assert.deepStrictEqual(named(chunk ?? []), ["FirstRequest a", "FirstRequest b"])
    }))

  it.effect("first requests wait for the Group's last, results for its last end: one chunk each however apart", () =>
    Effect.gen(function*() {
      const streams = followers()
      const [a, b, c] = ["a", "b", "c"].map(SessionFollowers.initial)
      const collected = yield* Effect.forkChild(namedChunks(streams.follow([a!, b!, c!], [], undefined)))
      // The agents ask a second apart, then end a second apart.
      for (const s of [a!, b!, c!]) {
        streams.arrived(s)
        yield* TestClock.adjust("1 second")
      }
      for (const s of [c!, a!, b!]) {
        streams.ended(s, Exit.succeed(GroupEvents.emptyResult(s.sessionId)))
        yield* TestClock.adjust("1 second")
      }
      assert.deepStrictEqual(yield* Fiber.join(collected), [
        ["FirstRequest a", "FirstRequest b", "FirstRequest c"],
        ["Done c", "Done a", "Done b"]
      ])
    }))

  it.effect("a failure, or the end of a Session that never asked, goes out at once with what was held", () =>
    Effect.gen(function*() {
      const streams = followers()
      const [a, b, c] = ["a", "b", "c"].map(SessionFollowers.initial)
      const collected = yield* Effect.forkChild(namedChunks(streams.follow([a!, b!, c!], [], undefined)))
      streams.arrived(a!)
      yield* TestClock.adjust("1 second")
      // `c` exits without asking: its Group is dropped, so its end does not wait.
      streams.ended(c!, Exit.succeed(GroupEvents.emptyResult("c")))
      yield* TestClock.adjust("1 second")
      streams.arrived(b!)
      yield* TestClock.adjust("1 second")
      streams.ended(a!, Exit.succeed(GroupEvents.emptyResult("a")))
      yield* TestClock.adjust("1 second")
      streams.ended(
        b!,
        Exit.fail(new ClusterWire.SessionFailedError({ type: "AgentExecutionError", detail: "exit 1" }))
      )
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* Fiber.join(collected), [
        ["FirstRequest a", "Done c"],
        ["FirstRequest b"],
        ["Done a", "Failed b"]
      ])
    }))

  it.effect("a stream opened on Sessions that asked or ended starts from their state and ends with the last", () =>
    Effect.gen(function*() {
      const streams = followers(true)
      const a = SessionFollowers.initial("a")
      const b = SessionFollowers.initial("b")
      streams.arrived(a)
      streams.ended(a, Exit.succeed(GroupEvents.emptyResult("a")))
      streams.arrived(b)
      const refused = {
        sessionId: "c",
        error: new ClusterWire.SessionFailedError({ type: "SessionStopped", detail: "Session c was stopped" })
      }
      const collected = yield* Effect.forkChild(Stream.runCollect(streams.follow([a, b], [refused], undefined)))
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      assert.isUndefined(collected.pollUnsafe(), "the stream ended while b still runs")
      streams.ended(b, Exit.fail(new ClusterWire.SessionFailedError({ type: "AgentExecutionError", detail: "exit 1" })))
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      const events = yield* Fiber.join(collected)
      assert.deepStrictEqual(named(events), [
        "Failed c",
        "FirstRequest a",
        "Gate a",
        "Done a",
        "FirstRequest b",
        "Gate b",
        "Failed b"
      ])
      assert.strictEqual(streams.open(), 0)
      // Following an ended Session again reports how it ended, and the stream ends at once.
      const again = yield* Effect.forkChild(Stream.runCollect(streams.follow([a], [], undefined)))
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      assert.deepStrictEqual(named(yield* Fiber.join(again)), ["FirstRequest a", "Gate a", "Done a"])
    }))

  it.effect("a poll answers only what its controller has not seen: at once, or nothing after the alive interval", () =>
    Effect.gen(function*() {
      const { answered, streams } = answering(true)
      const [a, b] = ["a", "b"].map(SessionFollowers.initial)
      const poll = (known: (sessionId: string) => SessionFollowers.Known | undefined) =>
        Effect.forkChild(Effect.map(answers(streams, [{ sessions: [a!, b!], known }]), ([events]) => events!))
      // A first poll: each Session's gate state is new to the controller; they go out at once.
      const first = yield* poll(unseen)
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      assert.deepStrictEqual(yield* Fiber.join(first), ["Gate a", "Gate b"])
      const gate = { interrupted: false, protected: false }
      const seen = (arrived: ReadonlyArray<string>) => (sessionId: string): SessionFollowers.Known => ({
        arrived: arrived.includes(sessionId),
        gate
      })
      // Nothing new: `a` asked but its first request waits for `b`'s; the answer is empty after the interval.
      const quiet = yield* poll(seen([]))
      streams.arrived(a!)
      yield* TestClock.adjust(SessionFollowers.aliveInterval)
      assert.deepStrictEqual(yield* Fiber.join(quiet), [])
      assert.strictEqual(streams.open(), 0, "a poll's follower outlived its answer")
      // The next poll starts from the state: `a`'s first request, with `b`'s once it asks.
      const asked = yield* poll(seen([]))
      streams.arrived(b!)
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      assert.deepStrictEqual(yield* Fiber.join(asked), ["FirstRequest a", "FirstRequest b"])
      // Seen: not repeated. The ends come together, and the Sessions they name are handed over as answered.
      const ends = yield* poll(seen(["a", "b"]))
      streams.ended(a!, Exit.succeed(GroupEvents.emptyResult("a")))
      yield* TestClock.adjust("1 second")
      assert.isUndefined(ends.pollUnsafe(), "a result went out before the Group's last end")
      assert.deepStrictEqual(answered, [])
      streams.ended(b!, Exit.succeed(GroupEvents.emptyResult("b")))
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      assert.deepStrictEqual(yield* Fiber.join(ends), ["Done a", "Done b"])
      assert.deepStrictEqual(answered, ["a", "b"])
    }))

  it.effect("polls answered together: at once when one Group has events, the others empty and asking again", () =>
    Effect.gen(function*() {
      const { streams } = answering()
      const [a, b, c] = ["a", "b", "c"].map(SessionFollowers.initial)
      // Group 1's agents both asked: nothing more is due soon, so the answer goes without the batch window.
      streams.arrived(a!)
      streams.arrived(b!)
      const both = yield* Effect.forkChild(answers(streams, [{ sessions: [a!, b!] }, { sessions: [c!] }]))
      yield* GroupEvents.settle
      assert.deepStrictEqual(both.pollUnsafe(), Exit.succeed([["FirstRequest a", "FirstRequest b"], []]))
      assert.strictEqual(streams.open(), 0, "a poll's follower outlived its answer")
      // Group 2's agent asks between its polls: its next poll reports it (the runner keeps the state, not the event).
      streams.arrived(c!)
      const next = yield* Effect.forkChild(answers(streams, [{ sessions: [c!] }]))
      yield* GroupEvents.settle
      assert.deepStrictEqual(next.pollUnsafe(), Exit.succeed([["FirstRequest c"]]))
    }))

  it.effect("a Group that may have more soon keeps the answer open for the window: the others' events join it", () =>
    Effect.gen(function*() {
      const { streams } = answering()
      const [a, b, c] = ["a", "b", "c"].map(SessionFollowers.initial)
      const both = yield* Effect.forkChild(answers(streams, [{ sessions: [a!, b!] }, { sessions: [c!] }]))
      yield* GroupEvents.settle
      // `b` fails (at once) while `a` has not asked yet: the window opens; Group 2's agent asks within it.
      streams.ended(
        b!,
        Exit.fail(new ClusterWire.SessionFailedError({ type: "AgentExecutionError", detail: "exit 1" }))
      )
      yield* GroupEvents.settle
      streams.arrived(c!)
      yield* GroupEvents.settle
      assert.isUndefined(both.pollUnsafe(), "answered before the window closed")
      yield* TestClock.adjust(SessionFollowers.batchWindow)
      assert.deepStrictEqual(yield* Fiber.join(both), [["Failed b"], ["FirstRequest c"]])
    }))

  it.effect("polls with nothing new are all answered empty after the alive interval", () =>
    Effect.gen(function*() {
      const { answered, streams } = answering()
      const [a, c] = ["a", "c"].map(SessionFollowers.initial)
      const both = yield* Effect.forkChild(answers(streams, [{ sessions: [a!] }, { sessions: [c!] }]))
      yield* TestClock.adjust(Duration.subtract(SessionFollowers.aliveInterval, Duration.millis(1)))
      assert.isUndefined(both.pollUnsafe(), "answered before the alive interval")
      yield* TestClock.adjust(Duration.millis(1))
      assert.deepStrictEqual(yield* Fiber.join(both), [[], []])
      assert.strictEqual(streams.open(), 0, "a poll's follower outlived its answer")
      assert.deepStrictEqual(answered, [])
    }))

  it.effect("a poll whose Sessions all ended is answered at once; the ends of every poll are handed over", () =>
    Effect.gen(function*() {
      const { answered, streams } = answering()
      const [a, b, c, d] = ["a", "b", "c", "d"].map(SessionFollowers.initial)
      streams.ended(a!, Exit.succeed(GroupEvents.emptyResult("a")))
      streams.ended(b!, Exit.succeed(GroupEvents.emptyResult("b")))
      streams.ended(d!, Exit.fail(new ClusterWire.SessionFailedError({ type: "SessionStopped", detail: "stopped" })))
      const three = yield* Effect.forkChild(
        answers(streams, [{ sessions: [a!, b!] }, { sessions: [c!] }, { sessions: [d!] }])
      )
      yield* GroupEvents.settle
      assert.deepStrictEqual(three.pollUnsafe(), Exit.succeed([["Done a", "Done b"], [], ["Failed d"]]))
      assert.deepStrictEqual(answered, ["a", "b", "d"])
    }))

  it.effect("a moved shard fails the whole answer (NotHolderError), whichever poll's follower it reached", () =>
    Effect.gen(function*() {
      const { streams } = answering()
      yield* Effect.forkChild(streams.start)
      let owned = true
      const [a, c] = ["a", "c"].map(SessionFollowers.initial)
      const both = yield* Effect.forkChild(
        answers(streams, [{ sessions: [a!] }, { sessions: [c!] }], { key: "moved", owned: () => owned })
      )
      yield* TestClock.adjust("500 millis")
      assert.isUndefined(both.pollUnsafe(), "answered while the shard was this runner's")
      owned = false
      yield* TestClock.adjust("500 millis")
      const error = yield* Effect.flip(Fiber.join(both))
      assert.strictEqual(error._tag, "NotHolderError")
      assert.strictEqual(streams.open(), 0)
    }))
})
