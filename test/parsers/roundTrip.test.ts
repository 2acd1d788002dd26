import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as Results from "../support/results.ts"

const qwen25 = Results.success(ParserRegistry.ToolCallParsers.get("qwen25"))
const qwen3 = Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))

const sortedCompact = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v)

const tools: ReadonlyArray<Canonical.Tool> = [
  {
    type: "function",
    function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
  },
  {
    type: "function",
    function: { name: "search", parameters: { type: "object", properties: { query: { type: "string" } } } }
  }
]

const assistantTurn = (rendered: string): string => {
  const open = "<|im_start|>assistant\n"
  const start = rendered.lastIndexOf(open) + open.length
  return rendered.slice(start, rendered.indexOf("<|im_end|>", start))
}

const roundTrip = (message: Canonical.Message) =>
  Effect.gen(function*() {
    const tok = yield* Tokenizer.Tokenizer
    const rendered = yield* tok.render({
      messages: [{ role: "user", content: "Weather in Paris?" }, message],
      tools,
      chatTemplateKwargs: {},
      addGenerationPrompt: false
    })
    const turn = assistantTurn(rendered)
    const reasoning = qwen3.parse(turn)
    const parsed = qwen25.parse(reasoning.normalText, tools)
    return { turn, reasoning, parsed }
  })

describe("round trip through the Qwen3 chat template", () => {
  it.effect("re-parses reasoning, content and tool calls to the same message", () =>
    Effect.gen(function*() {
      const message: Canonical.Message = {
        role: "assistant",
        content: "Let me look that up.\nOne moment.",
        reasoning_content: "The user wants weather.\n\nI should call get_weather, then search.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
          {
            id: "call_2",
            type: "function",
            function: { name: "search", arguments: "{\"query\":\"Paris events\",\"n\":{\"b\":1,\"a\":[1.5,\"x\"]}}" }
          }
        ]
      }
      const { parsed, reasoning, turn } = yield* roundTrip(message)
      assert.isTrue(turn.startsWith("<think>\n"))
      assert.strictEqual(reasoning.reasoningText, message.reasoning_content)
      assert.strictEqual(parsed.normalText, message.content)
      assert.strictEqual(parsed.malformed, 0)
      assert.strictEqual(parsed.droppedUnknownTools, 0)
      assert.deepStrictEqual(parsed.calls.map((c) => c.name), ["get_weather", "search"])
      parsed.calls.forEach((call, i) => {
        const original = message.tool_calls?.[i]?.function.arguments ?? ""
        assert.deepStrictEqual(JSON.parse(call.arguments), JSON.parse(original))
        assert.strictEqual(sortedCompact(JSON.parse(call.arguments)), sortedCompact(JSON.parse(original)))
      })
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.effect("round-trips a message with reasoning and tool calls but no content", () =>
    Effect.gen(function*() {
      const message: Canonical.Message = {
        role: "assistant",
        content: "",
        reasoning_content: "Just call it.",
        tool_calls: [{ function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }]
      }
      const { parsed, reasoning } = yield* roundTrip(message)
      assert.strictEqual(reasoning.reasoningText, "Just call it.")
      assert.strictEqual(parsed.normalText, "")
      assert.deepStrictEqual(parsed.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_weather", {
        city: "Oslo"
      }]])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.effect("round-trips a plain answer with reasoning", () =>
    Effect.gen(function*() {
      const message: Canonical.Message = { role: "assistant", content: "It is 22C.", reasoning_content: "Easy." }
      const { parsed, reasoning } = yield* roundTrip(message)
      assert.deepStrictEqual([reasoning.reasoningText, parsed.normalText, parsed.calls.length], [
        "Easy.",
        "It is 22C.",
        0
      ])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})
