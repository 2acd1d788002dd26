/**
 * OpenAI Responses: project typed input Items onto the canonical request, render a finished generation as a
 * `response` object or as its Buffered-SSE event sequence.
 *
 * **Details**
 * Projection (guide "Responses", docs/requests.md "Turn options"): `instructions` → leading system message; message
 * items with role user/assistant/system/developer (developer → system); `input_text`/`output_text` → text; user
 * `input_image` → `image_url`; `reasoning` → assistant `reasoning_content`; `function_call` → assistant tool call with
 * the same `call_id`; `function_call_output` → tool message with the same `call_id`. Consecutive assistant messages,
 * reasoning items and function calls merge into one assistant message. Relax does not use `previous_response_id`: every
 * request carries the complete input.
 */
import { Result, Schema } from "effect"
import * as Canonical from "./Canonical.ts"
import * as Completion from "./Completion.ts"
import * as ProtocolError from "./ProtocolError.ts"
import * as Sse from "./Sse.ts"

// ---------------------------------------------------------------------------------------------------------------------
// Wire shapes of the answer.

/** The text part of a `message` output Item. */
export const OutputText = Schema.Struct({
  type: Schema.Literal("output_text"),
  text: Schema.String,
  annotations: Schema.Array(Schema.Json)
})
export type OutputText = typeof OutputText.Type

/** The text part of a `reasoning` output Item. */
export const ReasoningText = Schema.Struct({ type: Schema.Literal("reasoning_text"), text: Schema.String })
export type ReasoningText = typeof ReasoningText.Type

const ItemStatus = Schema.Literals(["in_progress", "completed"])

/** The model's reasoning; sent back as input it becomes `reasoning_content` again. */
export const ReasoningItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("reasoning"),
  status: ItemStatus,
  summary: Schema.Array(Schema.Struct({ type: Schema.Literal("summary_text"), text: Schema.String })),
  content: Schema.Array(ReasoningText)
})

/** The assistant text. */
export const MessageItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("message"),
  status: ItemStatus,
  role: Schema.Literal("assistant"),
  content: Schema.Array(OutputText)
})

/** One tool call; answer it with a `function_call_output` carrying the same `call_id`. */
export const FunctionCallItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function_call"),
  status: ItemStatus,
  call_id: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})

/** Any output Item. */
export const OutputItem = Schema.Union([ReasoningItem, MessageItem, FunctionCallItem])
export type OutputItem = typeof OutputItem.Type

/** Token usage of the turn. */
export const Usage = Schema.Struct({
  input_tokens: Schema.Number,
  input_tokens_details: Schema.Struct({ cached_tokens: Schema.Number }),
  output_tokens: Schema.Number,
  total_tokens: Schema.Number
})
export type Usage = typeof Usage.Type

/** The `response` object (JSON body, and the payload of the lifecycle events). */
export const Response = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("response"),
  created_at: Schema.Number,
  status: Schema.Literals(["in_progress", "completed", "incomplete", "failed"]),
  model: Schema.String,
  output: Schema.Array(OutputItem),
  usage: Schema.NullOr(Usage),
  error: Schema.NullOr(Schema.Struct({ code: Schema.String, message: Schema.String })),
  incomplete_details: Schema.NullOr(Schema.Struct({ reason: Schema.Literal("max_output_tokens") }))
})
export type Response = typeof Response.Type

/** A Buffered-SSE event before numbering; on the wire each also carries a `sequence_number` counting from 0. */
interface EventBody {
  readonly type: string
  readonly [key: string]: unknown
}

// ---------------------------------------------------------------------------------------------------------------------
// Decode.

type RawMessage = Readonly<Record<string, unknown>>
type Part = Readonly<Record<string, unknown>>

const efforts: ReadonlyArray<string> = ["none", "minimal", "low", "medium", "high", "xhigh", "max"]

const fail = (param: string, message: string) => Result.fail(ProtocolError.invalid(param, message))

/** Decode a Responses request body (docs/requests.md "Turn options"). */
export const decode = (body: unknown): Result.Result<Completion.CanonicalRequest, ProtocolError.ProtocolError> =>
  Result.gen(function*() {
    const b = yield* Completion.requireObject(body)
    const stream = yield* Completion.decodeStream(b)
    const messages: Array<RawMessage> = []
    const instructions = b["instructions"]
    if (instructions !== undefined && instructions !== null) {
      if (!Completion.isNonEmptyString(instructions)) {
        return yield* fail("instructions", "instructions must be a non-empty string")
      }
      messages.push({ role: "system", content: instructions })
    }
    const input = b["input"]
    if (typeof input === "string") messages.push({ role: "user", content: input })
    else if (Array.isArray(input)) messages.push(...(yield* projectInput(input)))
    else return yield* fail("input", "input is required and must be a string or list")
    const maxTokens = yield* Completion.optionalPositiveInt(b, "max_output_tokens")
    const tools = yield* decodeTools(b["tools"])
    const reasoning = b["reasoning"]
    const kwargs = Completion.thinkingKwargs(
      Completion.isObject(reasoning) ? reasoning["effort"] : undefined,
      efforts,
      "none"
    )
    return yield* Completion.canonicalizeProjected(
      { messages, tools, kwargs },
      {
        model: Completion.decodeModel(b),
        stream,
        maxTokens,
        stop: [],
        toolCallIdPrefix: "call_",
        protocol: "responses"
      },
      "input"
    )
  })

/** The assistant message being assembled from consecutive assistant items. */
interface PendingAssistant {
  readonly texts: Array<string>
  readonly reasoning: Array<string>
  readonly toolCalls: Array<RawMessage>
}

const projectInput = (items: ReadonlyArray<unknown>): Result.Result<Array<RawMessage>, ProtocolError.ProtocolError> =>
  Result.gen(function*() {
    const out: Array<RawMessage> = []
    let pending: PendingAssistant | undefined
    const assistant = (): PendingAssistant => (pending ??= { texts: [], reasoning: [], toolCalls: [] })
    const flush = () => {
      if (pending === undefined) return
      out.push({
        role: "assistant",
        content: pending.texts.join(""),
        ...(pending.reasoning.length > 0 ? { reasoning_content: pending.reasoning.join("\n\n") } : {}),
        ...(pending.toolCalls.length > 0 ? { tool_calls: pending.toolCalls } : {})
      })
      pending = undefined
    }
    for (const [i, item] of items.entries()) {
      if (!Completion.isObject(item)) continue
      const field = `input[${i}]`
      const type = item["type"]
      if (type === undefined || type === "message") {
        const role = item["role"]
        if (role !== "user" && role !== "assistant" && role !== "system" && role !== "developer") continue
        const content = yield* messageContent(item["content"], `${field}.content`, role)
        if (role === "assistant") {
          const text = typeof content === "string" ? content : ""
          if (text === "" && pending === undefined) {
            return yield* fail(`${field}.content`, `${field}.content projected to no supported content`)
          }
          assistant().texts.push(text)
        } else {
          flush()
          out.push({ role: role === "developer" ? "system" : role, content })
        }
      } else if (type === "reasoning") {
        const text = reasoningText(item)
        if (text !== "") assistant().reasoning.push(text)
      } else if (type === "function_call") {
        const callId = item["call_id"]
        const name = item["name"]
        const args = item["arguments"]
        if (!Completion.isNonEmptyString(callId)) {
          return yield* fail(`${field}.call_id`, `${field}.call_id must be a non-empty string`)
        }
        if (!Completion.isNonEmptyString(name)) {
          return yield* fail(`${field}.name`, `${field}.name must be a non-empty string`)
        }
        if (typeof args !== "string") {
          return yield* fail(`${field}.arguments`, `${field}.arguments must be a JSON string`)
        }
        assistant().toolCalls.push({ id: callId, type: "function", function: { name, arguments: args } })
      } else if (type === "function_call_output") {
        const callId = item["call_id"]
        if (!Completion.isNonEmptyString(callId)) {
          return yield* fail(`${field}.call_id`, `${field}.call_id must be a non-empty string`)
        }
        const output = yield* functionOutput(item["output"], field)
        flush()
        out.push({ role: "tool", tool_call_id: callId, content: output })
      }
    }
    flush()
    return out
  })

const messageContent = (
  content: unknown,
  field: string,
  role: "user" | "assistant" | "system" | "developer"
): Result.Result<string | ReadonlyArray<Part>, ProtocolError.ProtocolError> => {
  if (typeof content === "string") return Result.succeed(content)
  if (!Array.isArray(content)) return fail(field, `${field} must be a string or list`)
  const parts: Array<Part> = []
  for (const [j, part] of content.entries()) {
    if (!Completion.isObject(part)) continue
    const type = part["type"]
    if (type === "input_text" || type === "output_text") {
      const text = part["text"]
      // Assistant history may carry empty text (a turn that only called tools); other roles may not.
      if (typeof text !== "string" || (text === "" && role !== "assistant")) {
        return fail(`${field}[${j}].text`, `${field}[${j}] text must be non-empty`)
      }
      parts.push({ type: "text", text })
    } else if (type === "input_image" && role === "user") {
      const url = part["image_url"]
      const refused = Canonical.refusedImageUrl(url)
      if (refused !== undefined) return fail(`${field}[${j}].image_url`, `${field}[${j}].image_url ${refused}`)
      parts.push({ type: "image_url", image_url: { url } })
    }
  }
  if (parts.every((part) => part["type"] === "text")) {
    return Result.succeed(parts.map((part) => String(part["text"])).join(""))
  }
  return Result.succeed(parts)
}

const readableTexts = (parts: unknown): Array<string> =>
  Array.isArray(parts)
    ? parts.flatMap((part: unknown) =>
      Completion.isObject(part) && Completion.isNonEmptyString(part["text"]) ? [part["text"]] : []
    )
    : []

/** The readable text of a reasoning item: its summary, else its content, joined by blank lines. */
const reasoningText = (item: Readonly<Record<string, unknown>>): string => {
  const summary = readableTexts(item["summary"])
  return (summary.length > 0 ? summary : readableTexts(item["content"])).join("\n\n")
}

const functionOutput = (output: unknown, field: string): Result.Result<string, ProtocolError.ProtocolError> => {
  if (typeof output === "string") return Result.succeed(output)
  const bad = fail(`${field}.output`, `${field}.output must be a string or text block list`)
  if (!Array.isArray(output)) return bad
  const texts: Array<string> = []
  for (const [j, block] of output.entries()) {
    if (!Completion.isObject(block) || (block["type"] !== "input_text" && block["type"] !== "output_text")) return bad
    const text = block["text"]
    if (!Completion.isNonEmptyString(text)) {
      return fail(`${field}.output[${j}].text`, `${field}.output[${j}].text must be non-empty`)
    }
    texts.push(text)
  }
  return Result.succeed(texts.join(""))
}

const decodeTools = (tools: unknown): Result.Result<ReadonlyArray<RawMessage>, ProtocolError.ProtocolError> => {
  if (tools === undefined || tools === null) return Result.succeed([])
  if (!Array.isArray(tools)) return fail("tools", "tools must be a list")
  const out: Array<RawMessage> = []
  for (const [i, tool] of tools.entries()) {
    if (!Completion.isObject(tool) || tool["type"] !== "function") continue
    const canonical = Completion.flatFunctionTool(tool, i, "parameters")
    if (Result.isFailure(canonical)) return Result.fail(canonical.failure)
    out.push(canonical.success)
  }
  return Result.succeed(out)
}

// ---------------------------------------------------------------------------------------------------------------------
// Render.

/** The output Items of a finished generation, in order: reasoning, message, one function_call per tool call. */
export const outputItems = (c: Completion.Completion): ReadonlyArray<OutputItem> => {
  const items: Array<OutputItem> = []
  const hasReasoning = c.reasoning !== undefined && c.reasoning !== ""
  if (hasReasoning) {
    items.push({
      id: `rs_${c.id}`,
      type: "reasoning",
      status: "completed",
      summary: [],
      content: [{ type: "reasoning_text", text: c.reasoning ?? "" }]
    })
  }
  // An empty message item is left out: sent back as history it would project to nothing.
  if (c.content !== "" || (!hasReasoning && c.toolCalls.length === 0)) {
    items.push({
      id: `msg_${c.id}`,
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: c.content, annotations: [] }]
    })
  }
  c.toolCalls.forEach((call, i) =>
    items.push({
      id: `fc_${c.id}_${i}`,
      type: "function_call",
      status: "completed",
      call_id: call.id,
      name: call.name,
      arguments: call.arguments
    })
  )
  return items
}

const usageOf = (c: Completion.Completion): Usage => ({
  input_tokens: c.usage.promptTokens,
  input_tokens_details: { cached_tokens: c.usage.cachedTokens },
  output_tokens: c.usage.completionTokens,
  total_tokens: c.usage.promptTokens + c.usage.completionTokens
})

/** The `response` JSON body: `status: "incomplete"` (reason `max_output_tokens`) when the turn hit its limit. */
export const renderJson = (c: Completion.Completion, req: Completion.CanonicalRequest): Response => {
  const incomplete = Completion.visibleFinish(c) === "length"
  return {
    id: `resp_${c.id}`,
    object: "response",
    created_at: c.created,
    status: incomplete ? "incomplete" : "completed",
    model: req.model,
    output: outputItems(c),
    usage: usageOf(c),
    error: null,
    incomplete_details: incomplete ? { reason: "max_output_tokens" } : null
  }
}

const inProgress = (id: string, created: number, model: string): Response => ({
  id: `resp_${id}`,
  object: "response",
  created_at: created,
  status: "in_progress",
  model,
  output: [],
  usage: null,
  error: null,
  incomplete_details: null
})

/** The events that deliver one output Item: `output_item.added`, its complete content in one delta, `output_item.done`. */
const itemEvents = (item: OutputItem, outputIndex: number): ReadonlyArray<EventBody> => {
  const at = { item_id: item.id, output_index: outputIndex }
  switch (item.type) {
    case "message": {
      const part = item.content[0] ?? { type: "output_text", text: "", annotations: [] }
      return [
        {
          type: "response.output_item.added",
          output_index: outputIndex,
          item: { ...item, status: "in_progress", content: [] }
        },
        { type: "response.content_part.added", ...at, content_index: 0, part: { ...part, text: "" } },
        { type: "response.output_text.delta", ...at, content_index: 0, delta: part.text, logprobs: [] },
        { type: "response.output_text.done", ...at, content_index: 0, text: part.text, logprobs: [] },
        { type: "response.content_part.done", ...at, content_index: 0, part },
        { type: "response.output_item.done", output_index: outputIndex, item }
      ]
    }
    case "reasoning": {
      const part = item.content[0] ?? { type: "reasoning_text", text: "" }
      return [
        {
          type: "response.output_item.added",
          output_index: outputIndex,
          item: { ...item, status: "in_progress", content: [] }
        },
        { type: "response.content_part.added", ...at, content_index: 0, part: { ...part, text: "" } },
        { type: "response.reasoning_text.delta", ...at, content_index: 0, delta: part.text },
        { type: "response.reasoning_text.done", ...at, content_index: 0, text: part.text },
        { type: "response.content_part.done", ...at, content_index: 0, part },
        { type: "response.output_item.done", output_index: outputIndex, item }
      ]
    }
    case "function_call":
      return [
        {
          type: "response.output_item.added",
          output_index: outputIndex,
          item: { ...item, status: "in_progress", arguments: "" }
        },
        { type: "response.function_call_arguments.delta", ...at, delta: item.arguments },
        { type: "response.function_call_arguments.done", ...at, name: item.name, arguments: item.arguments },
        { type: "response.output_item.done", output_index: outputIndex, item }
      ]
  }
}

const numbered = (events: ReadonlyArray<EventBody>): ReadonlyArray<Sse.SseFrame> =>
  events.map((e, sequence_number) => Sse.event(e.type, { ...e, sequence_number }))

/**
 * Buffered-SSE terminal sequence: `response.created`, then per output Item `response.output_item.added`, its content in
 * one delta and `response.output_item.done`, then `response.completed` or `response.incomplete` with the full response.
 *
 * **Details**
 * The guide lists only `output_item.done`; `added` and the single-delta content events make the sequence one the
 * official SDKs' stream helpers (and delta-driven clients) accumulate correctly. No event carries a partial result.
 */
export const renderSse = (c: Completion.Completion, req: Completion.CanonicalRequest): ReadonlyArray<Sse.SseFrame> => {
  const response = renderJson(c, req)
  return numbered([
    { type: "response.created", response: inProgress(c.id, c.created, req.model) },
    ...response.output.flatMap(itemEvents),
    { type: response.status === "incomplete" ? "response.incomplete" : "response.completed", response }
  ])
}

/** The OpenAI error answer (non-stream errors are error bodies, not `failed` responses). */
export const renderError = (e: ProtocolError.AnyError): ProtocolError.ErrorResponse => ProtocolError.renderOpenAi(e)

/** A failure after the SSE response opened: `response.created`, then `response.failed` carrying the error. */
export const renderSseError = (
  e: ProtocolError.AnyError,
  context: Completion.FailureContext
): ReadonlyArray<Sse.SseFrame> => {
  const created = inProgress(context.id, context.created, context.model)
  const { error } = ProtocolError.openAiBody(e)
  return numbered([
    { type: "response.created", response: created },
    {
      type: "response.failed",
      response: { ...created, status: "failed", error: { code: error.code, message: error.message } }
    }
  ])
}

/** The Responses adapter. */
export const adapter: Completion.Adapter = {
  protocol: "responses",
  decode,
  renderJson,
  renderSse,
  renderError,
  renderSseError
}
