/**
 * The canonical conversation model: what every protocol request is normalized to before SessionForest matching,
 * template rendering and generation.
 *
 * **Details**
 * Canonical messages are Chat-Completions shaped (roles user/assistant/system/tool). All three wire protocols
 * (Chat Completions, Responses, Anthropic Messages) project their requests onto raw Chat-shaped messages and then
 * call {@link canonicalize}, so validation and canonicalization live in exactly one place.
 */
import { Schema } from "effect"

/** Any JSON value (content parts and tool schemas are kept verbatim as JSON). */
export const Json = Schema.Json
export type Json = Schema.Json
export type JsonObject = Schema.JsonObject

/** A content part: `{type:"text",text}`, `{type:"image_url",image_url:{url}}`, or another typed part kept verbatim. */
export const ContentPart = Schema.Record(Schema.String, Schema.Json)
export type ContentPart = typeof ContentPart.Type

/** A tool call on an assistant message; `function.arguments` is compact, key-sorted JSON text. */
export const ToolCall = Schema.Struct({
  id: Schema.optionalKey(Schema.String),
  type: Schema.optionalKey(Schema.String),
  function: Schema.Struct({
    name: Schema.optionalKey(Schema.String),
    arguments: Schema.String
  })
})
export type ToolCall = typeof ToolCall.Type

export const Role = Schema.Literals(["system", "user", "assistant", "tool"])
export type Role = typeof Role.Type

/** One canonical message. Keys other than these are dropped by {@link canonicalize}. */
export const Message = Schema.Struct({
  role: Role,
  content: Schema.Union([Schema.String, Schema.Array(ContentPart)]),
  reasoning_content: Schema.optionalKey(Schema.String),
  tool_calls: Schema.optionalKey(Schema.Array(ToolCall)),
  tool_call_id: Schema.optionalKey(Schema.String)
})
export type Message = typeof Message.Type

/** A canonical function tool: `{type:"function", function:{name, parameters, description?}}`. */
export const Tool = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.Json,
    parameters: Schema.Json,
    description: Schema.optionalKey(Schema.Json)
  })
})
export type Tool = typeof Tool.Type

/** Chat-template keyword arguments, with keys recursively sorted. */
export const TemplateKwargs = Schema.Record(Schema.String, Schema.Json)
export type TemplateKwargs = typeof TemplateKwargs.Type

/** A complete canonical conversation state: the triple SessionForest hashes and matches on. */
export const State = Schema.Struct({
  messages: Schema.Array(Message),
  tools: Schema.Array(Tool),
  chat_template_kwargs: TemplateKwargs
})
export type State = typeof State.Type
