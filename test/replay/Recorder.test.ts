/**
 * The replay recorder (docs/debugging.md "The replay record") around the real generation core on the embedded
 * engine: each request's canonical delta, sampling fields, protocol, engine attempts and answer, in arrival order;
 * a committed response's attempts keep only their counts, a failed request keeps its ids; through the real gateway,
 * the body as it arrived (a delta of the previous body) and the answer as the agent received it (JSON or SSE frames).
 */
import Anthropic from "@anthropic-ai/sdk"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Recorder from "../../layers/generation/ReplayRecorder.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ForestDump from "../../src/inspect/ForestDump.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as Received from "../../src/replay/Received.ts"
import * as Record from "../../src/replay/Record.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as Requests from "../support/requests.ts"
import * as Results from "../support/results.ts"
import * as SupportSessions from "../support/sessions.ts"

const settings: Record.GenerationSettings = {
  tokenizer: null,
  tool_call_parser: "qwen25",
  reasoning_parser: "qwen3",
  strict_match: false,
  skip_special_tokens: false,
  allow_special_tokens: false,
  fail_unparsed_turns: false,
  apply_chat_template_kwargs: {}
}

/** The request ids the Session's forest names as its responses' (what `take` strips the attempts' ids of). */
const committedIn = (sessionId: string) =>
  Effect.map(Effect.flatMap(Forests.Forests, (forests) => forests.get(sessionId)), (forest) => {
    const rids = new Set(
      ForestDump.ofForest(forest).nodes.flatMap((n) => n.request_id === undefined ? [] : [n.request_id])
    )
    return (rid: string) => rids.has(rid)
  })

const stack = Gateway.Gateway.layer({ host: "127.0.0.1", port: 0 }).pipe(
  Layer.provideMerge(
    Recorder.recordingGeneration(
      Generation.Generation.layer({
        toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
        reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))
      })
    ).pipe(
      Layer.provideMerge(Forests.Forests.layer),
      Layer.provideMerge(Sessions.Sessions.layer),
      Layer.provideMerge(
        Recorder.recordingEngine(
          EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy: Policy.policy })
        )
      ),
      Layer.provideMerge(Tokenizer.Tokenizer.layer),
      Layer.provideMerge(Recorder.ReplayRecorder.layer(settings))
    )
  )
)

describe("ReplayRecorder", () => {
  it.layer(stack)((it) => {
    it.effect("records each request as a delta of the previous one, its attempts and its answer", () =>
      Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const recorder = yield* Recorder.ReplayRecorder
        const entry = yield* SupportSessions.sessionWithForest({
          sampling: SupportSessions.sampling({ maxNewTokens: 256, seed: 7 })
        })
        yield* recorder.begin(entry.sessionId)
        const question = [{ role: "system", content: "Be brief." }, { role: "user", content: "Please compute 2+2?" }]
        const first = yield* generation.generate(
          entry,
          Requests.canonicalRequest({ messages: question, tools: [Policy.calcTool] }, {
            protocol: "messages",
            stop: ["END"]
          })
        )
        const call = first.toolCalls[0]!
        const history = [
          ...question,
          {
            role: "assistant",
            content: first.content,
            reasoning_content: first.reasoning,
            tool_calls: [{ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }]
          },
          { role: "tool", content: "4", tool_call_id: call.id }
        ]
        const second = Requests.canonicalRequest(
          { messages: history, tools: [Policy.calcTool] },
          { stream: true, maxTokens: 100, toolCallIdPrefix: "toolu_", protocol: "messages" }
        )
        yield* generation.generate(entry, second)
        // No room left to generate under the context limit: the request fails, and its record says how.
        const tight = { ...entry, maxContextLen: 10 }
        const failed = yield* Effect.result(
          generation.generate(tight, Requests.canonicalRequest({ messages: [{ role: "user", content: "x" }] }))
        )
        assert.strictEqual(failed._tag, "Failure")

        const record = yield* recorder.take(entry.sessionId, yield* committedIn(entry.sessionId))
        assert.isDefined(record)
        assert.strictEqual(record.version, Record.version)
        assert.deepStrictEqual(record.generation, settings)
        assert.deepStrictEqual(record.sampling, {
          temperature: 1,
          top_p: 1,
          top_k: -1,
          max_new_tokens: 256,
          stop: [],
          stop_token_ids: [],
          seed: 7
        })
        const [r1, r2, r3] = record.requests
        assert.strictEqual(record.requests.length, 3)
        assert.strictEqual(r1!.keep, 0)
        assert.strictEqual(r1!.messages.length, 2)
        assert.strictEqual(r1!.tools?.[0]?.function.name, "calc")
        assert.deepStrictEqual(r1!.stop, ["END"])
        assert.strictEqual(r1!.protocol, "messages")
        assert.strictEqual(r2!.keep, 2)
        assert.deepStrictEqual(r2!.messages.map((m) => m.role), ["assistant", "tool"])
        assert.isUndefined(r2!.tools)
        assert.strictEqual(r2!.stream, true)
        assert.strictEqual(r2!.max_tokens, 100)
        // The delta restores the request's canonical state.
        const restored = Record.stateOf(Record.stateOf(undefined, r1!), r2!)
        assert.deepStrictEqual(restored, second.state)
        // A committed response's attempts keep their counts, not their ids.
        assert.strictEqual(r1!.attempts.length, 1)
        assert.strictEqual(r1!.attempts[0]!.n, first.usage.completionTokens)
        assert.isUndefined(r1!.attempts[0]!.ids)
        assert.strictEqual(r1!.attempts[0]!.weight_version, "0")
        assert.isAtLeast(r1!.done_at, r1!.at)
        // Called without the gateway: no body, no answer.
        assert.isUndefined(r1!.body)
        assert.isUndefined(r1!.answer)
        assert.strictEqual(r3!.error, "UnusableResponseError")
        assert.isUndefined(r3!.answer)
        // A request that committed nothing keeps its attempts' ids.
        assert.isAbove(r3!.attempts.length, 0)
        for (const attempt of r3!.attempts) assert.strictEqual(attempt.ids?.length, attempt.n)
        // Taken once.
        assert.isUndefined(yield* recorder.take(entry.sessionId, yield* committedIn(entry.sessionId)))
      }))

    it.effect("through the gateway: the body as it arrived (a delta) and the answer the agent received", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const recorder = yield* Recorder.ReplayRecorder
        const sessionId = yield* SupportSessions.registeredSession()
        yield* recorder.begin(sessionId)
        const client = new Anthropic({ baseURL: baseUrl, apiKey: sessionId, maxRetries: 0 })
        const tools = [{ name: "calc", input_schema: Policy.calcParameters }]
        const question = [{ role: "user" as const, content: "Please compute 2+2?" }]
        const first = yield* Effect.promise(() =>
          client.messages.create({ model: "policy", max_tokens: 200, messages: question, tools })
        )
        const use = first.content.find((block) => block.type === "tool_use")!
        const history = [
          ...question,
          { role: "assistant" as const, content: first.content },
          {
            role: "user" as const,
            content: [{ type: "tool_result" as const, tool_use_id: use.id, content: "4" }]
          }
        ]
        const stream = yield* Effect.promise(() =>
          client.messages.create({ model: "policy", max_tokens: 200, messages: history, tools, stream: true })
        )
        const events: Array<string> = []
        yield* Effect.promise(async () => {
          for await (const event of stream) events.push(event.type)
        })
        const record = (yield* recorder.take(sessionId, yield* committedIn(sessionId)))!
        const [r1, r2] = record.requests
        // The first body whole; the second only its new messages, and the fields that changed.
        assert.deepStrictEqual(r1!.body?.fields["messages"], question)
        assert.deepStrictEqual(r2!.body?.keep, { messages: 1 })
        assert.deepStrictEqual(Object.keys(r2!.body?.fields ?? {}).sort(), ["messages", "stream"])
        const second = Received.bodyOf(Received.bodyOf(undefined, r1!.body!), r2!.body!)
        assert.deepStrictEqual(second["messages"], JSON.parse(JSON.stringify(history)))
        assert.strictEqual(second["stream"], true)
        // The JSON answer as the SDK read it; the stream's frames as it read them.
        assert.strictEqual(r1!.answer?.status, 200)
        assert.deepStrictEqual(r1!.answer?.body, JSON.parse(JSON.stringify(first)))
        assert.deepStrictEqual(r2!.answer?.frames?.map((frame) => frame.event), events)
      }))

    it.effect("records nothing for a Session it was not asked to", () =>
      Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const recorder = yield* Recorder.ReplayRecorder
        const entry = yield* SupportSessions.sessionWithForest()
        yield* generation.generate(entry, Requests.canonicalRequest({ messages: [{ role: "user", content: "hi" }] }))
        assert.isUndefined(yield* recorder.take(entry.sessionId, yield* committedIn(entry.sessionId)))
      }))
  })

  it("delta keeps the common prefix and only changed tools and kwargs", () => {
    const state = (messages: ReadonlyArray<unknown>, tools: ReadonlyArray<unknown> = [], kwargs = {}) =>
      Results.success(Canonical.canonicalize({ messages, tools, chat_template_kwargs: kwargs }))
    const a = state([{ role: "user", content: "a" }], [Policy.calcTool])
    const b = state([{ role: "user", content: "b" }], [Policy.calcTool], { enable_thinking: false })
    const d = Record.delta(a, b)
    assert.strictEqual(d.keep, 0)
    assert.isUndefined(d.tools)
    assert.deepStrictEqual(d.chat_template_kwargs, { enable_thinking: false })
    assert.deepStrictEqual(Record.stateOf(a, { ...d } as Record.Request), b)
  })
})
