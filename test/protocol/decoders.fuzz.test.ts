/**
 * Property-based fuzz (fast-check) over the three request decoders: whatever JSON arrives, a decoder returns either a
 * canonical request that satisfies the canonical Schema or a ProtocolError with a param and a message, and never
 * throws. Bodies are random JSON values, and valid bodies with random fields replaced, removed or added (which reaches
 * much deeper into each decoder than random JSON alone). Fixed seeds keep runs reproducible.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import fc from "fast-check"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Responses from "../../src/protocol/Responses.ts"

const isState = Schema.is(Canonical.State)

const adapters: ReadonlyArray<readonly [string, Completion.Adapter, Record<string, unknown>]> = [
  ["chat", Chat.adapter, {
    model: "m",
    messages: [
      { role: "system", content: "s" },
      {
        role: "user",
        content: [{ type: "text", text: "hi" }, { type: "image_url", image_url: { url: "data:image/png;base64,AA" } }]
      },
      {
        role: "assistant",
        content: "",
        reasoning_content: "r",
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }]
      },
      { role: "tool", tool_call_id: "c1", content: "4" }
    ],
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
    chat_template_kwargs: { enable_thinking: true },
    max_tokens: 8,
    stop: ["x"],
    stream: false,
    logprobs: true,
    seed: 1
  }],
  ["responses", Responses.adapter, {
    model: "m",
    instructions: "be brief",
    input: [
      {
        role: "user",
        content: [{ type: "input_text", text: "hi" }, { type: "input_image", image_url: "https://x/y.png" }]
      },
      { type: "reasoning", summary: [{ type: "summary_text", text: "r" }] },
      { type: "function_call", call_id: "c1", name: "f", arguments: "{\"a\":1}" },
      { type: "function_call_output", call_id: "c1", output: "4" }
    ],
    tools: [{ type: "function", name: "f", parameters: { type: "object" } }],
    reasoning: { effort: "low" },
    max_output_tokens: 8,
    stream: true
  }],
  ["messages", Messages.adapter, {
    model: "m",
    system: [{ type: "text", text: "be brief" }],
    max_tokens: 8,
    messages: [
      {
        role: "user",
        content: [{ type: "text", text: "hi" }, {
          type: "image",
          source: { type: "base64", media_type: "image/png", data: "AA" }
        }]
      },
      {
        role: "assistant",
        content: [{ type: "thinking", thinking: "r" }, { type: "tool_use", id: "t1", name: "f", input: { a: 1 } }]
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "4" }] }
    ],
    tools: [{ name: "f", input_schema: { type: "object" } }],
    stop_sequences: ["x"],
    thinking: { type: "enabled" }
  }]
]

type Path = ReadonlyArray<string | number>

/** Every path inside a JSON value (the root included). */
const pathsOf = (value: unknown, at: Path = []): Array<Path> => {
  const out: Array<Path> = [at]
  if (Array.isArray(value)) value.forEach((item: unknown, i) => out.push(...pathsOf(item, [...at, i])))
  else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) out.push(...pathsOf(item, [...at, key]))
  }
  return out
}

type Edit =
  | { readonly _tag: "replace"; readonly value: unknown }
  | { readonly _tag: "remove" }
  | { readonly _tag: "add"; readonly key: string; readonly value: unknown }

/** `value` with `edit` applied at `path` (a structural copy; the original is untouched). */
const edited = (value: unknown, path: Path, edit: Edit): unknown => {
  if (path.length === 0) {
    if (edit._tag === "replace") return edit.value
    if (edit._tag === "add" && value !== null && typeof value === "object" && !Array.isArray(value)) {
      return { ...value, [edit.key]: edit.value }
    }
    return value
  }
  const [head, ...rest] = path
  if (Array.isArray(value) && typeof head === "number") {
    if (rest.length === 0 && edit._tag === "remove") return value.filter((_, i) => i !== head)
    return value.map((item: unknown, i) => i === head ? edited(item, rest, edit) : item)
  }
  if (value !== null && typeof value === "object" && typeof head === "string") {
    const record: Record<string, unknown> = { ...value }
    if (rest.length === 0 && edit._tag === "remove") {
      delete record[head]
      return record
    }
    record[head] = edited(record[head], rest, edit)
    return record
  }
  return value
}

const interesting = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(
    "",
    " ",
    "\u0000",
    "file:///etc/passwd",
    "/etc/passwd",
    "<|im_end|>\n<|im_start|>system",
    "NaN",
    "{",
    "[]",
    -1,
    0,
    1.5,
    2 ** 53,
    -(2 ** 31),
    Number.MAX_SAFE_INTEGER,
    true,
    false,
    null,
    [],
    {},
    [null],
    { type: "text" },
    "user",
    "assistant",
    "tool",
    "system",
    "developer",
    "function",
    "text",
    "image_url",
    "tool_use",
    "tool_result"
  )
)

const editArbitrary = fc.oneof(
  interesting.map((value): Edit => ({ _tag: "replace", value })),
  fc.constant<Edit>({ _tag: "remove" }),
  fc.tuple(fc.constantFrom("type", "role", "content", "text", "name", "id", "input", "url", "extra"), interesting)
    .map(([key, value]): Edit => ({ _tag: "add", key, value }))
)

/** The decoder's contract: a canonical request that satisfies the Schema, or a ProtocolError naming a param. */
const checkDecoded = (adapter: Completion.Adapter, body: unknown) => {
  const decoded = adapter.decode(body)
  if (Result.isSuccess(decoded)) {
    assert.isTrue(isState(decoded.success.state), "the canonical state satisfies its Schema")
    assert.isAbove(decoded.success.state.messages.length, 0)
    return
  }
  assert.instanceOf(decoded.failure, ProtocolError.ProtocolError)
  assert.isString(decoded.failure.param)
  assert.isAbove(decoded.failure.param.length, 0)
  assert.isAbove(decoded.failure.message.length, 0)
  // Rendering the error never throws either.
  assert.strictEqual(adapter.renderError(decoded.failure).status, 400)
}

describe("request decoders under fuzz", () => {
  for (const [name, adapter, valid] of adapters) {
    it(`${name}: the valid body decodes`, () => {
      const decoded = adapter.decode(valid)
      assert.isTrue(Result.isSuccess(decoded), Result.isFailure(decoded) ? decoded.failure.message : "")
    })

    it(`${name}: random JSON bodies decode or fail with a ProtocolError, never throw`, () => {
      fc.assert(fc.property(fc.jsonValue({ maxDepth: 5 }), (body) => checkDecoded(adapter, body)), {
        seed: 20261203,
        numRuns: 1500
      })
    })

    it(`${name}: a valid body with fields replaced, removed or added decodes or fails with a ProtocolError`, () => {
      const paths = pathsOf(valid)
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.integer({ min: 0, max: paths.length - 1 }), editArbitrary), {
            minLength: 1,
            maxLength: 3
          }),
          (edits) => {
            let body: unknown = valid
            for (const [index, edit] of edits) body = edited(body, paths[index]!, edit)
            // What the wire can carry: JSON text parsed back (an edit may leave an `undefined` member behind).
            checkDecoded(adapter, JSON.parse(JSON.stringify(body) ?? "null"))
          }
        ),
        { seed: 20261203, numRuns: 3000 }
      )
    })
  }
})
