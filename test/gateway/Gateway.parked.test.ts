/**
 * A request parked by partial rollout keeps its HTTP request open: the real gateway, generation core and embedded
 * engine (latency on the TestClock) with a Session registered at the generation gate. A step boundary (`pause`) aborts
 * the generation mid-way; Buffered SSE heartbeats continue while it is parked; `resume` continues it, and the one
 * answer holds the uninterrupted tokens. A trainer's two-phase weight push (`pauseGeneration` → `resumeGeneration` on the
 * engine) keeps the request open the same way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as GenerationGate from "../../layers/schedule/GenerationGate.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import * as OpenStream from "../support/openStream.ts"
import * as SupportSessions from "../support/sessions.ts"

// 10 tokens per second, no end of turn: a 20-token answer takes 2 s of generation.
const timed = { prefillTokensPerSecond: 0, decodeTokensPerSecond: 10, model: { eosProbability: 0 } }

const stack = Gateway.Gateway.layer({ heartbeatInterval: "15 seconds" }).pipe(
  Layer.provideMerge(Generation.Generation.layer({})),
  Layer.provideMerge(Forests.Forests.layer),
  Layer.provideMerge(Sessions.Sessions.layer),
  Layer.provideMerge(EmbeddedEngine.EmbeddedEngine.layer({ ...timed, seed: 42 })),
  Layer.provideMerge(Tokenizer.Tokenizer.layer)
)

describe("a parked request (partial rollout)", () => {
  it.effect("stays open with SSE heartbeats across the step boundary and is answered with the uninterrupted tokens", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const context = yield* Layer.build(stack)
        const gateway = Context.get(context, Gateway.Gateway)
        const sessions = Context.get(context, Sessions.Sessions)
        const forests = Context.get(context, Forests.Forests)
        const engine = Context.get(context, Engine.Engine)
        const gate = yield* GenerationGate.make({
          abort: engine.abort,
          mode: { partialRollout: true, fullyAsync: false }
        })
        const sessionId = yield* sessions.newSessionId
        yield* forests.create(sessionId)
        yield* sessions.register(SupportSessions.sessionEntry(sessionId, {
          sampling: SupportSessions.sampling({ seed: 42 }),
          gate: yield* gate.register(sessionId)
        }))
        const { arrived, received, done } = yield* OpenStream.openStream(
          gateway.baseUrl + "/v1/messages",
          { authorization: `Bearer ${sessionId}`, "content-type": "application/json" },
          JSON.stringify({ model: "m", max_tokens: 20, stream: true, messages: [{ role: "user", content: "hi" }] })
        )
        const ping = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        const pings = (text: string) => text.split(ping).length - 1
        yield* arrived((text) => pings(text) === 1)
        // 0.5 s into the generation the step closes: the attempt is aborted with 5 tokens and the request parked.
        for (let i = 0; i < 5; i++) yield* TestClock.adjust("100 millis")
        const report = yield* gate.pause
        assert.strictEqual(report.aborted, 1)
        assert.isTrue(gate.isInterrupted(sessionId))
        // Parked for a minute (training): heartbeats keep coming, nothing is answered or committed.
        for (let i = 0; i < 4; i++) yield* TestClock.adjust("15 seconds")
        yield* arrived((text) => pings(text) === 5)
        assert.strictEqual(received(), ping.repeat(5))
        const parkedForest = yield* forests.get(sessionId)
        // Only the request's observation is committed; no response yet.
        assert.deepStrictEqual(Forest.leaves(parkedForest).map((h) => Forest.node(parkedForest, h).kind), ["obs"])
        yield* gate.resume
        yield* TestClock.adjust("10 seconds")
        const body = yield* Fiber.join(done)
        assert.isTrue(body.startsWith(ping.repeat(5) + "event: message_start\n"))
        // The committed response: all 20 tokens, equal to the uninterrupted generation from the same prompt and seed.
        const forest = yield* forests.get(sessionId)
        const leaf = Forest.leaves(forest)[0]!
        const node = Forest.node(forest, leaf)
        assert.strictEqual(Forest.tokenLength(node), 20)
        assert.strictEqual(node.abortCount, 1)
        const reference = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
          ...timed,
          ...EmbeddedEngine.EmbeddedEngine.instant,
          seed: 42
        })
        const whole = yield* reference.generate({
          inputIds: InferencePrefix.ids(forest, node.parent!),
          sampling: SupportSessions.sampling({ seed: 42, maxNewTokens: 20 }),
          rid: "uninterrupted-reference",
          returnLogprob: true
        })
        assert.deepStrictEqual([...Forest.unpackTokens(node)], [...whole.outputIds])
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("stays open with SSE heartbeats across a trainer's pause (abort mode) and is answered on the new version", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const context = yield* Layer.build(stack)
        const gateway = Context.get(context, Gateway.Gateway)
        const sessions = Context.get(context, Sessions.Sessions)
        const forests = Context.get(context, Forests.Forests)
        const engine = Context.get(context, Engine.Engine)
        const sessionId = yield* sessions.newSessionId
        yield* forests.create(sessionId)
        yield* sessions.register(SupportSessions.sessionEntry(sessionId, {
          sampling: SupportSessions.sampling({ seed: 42 })
        }))
        const { arrived, received, done } = yield* OpenStream.openStream(
          gateway.baseUrl + "/v1/messages",
          { authorization: `Bearer ${sessionId}`, "content-type": "application/json" },
          JSON.stringify({ model: "m", max_tokens: 20, stream: true, messages: [{ role: "user", content: "hi" }] })
        )
        const ping = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        const pings = (text: string) => text.split(ping).length - 1
        yield* arrived((text) => pings(text) === 1)
        // 0.5 s into the generation the trainer pauses the engine to push weights: the attempt is aborted with 5 tokens.
        for (let i = 0; i < 5; i++) yield* TestClock.adjust("100 millis")
        yield* engine.pauseGeneration("abort")
        // The push takes a minute: heartbeats keep coming, nothing is answered or committed.
        for (let i = 0; i < 4; i++) yield* TestClock.adjust("15 seconds")
        yield* arrived((text) => pings(text) === 5)
        assert.strictEqual(received(), ping.repeat(5))
        const pausedForest = yield* forests.get(sessionId)
        assert.deepStrictEqual(Forest.leaves(pausedForest).map((h) => Forest.node(pausedForest, h).kind), ["obs"])
        assert.strictEqual(yield* engine.resumeGeneration("w1"), "w1")
        yield* TestClock.adjust("10 seconds")
        const body = yield* Fiber.join(done)
        assert.isTrue(body.startsWith(ping.repeat(5) + "event: message_start\n"))
        // One response of 20 tokens: 5 from the attempt cut on version 0, the rest resumed on w1.
        const forest = yield* forests.get(sessionId)
        const node = Forest.node(forest, Forest.leaves(forest)[0]!)
        assert.strictEqual(node.kind, "resp")
        assert.strictEqual(Forest.tokenLength(node), 20)
        assert.strictEqual(node.abortCount, 1)
        assert.strictEqual(node.kind === "resp" ? node.weightVersions.join(",") : "", "0,w1")
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))
})
