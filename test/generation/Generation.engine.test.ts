/**
 * The generation core against a scripted engine port (exact output ids and finish reasons, no sampling): engine
 * aborts and resumes, stop-string and length finishes, and the token alignment of the lineages they commit.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Instruments from "../../layers/observability/Instruments.ts"
import type * as GenerationGate from "../../layers/schedule/GenerationGate.ts"
import type * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Requests from "../support/requests.ts"
import * as Results from "../support/results.ts"
import * as ScriptedEngine from "../support/scriptedEngine.ts"
import * as SupportSessions from "../support/sessions.ts"

let script: ScriptedEngine.Script = () => {
  throw new Error("no script set")
}
const calls: Array<Engine.GenerateRequest> = []

const scripted = (next: ScriptedEngine.Script) =>
  Effect.sync(() => {
    script = next
    calls.length = 0
  })

// The current test's script, set by `scripted`.
const engine = ScriptedEngine.scriptedEngine(calls, (request, call) => script(request, call))

const stack = Generation.Generation.layer({
  toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
  reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))
}).pipe(
  Layer.provideMerge(Forests.Forests.layer),
  Layer.provideMerge(engine),
  Layer.provideMerge(Tokenizer.Tokenizer.layer)
)

const session = SupportSessions.sessionWithForest({ rolloutId: () => 1 })

const request = (messages: ReadonlyArray<unknown>, extra: Partial<Completion.CanonicalRequest> = {}) =>
  Requests.canonicalRequest({ messages }, extra)

/** The assistant message a Chat client sends back. */
const echo = (c: Completion.Completion) => ({
  role: "assistant",
  content: c.content,
  ...(c.reasoning === undefined ? {} : { reasoning_content: c.reasoning })
})

const sampleOf = (entry: Sessions.SessionEntry) =>
  Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
    const leaves = Forest.leaves(forest)
    expect(leaves).toHaveLength(1)
    const leaf = leaves[0]
    assert(leaf !== undefined)
    return {
      forest,
      leaf,
      sample: Sample.build(forest, leaf, (ids) => tokenizer.decode(ids), {
        rolloutId: 1,
        exportName: null,
        reward: null,
        metadata: {}
      })
    }
  })

const u1 = { role: "user", content: "q1" }
const u2 = { role: "user", content: "q2" }

describe("Generation over a scripted engine", () => {
  it.layer(stack)((it) => {
    it.effect("a delta after a response ending in <|im_end|> starts with its \"\\n\"; the sample aligns per turn", () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const imEnd = tokenizer.tokenToId("<|im_end|>")
        assert(imEnd !== undefined)
        const outputs = [
          [...tokenizer.encode("<think>\nr1\n</think>\n\nA1"), imEnd],
          [...tokenizer.encode("<think>\nr2\n</think>\n\nA2"), imEnd]
        ]
        yield* scripted((_, i) => {
          const ids = outputs[i] ?? []
          return {
            outputIds: ids,
            logprobs: ids.map(() => -(i + 1)),
            finishReason: { type: "stop", matched: imEnd },
            weightVersion: "v0"
          }
        })
        const generation = yield* Generation.Generation
        const entry = yield* session
        const first = yield* generation.generate(entry, request([u1]))
        yield* generation.generate(entry, request([u1, echo(first), u2]))

        const { forest, leaf, sample } = yield* sampleOf(entry)
        const lineage = Forest.lineage(forest, leaf)
        expect(lineage.map((n) => n.kind)).toEqual(["obs", "obs", "resp", "obs", "resp"])
        const delta = lineage[3]
        assert(delta !== undefined)
        expect(tokenizer.decode([...Forest.unpackTokens(delta)])).toBe(
          "\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n"
        )
        // The second request's prompt is the first lineage verbatim, generated ids included.
        expect(calls[1]?.inputIds).toEqual(InferencePrefix.ids(forest, delta.hash))

        const promptLength = lineage[1] === undefined ? 0 : Forest.tokenLength(lineage[1])
        const r1 = outputs[0]?.length ?? 0
        const r2 = outputs[1]?.length ?? 0
        expect(sample.tokens).toEqual([...InferencePrefix.ids(forest, leaf)])
        expect(sample.response_length).toBe(r1 + Forest.tokenLength(delta) + r2)
        expect(sample.loss_mask).toEqual([
          ...Array(r1).fill(1),
          ...Array(Forest.tokenLength(delta)).fill(0),
          ...Array(r2).fill(1)
        ])
        expect(sample.rollout_log_probs).toEqual([
          ...Array(r1).fill(-1),
          ...Array(Forest.tokenLength(delta)).fill(0),
          ...Array(r2).fill(-2)
        ])
        expect(sample.turn_spans).toEqual([[0, r1], [r1 + Forest.tokenLength(delta), sample.response_length]])
        expect(sample.tokens.slice(promptLength, promptLength + r1)).toEqual(outputs[0])
      }))

    it.effect("an engine abort resumes from prefix ++ partial ids; the response holds every attempt's ids and versions", () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const imEnd = tokenizer.tokenToId("<|im_end|>")
        assert(imEnd !== undefined)
        const full = [...tokenizer.encode("<think>\nr1\n</think>\n\nHello world, how are you"), imEnd]
        yield* scripted((_, i) =>
          i === 0
            ? {
              outputIds: full.slice(0, 5),
              logprobs: full.slice(0, 5).map(() => -0.5),
              finishReason: { type: "abort" },
              weightVersion: "v0"
            }
            : {
              outputIds: full.slice(5),
              logprobs: full.slice(5).map(() => -0.25),
              finishReason: { type: "stop", matched: imEnd },
              weightVersion: "v1"
            }
        )
        const entry = yield* session
        const abortsBefore = (yield* Metric.value(Instruments.aborts)).count
        const completion = yield* (yield* Generation.Generation).generate(entry, request([u1], { logprobs: true }))
        // The abort is counted in relax_agentic_aborts_total as it happens (docs/observability.md).
        expect((yield* Metric.value(Instruments.aborts)).count - abortsBefore).toBe(1)
        expect(completion).toMatchObject({ reasoning: "r1", content: "Hello world, how are you", finish: "stop" })
        expect(completion.usage.completionTokens).toBe(full.length)
        expect(completion.logprobs).toHaveLength(full.length)

        expect(calls).toHaveLength(2)
        const [firstCall, resumed] = calls
        assert(firstCall !== undefined && resumed !== undefined)
        expect([...resumed.inputIds]).toEqual([...firstCall.inputIds, ...full.slice(0, 5)])
        expect(resumed.sampling.maxNewTokens).toBe(firstCall.sampling.maxNewTokens - 5)
        expect(resumed.rid).not.toBe(firstCall.rid)
        expect(resumed.rid).toHaveLength(firstCall.rid.length)

        const { forest, leaf, sample } = yield* sampleOf(entry)
        const node = Forest.node(forest, leaf)
        assert(node.kind === "resp")
        expect([...Forest.unpackTokens(node)]).toEqual(full)
        expect(node).toMatchObject({
          status: "completed",
          abortCount: 1,
          weightVersions: ["v0", "v1"],
          requestId: firstCall.rid
        })
        expect(sample.rollout_log_probs).toEqual([...Array(5).fill(-0.5), ...Array(full.length - 5).fill(-0.25)])
        expect(entry.counters).toMatchObject({ aborts: 1, generations: 1 })
      }))

    it.effect("an abort that used the whole turn budget commits a truncated response", () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const ids = tokenizer.encode("<think>\nr\n</think>\n\nHello")
        yield* scripted(() => ({
          outputIds: ids,
          logprobs: ids.map(() => 0),
          finishReason: { type: "abort" },
          weightVersion: "v0"
        }))
        const entry = yield* session
        const completion = yield* (yield* Generation.Generation).generate(
          entry,
          request([u1], { maxTokens: ids.length })
        )
        expect(completion.finish).toBe("length")
        expect(calls).toHaveLength(1)
        const { forest, leaf } = yield* sampleOf(entry)
        expect(Forest.node(forest, leaf)).toMatchObject({ status: "truncated", abortCount: 1 })
      }))

    it.effect("an engine that keeps aborting without output fails the request instead of resuming forever", () =>
      Effect.gen(function*() {
        yield* scripted(() => ({ outputIds: [], logprobs: [], finishReason: { type: "abort" }, weightVersion: "v0" }))
        const entry = yield* session
        const error = yield* (yield* Generation.Generation).generate(entry, request([u1])).pipe(
          Effect.flip,
          Effect.map(ProtocolError.GatewayError.fromGeneration)
        )
        expect(error.status).toBe(500)
        expect(calls).toHaveLength(3)
        const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
        expect(Forest.leaves(forest).map((h) => Forest.node(forest, h).kind)).toEqual(["obs"])
      }))

    it.effect("aborts a weight update caused (a request still queued in SGLang: no token) never fail the request", () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const ids = tokenizer.encode("<think>\nr\n</think>\n\nok")
        // Five updates in a row hit the request while it waits in SGLang's queue, then it runs.
        yield* scripted((_, i) =>
          i < 5
            ? { outputIds: [], logprobs: [], finishReason: { type: "abort" }, weightVersion: "v0", cutByUpdate: true }
            : { outputIds: ids, logprobs: ids.map(() => 0), finishReason: { type: "stop" }, weightVersion: "v1" }
        )
        const entry = yield* session
        yield* (yield* Generation.Generation).generate(entry, request([u1]))
        expect(calls).toHaveLength(6)
        const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
        const leaf = Forest.leaves(forest)[0]!
        expect(Forest.node(forest, leaf)).toMatchObject({ abortCount: 5 })
      }))

    it.effect("a stop-string finish commits the ids past the stop string and the text the client sees; its echo continues", () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const ids = tokenizer.encode("<think>\nr1\n</think>\n\nThe END. more")
        const next = tokenizer.encode("<think>\nr2\n</think>\n\nok")
        yield* scripted((_, i) =>
          i === 0
            ? {
              outputIds: ids,
              logprobs: ids.map(() => 0),
              finishReason: { type: "stop", matched: "END" },
              weightVersion: "v0"
            }
            : { outputIds: next, logprobs: next.map(() => 0), finishReason: { type: "length" }, weightVersion: "v0" }
        )
        const generation = yield* Generation.Generation
        const entry = yield* session
        const first = yield* generation.generate(entry, request([u1], { stop: ["END"], toolCallIdPrefix: "toolu_" }))
        expect(first).toMatchObject({ content: "The END. more", finish: "stop", stopSequence: "END" })
        yield* generation.generate(entry, request([u1, echo(first), u2]))
        const { forest, leaf } = yield* sampleOf(entry)
        const response = Forest.lineage(forest, leaf)[2]
        assert(response?.kind === "resp")
        expect([...Forest.unpackTokens(response)]).toEqual(ids)
        expect(response.message.content).toBe(first.content)
      }))

    it.effect("a response truncated inside its reasoning, echoed back, continues the same lineage", () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const ids = tokenizer.encode("<think>\nlong thinking")
        yield* scripted((_, i) => {
          const out = i === 0 ? ids : tokenizer.encode("<think>\nr\n</think>\n\nok")
          return { outputIds: out, logprobs: out.map(() => 0), finishReason: { type: "length" }, weightVersion: "v0" }
        })
        const generation = yield* Generation.Generation
        const entry = yield* session
        const first = yield* generation.generate(entry, request([u1]))
        expect(first).toMatchObject({ content: "", reasoning: "long thinking", finish: "length" })
        yield* generation.generate(entry, request([u1, echo(first), u2]))
        const { forest, leaf } = yield* sampleOf(entry)
        expect(Forest.lineage(forest, leaf).map((n) => n.kind)).toEqual(["obs", "obs", "resp", "obs", "resp"])
      }))

    it.effect("an attempt of a protected Session tells the engine so (SGLang's `priority: 1`); an unprotected one does not", () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const ids = tokenizer.encode("ok")
        yield* scripted(() => ({
          outputIds: ids,
          logprobs: ids.map(() => 0),
          finishReason: { type: "length" },
          weightVersion: "v0"
        }))
        // The gate's own protection rules are GenerationGate's tests; here only its answer reaching the engine port.
        let isProtected = false
        const gate: GenerationGate.SessionGate = {
          request: (body) => body({ attempt: (_rid, run) => run, aborted: () => Effect.succeed(false) }),
          isProtected: () => isProtected
        }
        const generation = yield* Generation.Generation
        const entry = yield* SupportSessions.sessionWithForest({ rolloutId: () => 1, gate })
        const first = yield* generation.generate(entry, request([u1]))
        isProtected = true
        yield* generation.generate(entry, request([u1, echo(first), u2]))
        expect(calls.map((call) => call.protected)).toEqual([false, true])
      }))
  })
})
