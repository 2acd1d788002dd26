/**
 * A request whose Session waits for its lease waits parked (layers/gateway/LeaseParking.ts): the real gateway,
 * generation core and embedded engine, a Session whose lease the test holds back. The request is run up to its lease
 * wait (`Generation.prepare`: its observation committed) and its fiber ends; once the lease is granted the rest runs
 * (`Generation.complete`), answered as a request whose lease was held, with the wait counted in the lease-wait metric.
 * A dropped Group answers parked requests as before (404 `session_discarded`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Metric } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Answer from "../../layers/gateway/Answer.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Instruments from "../../layers/observability/Instruments.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as SessionError from "../../src/session/SessionError.ts"
import * as OpenStream from "../support/openStream.ts"
import * as SupportSessions from "../support/sessions.ts"

/** How often the gateway's generation core was asked to generate in one fiber, to prepare, and to complete. */
interface Calls {
  generate: number
  prepare: number
  complete: number
}

/** The generation core, counting its calls. */
const counted = (calls: Calls) =>
  Layer.effect(
    Generation.Generation,
    Effect.gen(function*() {
      const core = yield* Generation.Generation
      const { prepare, complete } = core
      if (prepare === undefined || complete === undefined) throw new Error("the generation core cannot park")
      return Generation.Generation.of({
        ...core,
        generate: (session, request) => Effect.suspend(() => (calls.generate++, core.generate(session, request))),
        prepare: (session, request) => Effect.suspend(() => (calls.prepare++, prepare(session, request))),
        complete: (prepared, from) => Effect.suspend(() => (calls.complete++, complete(prepared, from)))
      })
    })
  ).pipe(Layer.provide(Generation.Generation.layer({})))

const stack = (calls: Calls) =>
  Gateway.Gateway.layer({ heartbeatInterval: "15 seconds" }).pipe(
    Layer.provideMerge(counted(calls)),
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(Sessions.Sessions.layer),
    Layer.provideMerge(EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, seed: 7 })),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )

/** The gateway over the counted generation core, and how to register a Session with it (scoped). */
const gatewayUnderTest = Effect.gen(function*() {
  const calls: Calls = { generate: 0, prepare: 0, complete: 0 }
  const context = yield* Layer.build(stack(calls))
  const sessions = Context.get(context, Sessions.Sessions)
  const forests = Context.get(context, Forests.Forests)
  const register = (entry: (sessionId: string) => Partial<Sessions.SessionEntry>) =>
    Effect.gen(function*() {
      const sessionId = yield* sessions.newSessionId
      yield* forests.create(sessionId)
      yield* sessions.register(
        SupportSessions.sessionEntry(sessionId, {
          sampling: SupportSessions.sampling({ seed: 7 }),
          ...entry(sessionId)
        })
      )
      return sessionId
    })
  const url = `${Context.get(context, Gateway.Gateway).baseUrl}/v1/chat/completions`
  return { calls, forests, register, url }
})

const body = (stream: boolean) =>
  JSON.stringify({ model: "m", max_tokens: 8, stream, messages: [{ role: "user", content: "What is 2 + 2?" }] })

/** A JSON chat request: its status and body. */
const post = (url: string, sessionId: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${sessionId}`, "content-type": "application/json" },
      body: body(false)
    })
    return { status: response.status, text: await response.text() }
  })

/** A lease the test grants (`true`) or drops (`false`), as a Group's first-request barrier gives it. */
const heldBackLease = Effect.gen(function*() {
  const lease = yield* Deferred.make<boolean>()
  const state = { granted: false, awaited: 0 }
  const awaitLease = Effect.suspend(() => {
    state.awaited++
    return Deferred.await(lease)
  })
  return {
    state,
    lease,
    entry: (sessionId: string): Partial<Sessions.SessionEntry> => ({
      awaitLease: Effect.flatMap(awaitLease, (ok) => {
        if (!ok) return Effect.fail(new SessionError.SessionClosedError({ sessionId }))
        state.granted = true
        return Effect.void
      }),
      leaseHeld: () => state.granted
    })
  }
})

/** Let the gateway's I/O and tasks run until `done` (real I/O on loopback; no time passes on the TestClock). */
const until = (done: () => boolean) =>
  Effect.gen(function*() {
    while (!done()) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
  })

/** The completion's message content, from a JSON answer or from the SSE frames of a streamed one. */
const contentOf = (text: string, stream: boolean): string => {
  if (!stream) {
    return (JSON.parse(text) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content
  }
  return text.split("\n").filter((line) => line.startsWith("data: {")).map((line) =>
    (JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? ""
  ).join("")
}

describe("a request waiting for its lease (LeaseParking)", () => {
  it.effect("is parked after its observation and answered once the lease is granted, as with the lease held", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { calls, forests, register, url } = yield* gatewayUnderTest
        const waited = yield* Metric.value(Instruments.leaseWaitSeconds)

        // The reference: two Sessions whose lease is held from the start, each request in one fiber (`generate`).
        const heldJson = yield* register(() => ({ leaseHeld: () => true }))
        const heldStream = yield* register(() => ({ leaseHeld: () => true }))
        const expectedJson = yield* post(url, heldJson)
        const expectedStream = yield* OpenStream.openStream(
          url,
          { authorization: `Bearer ${heldStream}`, "content-type": "application/json" },
          body(true)
        ).pipe(Effect.flatMap((s) => Fiber.join(s.done)))
        assert.deepStrictEqual(calls, { generate: 2, prepare: 0, complete: 0 })

        const { state, lease, entry } = yield* heldBackLease
        const jsonId = yield* register(entry)
        const streamId = yield* register(entry)
        const json = yield* Effect.forkChild(post(url, jsonId))
        const stream = yield* OpenStream.openStream(
          url,
          { authorization: `Bearer ${streamId}`, "content-type": "application/json" },
          body(true)
        )
        yield* stream.arrived((text) => text === Answer.sseFrames.chat.connected)
        yield* until(() => state.awaited === 2)
        // Both waited parked: prepared (their observations committed), not completed, no fiber generating them whole.
        assert.deepStrictEqual(calls, { generate: 2, prepare: 2, complete: 0 })
        for (const id of [jsonId, streamId]) {
          const forest = yield* forests.get(id)
          assert.deepStrictEqual(Forest.leaves(forest).map((h) => Forest.node(forest, h).kind), ["obs"])
        }

        yield* TestClock.adjust("5 seconds")
        yield* Deferred.succeed(lease, true)
        const answered = yield* Fiber.join(json)
        const streamed = yield* Fiber.join(stream.done)
        assert.deepStrictEqual(calls, { generate: 2, prepare: 2, complete: 2 })
        assert.strictEqual(answered.status, 200)
        assert.strictEqual(contentOf(answered.text, false), contentOf(expectedJson.text, false))
        assert.isTrue(streamed.endsWith("data: [DONE]\n\n"), streamed)
        assert.strictEqual(contentOf(streamed, true), contentOf(expectedStream, true))
        assert.isTrue(contentOf(streamed, true).length > 0)
        // Each parked request's lease wait counts the 5 s it waited parked.
        const after = yield* Metric.value(Instruments.leaseWaitSeconds)
        assert.strictEqual(after.count - waited.count, 4)
        // (The histogram is shared with the other tests of the worker: the difference of two sums rounds.)
        assert.isAtLeast(after.sum - waited.sum, 10 - 1e-9)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("answers 404 session_discarded when its Group is dropped while it waits", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { calls, register, url } = yield* gatewayUnderTest
        const { state, lease, entry } = yield* heldBackLease
        const json = yield* Effect.forkChild(post(url, yield* register(entry)))
        yield* until(() => state.awaited === 1)
        yield* Deferred.succeed(lease, false)
        const answered = yield* Fiber.join(json)
        assert.strictEqual(answered.status, 404)
        assert.include(answered.text, "session_discarded")
        assert.deepStrictEqual(calls, { generate: 0, prepare: 1, complete: 1 })
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("runs in one fiber for a Session that cannot tell a held lease", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { calls, register, url } = yield* gatewayUnderTest
        // `sessionEntry` gives no `leaseHeld`.
        const answered = yield* post(url, yield* register(() => ({})))
        assert.strictEqual(answered.status, 200)
        assert.deepStrictEqual(calls, { generate: 1, prepare: 0, complete: 0 })
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))
})
