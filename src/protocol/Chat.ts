/**
 * OpenAI Chat Completions: decode a request into the canonical request, render a finished generation as a
 * `chat.completion` body or as its Buffered-SSE terminal sequence.
 *
 * **Details**
 * Chat messages already are the canonical shape, so decoding validates the turn options (docs/requests.md "Turn
 * options") and hands `messages`, `tools` and `chat_template_kwargs` to canonicalization unchanged. `temperature`,
 * `top_p`, `n` and other sampling fields are ignored (the rollout configuration supplies sampling); `model` is only
 * echoed.
 */
import { Result, Schema } from "effect"
import type * as Canonical from "./Canonical.ts"
import * as Completion from "./Completion.ts"
import * as ProtocolError from "./ProtocolError.ts"
import * as Sse from "./Sse.ts"

// ---------------------------------------------------------------------------------------------------------------------
// Wire shapes of the answer.

/** A tool call of the answer; `arguments` is JSON text. */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function"),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})

/** The assistant message of a `chat.completion`; send it back unchanged in the next request. */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.String,
  reasoning_content: Schema.optionalKey(Schema.String),
  tool_calls: Schema.optionalKey(Schema.Array(ToolCall))
})
export type AssistantMessage = typeof AssistantMessage.Type

const TopLogprob = Schema.Struct({ token: Schema.String, logprob: Schema.Number, bytes: Schema.Array(Schema.Number) })

/** `choices[].logprobs`: one entry per generated token (no alternatives: `top_logprobs` is empty). */
export const Logprobs = Schema.Struct({
  content: Schema.Array(Schema.Struct({
    token: Schema.String,
    logprob: Schema.Number,
    bytes: Schema.Array(Schema.Number),
    top_logprobs: Schema.Array(TopLogprob)
  }))
})
export type Logprobs = typeof Logprobs.Type

/** Why the turn ended, as Chat Completions says it. */
export const FinishReason = Schema.Literals(["stop", "length", "tool_calls"])

/** Token usage; every answer carries it complete, streamed or not. */
export const Usage = Schema.Struct({
  prompt_tokens: Schema.Number,
  completion_tokens: Schema.Number,
  total_tokens: Schema.Number,
  prompt_tokens_details: Schema.Struct({ cached_tokens: Schema.Number })
})
export type Usage = typeof Usage.Type

/** One choice of an answer: its `body` (the message, or the delta of a chunk) between its index and how it ended. */
const choice = <Body extends Schema.Struct.Fields>(body: Body) =>
  Schema.Struct({ index: Schema.Number, ...body, logprobs: Schema.NullOr(Logprobs), finish_reason: FinishReason })

/** An answer object (`object`), one choice of `body`, with complete usage. */
const answer = <Kind extends string, Body extends Schema.Struct.Fields>(object: Kind, body: Body) =>
  Schema.Struct({
    id: Schema.String,
    object: Schema.Literal(object),
    created: Schema.Number,
    model: Schema.String,
    choices: Schema.Array(choice(body)),
    usage: Usage
  })

/** The JSON (non-stream) answer. */
export const ChatCompletion = answer("chat.completion", { message: AssistantMessage })
export type ChatCompletion = typeof ChatCompletion.Type

/** The one chunk of a Buffered-SSE answer: the full message as its delta, with complete usage. */
export const ChatCompletionChunk = answer("chat.completion.chunk", {
  delta: Schema.Struct({
    role: Schema.Literal("assistant"),
    content: Schema.String,
    reasoning_content: Schema.optionalKey(Schema.String),
    tool_calls: Schema.optionalKey(Schema.Array(Schema.Struct({ ...ToolCall.fields, index: Schema.Number })))
  })
})
export type ChatCompletionChunk = typeof ChatCompletionChunk.Type

// ---------------------------------------------------------------------------------------------------------------------
// Decode.

/** Template arguments Relax sets itself; a request may not set them. */
const reservedKwargs = ["add_generation_prompt", "tokenize", "tools"]

const TopLogprobs = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 20 }))
const isTopLogprobs = Schema.is(TopLogprobs)

/**
 * Decode a Chat Completions request body (docs/requests.md "Turn options"). Written as plain checks rather than
 * `Result.gen`: it runs on every request, and the generator costs a few objects per step. `known`: the canonical messages
 * the body's first raw messages are known to canonicalize to (src/protocol/RawEcho.ts); the rest are canonicalized.
 */
export const decode = (
  body: unknown,
  known?: Canonical.KnownPrefix
): Result.Result<Completion.CanonicalRequest, ProtocolError.ProtocolError> => {
  const object = Completion.requireObject(body)
  if (Result.isFailure(object)) return Result.fail(object.failure)
  const b = object.success
  const stream = Completion.decodeStream(b)
  if (Result.isFailure(stream)) return Result.fail(stream.failure)
  const kwargs = b["chat_template_kwargs"]
  if (Completion.isObject(kwargs)) {
    const reserved = reservedKwargs.filter((key) => Object.hasOwn(kwargs, key))
    if (reserved.length > 0) {
      return Result.fail(ProtocolError.invalid(
        "chat_template_kwargs",
        `chat_template_kwargs cannot set reserved keys: ${reserved.join(", ")}`
      ))
    }
  }
  const logprobs = b["logprobs"]
  if (logprobs !== undefined && logprobs !== null && typeof logprobs !== "boolean") {
    return Result.fail(ProtocolError.invalid("logprobs", "logprobs must be a boolean"))
  }
  const maxCompletionTokens = Completion.optionalPositiveInt(b, "max_completion_tokens")
  if (Result.isFailure(maxCompletionTokens)) return Result.fail(maxCompletionTokens.failure)
  const maxTokens = Completion.optionalPositiveInt(b, "max_tokens")
  if (Result.isFailure(maxTokens)) return Result.fail(maxTokens.failure)
  const stop = decodeStop(b["stop"])
  if (Result.isFailure(stop)) return Result.fail(stop.failure)
  const seed = Completion.decodeSeed(b)
  if (Result.isFailure(seed)) return Result.fail(seed.failure)
  const topLogprobs = b["top_logprobs"]
  return Completion.canonicalizeRequest(
    { messages: b["messages"], tools: b["tools"], chat_template_kwargs: kwargs },
    {
      model: Completion.decodeModel(b),
      stream: stream.success,
      maxTokens: maxCompletionTokens.success ?? maxTokens.success,
      stop: stop.success,
      seed: seed.success,
      logprobs: logprobs === true,
      // Absent in most requests: not worth a Schema check (and the issue it builds) there.
      topLogprobs: topLogprobs !== undefined && topLogprobs !== null && isTopLogprobs(topLogprobs)
        ? topLogprobs
        : undefined,
      toolCallIdPrefix: "call_",
      protocol: "chat"
    },
    "messages",
    true,
    known
  )
}

const decodeStop = (stop: unknown): Result.Result<ReadonlyArray<string>, ProtocolError.ProtocolError> => {
  if (stop === undefined || stop === null) return Result.succeed([])
  if (typeof stop === "string") return Result.succeed([stop])
  return Completion.isStringArray(stop)
    ? Result.succeed(stop)
    : Result.fail(ProtocolError.invalid("stop", "stop must be a string or list of strings"))
}

// ---------------------------------------------------------------------------------------------------------------------
// Render.

/** The assistant message of a finished generation. */
export const message = (c: Completion.Completion): AssistantMessage => ({
  role: "assistant",
  content: c.content,
  ...(c.reasoning === undefined || c.reasoning === "" ? {} : { reasoning_content: c.reasoning }),
  ...(c.toolCalls.length === 0 ? {} : {
    tool_calls: c.toolCalls.map((call) => ({
      id: call.id,
      type: "function" as const,
      function: { name: call.name, arguments: call.arguments }
    }))
  })
})

const logprobsOf = (c: Completion.Completion, req: Completion.CanonicalRequest): Logprobs | null =>
  req.logprobs && c.logprobs !== undefined
    ? {
      content: c.logprobs.map((lp) => ({
        token: lp.token,
        logprob: lp.logprob,
        bytes: lp.bytes === undefined ? Completion.utf8Bytes(lp.token) : [...lp.bytes],
        top_logprobs: []
      }))
    }
    : null

const usageOf = (c: Completion.Completion): Usage => ({
  prompt_tokens: c.usage.promptTokens,
  completion_tokens: c.usage.completionTokens,
  total_tokens: c.usage.promptTokens + c.usage.completionTokens,
  prompt_tokens_details: { cached_tokens: c.usage.cachedTokens }
})

/** The `chat.completion` JSON body. */
export const renderJson = (c: Completion.Completion, req: Completion.CanonicalRequest): ChatCompletion => ({
  id: `chatcmpl_${c.id}`,
  object: "chat.completion",
  created: c.created,
  model: req.model,
  choices: [{
    index: 0,
    message: message(c),
    logprobs: logprobsOf(c, req),
    finish_reason: Completion.visibleFinish(c)
  }],
  usage: usageOf(c)
})

/** The terminal chunk: the full message as one delta (each tool call with its `index`) and complete usage. */
export const chunk = (c: Completion.Completion, req: Completion.CanonicalRequest): ChatCompletionChunk => {
  const { tool_calls, ...rest } = message(c)
  return {
    id: `chatcmpl_${c.id}`,
    object: "chat.completion.chunk",
    created: c.created,
    model: req.model,
    choices: [{
      index: 0,
      delta: {
        ...rest,
        ...(tool_calls === undefined ? {} : { tool_calls: tool_calls.map((t, index) => ({ index, ...t })) })
      },
      logprobs: logprobsOf(c, req),
      finish_reason: Completion.visibleFinish(c)
    }],
    usage: usageOf(c)
  }
}

/** Buffered-SSE terminal sequence: one complete `chat.completion.chunk`, then `[DONE]`. */
export const renderSse = (c: Completion.Completion, req: Completion.CanonicalRequest): ReadonlyArray<Sse.SseFrame> => [
  Sse.data(chunk(c, req)),
  Sse.done
]

/** The OpenAI error answer. */
export const renderError = (e: ProtocolError.AnyError): ProtocolError.ErrorResponse => ProtocolError.renderOpenAi(e)

/** A failure after the SSE response opened: the OpenAI error body as data, then `[DONE]` (the status stays 200). */
export const renderSseError = (
  e: ProtocolError.AnyError,
  _context?: Completion.FailureContext
): ReadonlyArray<Sse.SseFrame> => [
  Sse.data(ProtocolError.openAiBody(e)),
  Sse.done
]

/** The Chat Completions adapter. */
export const adapter: Completion.Adapter = {
  protocol: "chat",
  decode,
  renderJson,
  renderSse,
  renderError,
  renderSseError
}
