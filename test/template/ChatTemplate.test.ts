import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import type * as Canonical from "../../src/protocol/canonical.ts"
import * as ChatTemplate from "../../src/template/ChatTemplate.ts"

/** Prints what the template receives, so the tests see the values rather than a particular template's layout. */
const probe = ChatTemplate.compile(
  "{{ bos_token }}|{% for m in messages %}{{ m.role }}:{{ m.content }}" +
    "{% if m.tool_calls %}{% for c in m.tool_calls %}[{{ c.function.name }} {{ c.function.arguments.city }} {{ c.function.arguments | tojson }}]{% endfor %}{% endif %};" +
    "{% endfor %}|tools={{ tools is defined and tools is not none }}|gen={{ add_generation_prompt }}|think={{ enable_thinking }}",
  { bos_token: "<s>", eos_token: "</s>" }
)

const withCall = (args: string): ReadonlyArray<Canonical.Message> => [
  { role: "user", content: "Weather?" },
  { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: args } }] }
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
    const tools: ReadonlyArray<Canonical.Tool> = [{ type: "function", function: { name: "get_weather", parameters: {} } }]
    assert.strictEqual(
      render([{ role: "user", content: "Hi" }], { tools, addGenerationPrompt: true, chatTemplateKwargs: { enable_thinking: false } }),
      "<s>|user:Hi;|tools=true|gen=true|think=false"
    )
  })

  it("rejects arguments that are not valid JSON, or not an object, with the reference's texts", () => {
    assert.strictEqual(rejection(withCall("{\"city\":")).reason, "Assistant tool call function.arguments must be valid JSON.")
    assert.strictEqual(rejection(withCall("[1,2]")).reason, "Assistant tool call function.arguments must be a JSON object.")
    assert.strictEqual(rejection(withCall("null")).reason, "Assistant tool call function.arguments must be a JSON object.")
  })
})
