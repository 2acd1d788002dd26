/**
 * Anthropic Messages: project `system`, `messages` and `tools` onto the canonical request, render a finished generation
 * as a `message` body or as its Buffered-SSE event sequence.
 *
 * **Details**
 * Projection (guide "Anthropic Messages", docs/requests.md "Turn options"): `system` string or text blocks → system
 * message; text → message text; user image (URL or base64) → `image_url` (base64 as a data URI); assistant `thinking` →
 * `reasoning_content`; assistant `tool_use` → tool call with the same id; user `tool_result` → tool message with the
 * same id; tools with a missing type or `type: "custom"` → function tools; `stop_sequences` → the turn's stop strings.
 * Usage follows Anthropic's split: `input_tokens` excludes the prompt tokens served from cache, which are reported as
 * `cache_read_input_tokens`.
 */
import { Result, Schema } from "effect"
import * as Canonical from "./Canonical.ts"
import * as Completion from "./Completion.ts"
import * as ProtocolError from "./ProtocolError.ts"
import * as Sse from "./Sse.ts"

// ---------------------------------------------------------------------------------------------------------------------
// Wire shapes of the answer.

/** Assistant text. */
export const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
/** The model's reasoning; the signature only lets clients send the block back unchanged. */
export const ThinkingBlock = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.String
})
/** One tool call; answer it with a `tool_result` carrying the same id. */
export const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.String,
  name: Schema.String,
  input: Schema.JsonObject
})
/** Any content block of the answer. */
export const ContentBlock = Schema.Union([ThinkingBlock, TextBlock, ToolUseBlock])
export type ContentBlock = typeof ContentBlock.Type

/** Why the turn ended, as Anthropic says it. */
export const StopReason = Schema.Literals(["end_turn", "max_tokens", "tool_use", "stop_sequence"])
export type StopReason = typeof StopReason.Type

/** Token usage; `input_tokens` excludes the cached prompt tokens in `cache_read_input_tokens`. */
export const Usage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cache_read_input_tokens: Schema.Number,
  cache_creation_input_tokens: Schema.Null
})
export type Usage = typeof Usage.Type

/** The `message` JSON body. */
export const Message = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("message"),
  role: Schema.Literal("assistant"),
  model: Schema.String,
  content: Schema.Array(ContentBlock),
  stop_reason: Schema.NullOr(StopReason),
  stop_sequence: Schema.NullOr(Schema.String),
  usage: Usage
})
export type Message = typeof Message.Type

// ---------------------------------------------------------------------------------------------------------------------
// Decode.

type Raw = Readonly<Record<string, unknown>>

const thinkingTypes: ReadonlyArray<string> = ["disabled", "enabled", "adaptive"]

const fail = (param: string, message: string) => Result.fail(ProtocolError.invalid(param, message))

/** Decode a Messages request body (docs/requests.md "Turn options"). */
export const decode = (body: unknown): Result.Result<Completion.CanonicalRequest, ProtocolError.ProtocolError> =>
  Result.gen(function*() {
    const b = yield* Completion.requireObject(body)
    const stream = yield* Completion.decodeStream(b)
    const messages: Array<Raw> = []
    const system = yield* decodeSystem(b["system"])
    if (system !== undefined) messages.push({ role: "system", content: system })
    const raw = b["messages"]
    if (!Array.isArray(raw)) return yield* fail("messages", "messages is required and must be a list")
    for (const [i, message] of raw.entries()) {
      if (!Completion.isObject(message)) continue
      const role = message["role"]
      if (role !== "user" && role !== "assistant") continue
      const content = message["content"]
      if (typeof content === "string") messages.push({ role, content })
      else if (!Array.isArray(content)) {
        return yield* fail(`messages[${i}].content`, `messages[${i}].content must be a string or list`)
      } else if (role === "assistant") messages.push(yield* assistantMessage(content, `messages[${i}].content`))
      else messages.push(...(yield* userMessages(content, `messages[${i}].content`)))
    }
    if (b["max_tokens"] === undefined || b["max_tokens"] === null) {
      return yield* fail("max_tokens", "max_tokens is required")
    }
    const maxTokens = yield* Completion.optionalPositiveInt(b, "max_tokens")
    const stopSequences = b["stop_sequences"]
    if (stopSequences !== undefined && stopSequences !== null && !Completion.isStringArray(stopSequences)) {
      return yield* fail("stop_sequences", "stop_sequences must be a list of strings")
    }
    const tools = yield* decodeTools(b["tools"])
    const thinking = b["thinking"]
    const kwargs = Completion.thinkingKwargs(
      Completion.isObject(thinking) ? thinking["type"] : undefined,
      thinkingTypes,
      "disabled"
    )
    return yield* Completion.canonicalizeProjected(
      { messages, tools, kwargs },
      {
        model: Completion.decodeModel(b),
        stream,
        maxTokens,
        stop: Completion.isStringArray(stopSequences) ? stopSequences : [],
        toolCallIdPrefix: "toolu_",
        protocol: "messages"
      },
      "messages"
    )
  })

const decodeSystem = (system: unknown): Result.Result<string | undefined, ProtocolError.ProtocolError> => {
  if (system === undefined || system === null) return Result.succeed(undefined)
  if (typeof system === "string") {
    return system === "" ? fail("system", "system must not be empty") : Result.succeed(system)
  }
  const bad = fail("system", "system must be a string or text block list")
  if (!Array.isArray(system)) return bad
  const texts: Array<string> = []
  for (const [i, block] of system.entries()) {
    if (!Completion.isObject(block) || block["type"] !== "text") return bad
    const text = block["text"]
    if (!Completion.isNonEmptyString(text)) return fail(`system[${i}].text`, `system[${i}].text must be non-empty`)
    texts.push(text)
  }
  return Result.succeed(texts.length === 0 ? undefined : texts.join("\n\n"))
}

/** The object blocks of a content list, each with its path (`field[j]`); other items are passed over. */
function* objectBlocks(
  blocks: ReadonlyArray<unknown>,
  field: string
): Generator<readonly [Raw, string]> {
  for (const [j, block] of blocks.entries()) if (Completion.isObject(block)) yield [block, `${field}[${j}]`]
}

/** The text of a `text` block at `at`: a non-empty string. */
const blockText = (block: Raw, at: string): Result.Result<string, ProtocolError.ProtocolError> => {
  const text = block["text"]
  return Completion.isNonEmptyString(text) ? Result.succeed(text) : fail(`${at}.text`, `${at}.text must be non-empty`)
}

const assistantMessage = (
  blocks: ReadonlyArray<unknown>,
  field: string
): Result.Result<Raw, ProtocolError.ProtocolError> =>
  Result.gen(function*() {
    const texts: Array<string> = []
    const reasoning: Array<string> = []
    const toolCalls: Array<Raw> = []
    for (const [block, at] of objectBlocks(blocks, field)) {
      switch (block["type"]) {
        case "text": {
          texts.push(yield* blockText(block, at))
          break
        }
        case "thinking": {
          const thinking = block["thinking"]
          if (typeof thinking !== "string") return yield* fail(`${at}.thinking`, `${at}.thinking must be a string`)
          if (thinking !== "") reasoning.push(thinking)
          break
        }
        case "tool_use": {
          const id = block["id"]
          const name = block["name"]
          const input = block["input"]
          if (!Completion.isNonEmptyString(id)) return yield* fail(`${at}.id`, `${at}.id must be a non-empty string`)
          if (!Completion.isNonEmptyString(name)) {
            return yield* fail(`${at}.name`, `${at}.name must be a non-empty string`)
          }
          if (!Completion.isObject(input)) return yield* fail(`${at}.input`, `${at}.input must be a JSON object`)
          toolCalls.push({ id, type: "function", function: { name, arguments: input } })
          break
        }
      }
    }
    const message: Raw = {
      role: "assistant",
      content: texts.join(""),
      ...(reasoning.length > 0 ? { reasoning_content: reasoning.join("\n\n") } : {}),
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
    }
    return message
  })

const userMessages = (
  blocks: ReadonlyArray<unknown>,
  field: string
): Result.Result<Array<Raw>, ProtocolError.ProtocolError> =>
  Result.gen(function*() {
    const out: Array<Raw> = []
    let parts: Array<Raw> = []
    const flush = () => {
      if (parts.length === 0) return
      const allText = parts.every((part) => part["type"] === "text")
      out.push({ role: "user", content: allText ? parts.map((part) => String(part["text"])).join("") : parts })
      parts = []
    }
    for (const [block, at] of objectBlocks(blocks, field)) {
      switch (block["type"]) {
        case "text": {
          parts.push({ type: "text", text: yield* blockText(block, at) })
          break
        }
        case "image": {
          parts.push({ type: "image_url", image_url: { url: yield* imageUrl(block["source"], `${at}.source`) } })
          break
        }
        case "tool_result": {
          const id = block["tool_use_id"]
          if (!Completion.isNonEmptyString(id)) {
            return yield* fail(`${at}.tool_use_id`, `${at}.tool_use_id must be a non-empty string`)
          }
          const content = yield* toolResultContent(block["content"], `${at}.content`)
          flush()
          out.push({ role: "tool", tool_call_id: id, content })
          break
        }
      }
    }
    flush()
    if (out.length === 0) return yield* fail(field, `${field} projected to no supported content`)
    return out
  })

const imageUrl = (source: unknown, field: string): Result.Result<string, ProtocolError.ProtocolError> => {
  if (!Completion.isObject(source)) return fail(field, `${field} must be an object`)
  switch (source["type"]) {
    case "base64": {
      const mediaType = source["media_type"]
      const data = source["data"]
      if (typeof mediaType !== "string" || !mediaType.startsWith("image/")) {
        return fail(`${field}.media_type`, `${field}.media_type must be an image media type (image/...)`)
      }
      if (!Completion.isNonEmptyString(data)) return fail(`${field}.data`, `${field}.data must be a non-empty string`)
      return Result.succeed(`data:${mediaType};base64,${data}`)
    }
    case "url": {
      const url = source["url"]
      const refused = Canonical.refusedImageUrl(url)
      return refused === undefined && typeof url === "string"
        ? Result.succeed(url)
        : fail(`${field}.url`, `${field}.url ${refused ?? "must be a non-empty string"}`)
    }
    default:
      return fail(`${field}.type`, `${field}.type is not supported`)
  }
}

const toolResultContent = (content: unknown, field: string): Result.Result<string, ProtocolError.ProtocolError> => {
  if (content === undefined || content === null) return Result.succeed("")
  if (typeof content === "string") return Result.succeed(content)
  const bad = fail(field, `${field} must be a string or text block list`)
  if (!Array.isArray(content)) return bad
  const texts: Array<string> = []
  for (const block of content) {
    if (!Completion.isObject(block) || block["type"] !== "text" || typeof block["text"] !== "string") return bad
    texts.push(block["text"])
  }
  return Result.succeed(texts.join(""))
}

const decodeTools = (tools: unknown): Result.Result<ReadonlyArray<Raw>, ProtocolError.ProtocolError> => {
  if (tools === undefined || tools === null) return Result.succeed([])
  if (!Array.isArray(tools)) return fail("tools", "tools must be a list")
  const out: Array<Raw> = []
  for (const [i, tool] of tools.entries()) {
    if (!Completion.isObject(tool)) continue
    const type = tool["type"]
    // Anthropic server tools (`web_search_…`, `bash_…`) have their own types and are not function tools.
    if (type !== undefined && type !== null && type !== "custom") continue
    const canonical = Completion.flatFunctionTool(tool, i, "input_schema")
    if (Result.isFailure(canonical)) return Result.fail(canonical.failure)
    out.push(canonical.success)
  }
  return Result.succeed(out)
}

// ---------------------------------------------------------------------------------------------------------------------
// Render.

/** The Anthropic stop reason; a stop string from the request ends the turn as `stop_sequence`. */
export const stopReason = (c: Completion.Completion): StopReason => {
  const finish = Completion.visibleFinish(c)
  return finish === "length"
    ? "max_tokens"
    : finish === "tool_calls"
    ? "tool_use"
    : c.stopSequence !== undefined
    ? "stop_sequence"
    : "end_turn"
}

const toolInput = (call: Completion.CompletionToolCall): Schema.JsonObject => {
  const parsed: unknown = JSON.parse(call.arguments)
  if (!Schema.is(Schema.JsonObject)(parsed)) {
    // The generation core hands over canonical arguments (a JSON object's text); anything else is a defect that the
    // gateway answers as an internal rendering error.
    throw new TypeError(`tool call ${call.id} arguments is not a JSON object: ${call.arguments}`)
  }
  return parsed
}

/** The content blocks of a finished generation, in order: thinking (with a signature), text, tool_use. */
export const contentBlocks = (c: Completion.Completion): ReadonlyArray<ContentBlock> => {
  const blocks: Array<ContentBlock> = []
  const hasThinking = c.reasoning !== undefined && c.reasoning !== ""
  if (hasThinking) blocks.push({ type: "thinking", thinking: c.reasoning ?? "", signature: `sig_${c.id}` })
  // Anthropic rejects empty text blocks in history, so an empty text is left out when other blocks carry the turn.
  if (c.content !== "" || (!hasThinking && c.toolCalls.length === 0)) blocks.push({ type: "text", text: c.content })
  for (const call of c.toolCalls) {
    blocks.push({ type: "tool_use", id: call.id, name: call.name, input: toolInput(call) })
  }
  return blocks
}

const usageOf = (c: Completion.Completion, outputTokens: number): Usage => ({
  input_tokens: Math.max(0, c.usage.promptTokens - c.usage.cachedTokens),
  output_tokens: outputTokens,
  cache_read_input_tokens: c.usage.cachedTokens,
  cache_creation_input_tokens: null
})

/**
 * The `message` JSON body.
 *
 * **Details**
 * Throws a `TypeError` when a tool call's arguments is not the text of a JSON object (the generation core never hands
 * over such a call); the gateway answers that as "Internal error while rendering agentic response.".
 */
export const renderJson = (c: Completion.Completion, req: Completion.CanonicalRequest): Message => ({
  id: `msg_${c.id}`,
  type: "message",
  role: "assistant",
  model: req.model,
  content: contentBlocks(c),
  stop_reason: stopReason(c),
  stop_sequence: stopReason(c) === "stop_sequence" ? (c.stopSequence ?? null) : null,
  usage: usageOf(c, c.usage.completionTokens)
})

const blockEvents = (block: ContentBlock, index: number): ReadonlyArray<Sse.SseFrame> => {
  const start = (content_block: unknown) =>
    Sse.event("content_block_start", { type: "content_block_start", index, content_block })
  const delta = (d: unknown) => Sse.event("content_block_delta", { type: "content_block_delta", index, delta: d })
  const stop = Sse.event("content_block_stop", { type: "content_block_stop", index })
  switch (block.type) {
    case "thinking":
      return [
        start({ type: "thinking", thinking: "", signature: "" }),
        delta({ type: "thinking_delta", thinking: block.thinking }),
        delta({ type: "signature_delta", signature: block.signature }),
        stop
      ]
    case "text":
      return [start({ type: "text", text: "" }), delta({ type: "text_delta", text: block.text }), stop]
    case "tool_use":
      return [
        start({ type: "tool_use", id: block.id, name: block.name, input: {} }),
        delta({ type: "input_json_delta", partial_json: JSON.stringify(block.input) }),
        stop
      ]
  }
}

/**
 * Buffered-SSE terminal sequence: `message_start`, each content block complete (`content_block_start`, one delta —
 * thinking also its `signature_delta` — and `content_block_stop`), `message_delta` with the stop reason and output
 * usage, `message_stop`. Throws like {@link renderJson}.
 */
export const renderSse = (c: Completion.Completion, req: Completion.CanonicalRequest): ReadonlyArray<Sse.SseFrame> => {
  const message = renderJson(c, req)
  return [
    Sse.event("message_start", {
      type: "message_start",
      message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: usageOf(c, 0) }
    }),
    ...message.content.flatMap(blockEvents),
    Sse.event("message_delta", {
      type: "message_delta",
      delta: { stop_reason: message.stop_reason, stop_sequence: message.stop_sequence },
      usage: { output_tokens: message.usage.output_tokens }
    }),
    Sse.event("message_stop", { type: "message_stop" })
  ]
}

/** The Anthropic error answer. */
export const renderError = (e: ProtocolError.AnyError): ProtocolError.ErrorResponse => ProtocolError.renderAnthropic(e)

/** A failure after the SSE response opened: one `event: error` with the Anthropic error body. */
export const renderSseError = (
  e: ProtocolError.AnyError,
  _context?: Completion.FailureContext
): ReadonlyArray<Sse.SseFrame> => [
  Sse.event("error", ProtocolError.anthropicBody(e))
]

/** The Anthropic Messages adapter. */
export const adapter: Completion.Adapter = {
  protocol: "messages",
  decode,
  renderJson,
  renderSse,
  renderError,
  renderSseError
}
