/**
 * The generation core over the embedded engine and the real Qwen3 tokenizer: matching, context checks, budgets,
 * parsing, commits, and interruption.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Tracer } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import type * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as Requests from "../support/requests.ts"
import * as Results from "../support/results.ts"
import * as ScriptedEngine from "../support/scriptedEngine.ts"
import * as SupportSessions from "../support/sessions.ts"
import * as Tracing from "../support/tracing.ts"

const stack = (engine: EmbeddedEngine.EmbeddedEngineOptions = EmbeddedEngine.EmbeddedEngine.instant) =>
  Generation.Generation.layer({
    toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
    reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))
  }).pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(EmbeddedEngine.EmbeddedEngine.layer({ ...engine, policy: Policy.policy })),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )

const session = (overrides: Partial<Sessions.SessionEntry> = {}) =>
  SupportSessions.sessionWithForest({
    sampling: SupportSessions.sampling({ maxNewTokens: 256 }),
    rolloutId: () => 3,
    ...overrides
  })

const request = (messages: ReadonlyArray<unknown>, extra: Partial<Completion.CanonicalRequest> = {}) =>
  Requests.canonicalRequest({ messages, tools: [Policy.calcTool] }, extra)

const question = [{ role: "user", content: "Please compute 2+2?" }]

const forestOf = (entry: Sessions.SessionEntry) =>
  Effect.gen(function*() {
    return yield* (yield* Forests.Forests).get(entry.sessionId)
  })

describe("Generation", () => {
  it.layer(stack())((it) => {
    it.effect("parses reasoning and tool calls and commits the canonical assistant message a client will echo", () =>
      Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const entry = yield* session()
        const first = yield* generation.generate(entry, request(question, { logprobs: true }))
        expect(first.finish).toBe("tool_calls")
        expect(first.reasoning).toBe("I should use the calculator.")
        expect(first.toolCalls).toHaveLength(1)
        expect(first.toolCalls[0]).toMatchObject({ name: "calc", arguments: "{\"expression\":\"2+2\"}" })
        expect(first.logprobs?.length).toBe(first.usage.completionTokens)
        const forest = yield* forestOf(entry)
        const [leaf] = Forest.leaves(forest)
        assert(leaf !== undefined)
        const node = Forest.node(forest, leaf)
        assert(node.kind === "resp")
        expect(node.status).toBe("completed")
        expect(node.rolloutId).toBe(3)
        expect(Forest.tokenLength(node)).toBe(first.usage.completionTokens)
        expect(node.message.tool_calls?.[0]?.id).toBe(first.toolCalls[0]?.id)

        // The echo of that message plus a tool result continues the same lineage.
        const echo = {
          role: "assistant",
          content: first.content,
          reasoning_content: first.reasoning,
          tool_calls: first.toolCalls.map((c) => ({
            id: c.id,
            type: "function",
            function: { name: c.name, arguments: c.arguments }
          }))
        }
        const second = yield* generation.generate(
          entry,
          request([...question, echo, { role: "tool", tool_call_id: first.toolCalls[0]?.id, content: "4" }])
        )
        expect(second.content).toBe("The answer is 4.")
        expect(Forest.leaves(forest)).toHaveLength(1)
        expect(entry.counters).toMatchObject({ requests: 2, generations: 2, toleratedMatches: 0 })
      }))

    it.effect("matches an echo without reasoning_content by the tolerance, and counts it", () =>
      Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const entry = yield* session()
        const first = yield* generation.generate(entry, request([{ role: "user", content: "hello" }]))
        expect(first.content).toBe("Hi there.")
        yield* generation.generate(
          entry,
          request([{ role: "user", content: "hello" }, { role: "assistant", content: "Hi there." }, {
            role: "user",
            content: "hello again"
          }])
        )
        expect(entry.counters.toleratedMatches).toBe(1)
        expect(Forest.leaves(yield* forestOf(entry))).toHaveLength(1)
      }))

    it.effect("uses Anthropic-shaped tool-call ids for the Messages protocol", () =>
      Effect.gen(function*() {
        const entry = yield* session()
        const completion = yield* (yield* Generation.Generation).generate(
          entry,
          request(question, { toolCallIdPrefix: "toolu_" })
        )
        expect(completion.toolCalls[0]?.id).toMatch(/^toolu_[0-9a-f]{24}$/)
      }))

    it.effect("a turn limit reached ends with finish length and commits a truncated response", () =>
      Effect.gen(function*() {
        const entry = yield* session()
        const completion = yield* (yield* Generation.Generation).generate(entry, request(question, { maxTokens: 3 }))
        expect(completion.finish).toBe("length")
        expect(completion.usage.completionTokens).toBe(3)
        const forest = yield* forestOf(entry)
        const node = Forest.node(forest, Forest.leaves(forest)[0] ?? "")
        assert(node.kind === "resp")
        expect(node.status).toBe("truncated")
      }))

    it.effect("rejects an observation that reaches the context limit before committing anything", () =>
      Effect.gen(function*() {
        const entry = yield* session({ maxContextLen: 10 })
        const error = yield* (yield* Generation.Generation).generate(entry, request(question)).pipe(
          Effect.flip,
          Effect.map(ProtocolError.GatewayError.fromGeneration)
        )
        expect(error.status).toBe(400)
        expect(error.code).toBe("context_length_exceeded")
        expect(error.message).toMatch(
          /^This model's maximum context length is 10 tokens\. However, your messages resulted in \d+ tokens\./
        )
        expect(Forest.leaves(yield* forestOf(entry))).toHaveLength(0)
        expect(entry.counters.generations).toBe(0)
      }))

    it.effect("caps max_new_tokens by what the context limit leaves", () =>
      Effect.gen(function*() {
        const probe = yield* session()
        yield* (yield* Generation.Generation).generate(probe, request([{ role: "user", content: "hello" }]))
        const forest = yield* forestOf(probe)
        const [obs] = Forest.lineage(forest, Forest.leaves(forest)[0] ?? "").slice(1)
        assert(obs !== undefined)
        const entry = yield* session({ maxContextLen: obs.tokenCount + 5 })
        const completion = yield* (yield* Generation.Generation).generate(
          entry,
          request([{ role: "user", content: "hello" }])
        )
        expect(completion.finish).toBe("length")
        expect(completion.usage.completionTokens).toBe(5)
        expect(completion.reasoning).toBe("A greeting.")
      }))
  })

  it.effect("interrupting a request held for the lease generates nothing; the observation stays committed", () =>
    Effect.gen(function*() {
      const lease = yield* Deferred.make<void>()
      const entry = yield* session({ awaitLease: Deferred.await(lease) })
      const fiber = yield* (yield* Generation.Generation).generate(entry, request(question)).pipe(Effect.forkChild)
      yield* TestClock.adjust("1 minute")
      expect(fiber.pollUnsafe()).toBeUndefined()
      yield* Fiber.interrupt(fiber)
      expect(entry.counters.generations).toBe(0)
      const forest = yield* forestOf(entry)
      expect(Forest.leaves(forest).map((h) => Forest.node(forest, h).kind)).toEqual(["obs"])
    }).pipe(Effect.provide(stack())))

  it.effect("interrupting a request while the engine generates aborts it (counted), committing no response", () =>
    Effect.gen(function*() {
      const entry = yield* session()
      const fiber = yield* (yield* Generation.Generation).generate(entry, request(question)).pipe(Effect.forkChild)
      yield* TestClock.adjust("100 millis")
      expect(fiber.pollUnsafe()).toBeUndefined()
      yield* Fiber.interrupt(fiber)
      expect(entry.counters.aborts).toBe(1)
      expect(entry.counters.generations).toBe(0)
      const forest = yield* forestOf(entry)
      expect(Forest.leaves(forest).map((h) => Forest.node(forest, h).kind)).toEqual(["obs"])
    }).pipe(Effect.provide(stack({ prefillTokensPerSecond: 0, decodeTokensPerSecond: 10 }))))
})

describe("Generation with images", () => {
  const seen: Array<ReadonlyArray<string> | undefined> = []
  const prompts: Array<string> = []
  // The embedded engine, recording the media each generation receives.
  const recording = Layer.effect(
    Engine.Engine,
    Effect.gen(function*() {
      const inner = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
        ...EmbeddedEngine.EmbeddedEngine.instant,
        policy: Policy.policy
      })
      return Engine.Engine.of({
        ...inner,
        generate: (req) =>
          Effect.sync(() => {
            seen.push(req.imageData)
            prompts.push(req.conversation?.().promptText ?? "")
          }).pipe(Effect.andThen(inner.generate(req)))
      })
    })
  )
  const withRecording = Generation.Generation.layer({
    toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
    reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))
  }).pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(recording),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )

  it.layer(withRecording)((it) => {
    it.effect("refuses images a text-only template cannot render, and renders text part lists", () =>
      Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const entry = yield* session()
        const image = "data:image/png;base64,iVBORw0KGgo="
        // The bundled Qwen3 template is text-only: images cannot be rendered, and the request is refused before any
        // generation with a 400 that says so; text-only part lists render as their joined text.
        const refused = yield* generation.generate(
          entry,
          request([{
            role: "user",
            content: [{ type: "image_url", image_url: { url: image } }, { type: "text", text: "Please compute 2+2?" }]
          }])
        ).pipe(Effect.flip, Effect.map(ProtocolError.GatewayError.fromGeneration))
        expect(refused.status).toBe(400)
        expect(refused.message).toContain("The chat template cannot render these messages")
        const parts = yield* generation.generate(
          entry,
          request([{
            role: "user",
            content: [{ type: "text", text: "Please compute " }, { type: "text", text: "2+2?" }]
          }])
        )
        expect(parts.usage.completionTokens).toBeGreaterThan(0)
        assert.deepStrictEqual(seen, [undefined])
        expect(prompts[0]).toContain("<|im_start|>user\nPlease compute 2+2?<|im_end|>\n<|im_start|>assistant\n")
      }))
  })
})

describe("Generation trace", () => {
  it.layer(stack())((it) => {
    it.effect("one request's trace shows every step of the generation core, with the forest commits inside", () =>
      Effect.gen(function*() {
        const { spans, tracer } = Tracing.recordingTracer()
        const generation = yield* Generation.Generation
        const entry = yield* session()
        yield* generation.generate(entry, request(question)).pipe(Effect.withTracer(tracer))
        const parentName = (span: Tracer.NativeSpan) => Tracing.spanName(span.parent)
        const childrenOf = (name: string) => spans.filter((span) => parentName(span) === name).map((span) => span.name)
        assert.deepStrictEqual(spans.filter((span) => parentName(span) === null).map((span) => span.name), [
          "Generation.generate"
        ])
        assert.deepStrictEqual(childrenOf("Generation.generate"), [
          "Forests.get",
          "Generation.match",
          "Generation.observe",
          "Generation.plan",
          "Generation.attempts",
          "Generation.parse",
          "Generation.commitResponse"
        ])
        assert.deepStrictEqual(childrenOf("Generation.observe"), ["Images.expandObservation", "Forests.observe"])
        assert.deepStrictEqual(childrenOf("Generation.attempts"), ["Generation.attempt"])
        // The engine's own span sits inside the attempt (the stack's engine is the embedded one).
        assert.deepStrictEqual(childrenOf("Generation.attempt"), ["EmbeddedEngine.generate"])
        // With its attempt's rid (the engine's span is opened by `Engine.withSpans`).
        const engineSpan = spans.find((span) => span.name === "EmbeddedEngine.generate")
        assert.match(String(engineSpan?.attributes.get("rid")), /^\S+$/)
        assert.deepStrictEqual(childrenOf("Generation.commitResponse"), ["Forests.commitResponse"])
        assert.isTrue(spans.every((span) => span.status._tag === "Ended"))
      }))
  })
})

/**
 * The engine as the stack builds it, recording for every generation the span it is asked from (the name of the
 * current parent span, `null` without one).
 */
const parentSpanWatch = (seen: Array<string | null>) =>
  ScriptedEngine.wrapGenerate((generate) => (generateRequest) =>
    Effect.withFiber((fiber) => {
      const parent = Context.getOption(fiber.context, Tracer.ParentSpan)
      seen.push(Tracing.spanName(parent))
      return generate(generateRequest)
    })
  )

describe("Generation without a tracer", () => {
  const seen: Array<string | null> = []
  const watched = Generation.Generation.layer({
    toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
    reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))
  }).pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(parentSpanWatch(seen)),
    Layer.provideMerge(
      EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy: Policy.policy })
    ),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )
  it.layer(watched)((it) => {
    it.effect("opens no span (Effect's native tracer exports nowhere); a tracer gets the whole chain", () =>
      Effect.gen(function*() {
        const generation = yield* Generation.Generation
        seen.length = 0
        yield* generation.generate(yield* session(), request(question))
        assert.deepStrictEqual(seen, [null])
        const { tracer } = Tracing.recordingTracer()
        yield* generation.generate(yield* session(), request(question)).pipe(Effect.withTracer(tracer))
        assert.deepStrictEqual(seen, [null, "Generation.attempt"])
        // A tracer with tracing turned off is no tracer.
        yield* generation.generate(yield* session(), request(question)).pipe(
          Effect.withTracer(tracer),
          Effect.withTracerEnabled(false)
        )
        assert.deepStrictEqual(seen, [null, "Generation.attempt", null])
      }))
  })
})

describe("Generation and the policy's prompt text", () => {
  // The real tokenizer, recording how many ids every decode call gets.
  const decoded: Array<number> = []
  const countingTokenizer = Layer.effect(
    Tokenizer.Tokenizer,
    Effect.gen(function*() {
      const inner = yield* Tokenizer.Tokenizer
      return Tokenizer.Tokenizer.of({
        ...inner,
        decode: (ids, options) => {
          decoded.push(ids.length)
          return inner.decode(ids, options)
        }
      })
    })
  ).pipe(Layer.provide(Tokenizer.Tokenizer.layer))
  const texts: Array<string> = []
  const withPolicy = (readPrompt: boolean) =>
    Generation.Generation.layer().pipe(
      Layer.provideMerge(Forests.Forests.layer),
      Layer.provideMerge(EmbeddedEngine.EmbeddedEngine.layer({
        ...EmbeddedEngine.EmbeddedEngine.instant,
        policy: (req) => {
          if (readPrompt) texts.push(req.promptText, req.promptText)
          return `turn ${req.turn} of ${req.messages.length} messages`
        }
      })),
      Layer.provideMerge(countingTokenizer)
    )
  const longQuestion = [{ role: "user", content: "Please compute 2+2? ".repeat(50) }]

  it.effect("is not decoded for a policy that reads only the messages", () =>
    Effect.gen(function*() {
      decoded.length = 0
      const completion = yield* (yield* Generation.Generation).generate(yield* session(), request(longQuestion))
      expect(completion.content).toBe("turn 0 of 1 messages")
      // Only the answer's ids were decoded, never the ~250-token prompt.
      expect(Math.max(...decoded)).toBeLessThan(50)
    }).pipe(Effect.provide(withPolicy(false))))

  it.effect("is decoded once, when the policy first reads it", () =>
    Effect.gen(function*() {
      decoded.length = 0
      texts.length = 0
      yield* (yield* Generation.Generation).generate(yield* session(), request(longQuestion))
      expect(texts[0]).toContain(`<|im_start|>user\n${longQuestion[0]?.content}<|im_end|>\n<|im_start|>assistant\n`)
      expect(texts[1]).toBe(texts[0])
      expect(decoded.filter((n) => n >= 50)).toHaveLength(1)
    }).pipe(Effect.provide(withPolicy(true))))
})
