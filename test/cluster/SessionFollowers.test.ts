/**
 * A hosted Session's event streams (layers/cluster/SessionFollowers.ts): `Started` goes out with the stream's next
 * event, in one chunk (one cluster message and one acknowledgement, not two of each); a stream opened on a Session
 * that already asked or ended starts with `Started` all the same.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Stream } from "effect"
import * as SessionFollowers from "../../layers/cluster/SessionFollowers.ts"

const followers = (retains = false) =>
  SessionFollowers.make({ incarnation: "r1", address: "127.0.0.1:1", retains, sessions: () => [] })

const chunks = <A, E>(stream: Stream.Stream<A, E>, n: number) =>
  stream.pipe(Stream.chunks, Stream.take(n), Stream.map((chunk) => [...chunk]), Stream.runCollect)

const tags = (events: ReadonlyArray<{ readonly _tag: string }>) => events.map((e) => e._tag)

describe("SessionFollowers", () => {
  it.effect("Started waits for the next event and goes out in its chunk", () =>
    Effect.gen(function*() {
      const streams = followers()
      const hosted = SessionFollowers.initial()
      const first = yield* Effect.forkChild(chunks(streams.follow(hosted, undefined), 1))
      // The stream is open and waiting before the agent asks.
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      assert.strictEqual(hosted.followers.size, 1)
      assert.isUndefined(first.pollUnsafe(), "a chunk went out before the agent asked")
      streams.arrived(hosted)
      const [chunk] = yield* Fiber.join(first)
      assert.deepStrictEqual(tags(chunk ?? []), ["Started", "FirstRequest"])
    }))

  it.effect("a stream opened after the Session asked or ended starts with Started, then its state", () =>
    Effect.gen(function*() {
      const streams = followers(true)
      const hosted = SessionFollowers.initial()
      streams.arrived(hosted)
      const asked = yield* chunks(streams.follow(hosted, undefined), 1)
      assert.deepStrictEqual(tags(asked.flat()), ["Started", "FirstRequest", "Gate"])
      streams.ended(hosted, Exit.succeed({ sessionId: "s", samples: [], debug: [], parserFailures: 0 }))
      const done = yield* Stream.runCollect(streams.follow(hosted, undefined))
      assert.deepStrictEqual(tags(done), ["Started", "FirstRequest", "Gate", "Done"])
    }))
})
