/**
 * What the three protocol adapters share: the canonical request they decode to, the protocol-neutral finished
 * generation they render from, and the decoding steps every protocol runs the same way.
 *
 * **Details**
 * Each adapter projects its request onto raw Chat-shaped messages, tools and chat_template_kwargs, then calls
 * {@link canonicalizeRequest}, so canonicalization and its error texts live in one place (`canonical.ts`). Field checks
 * use Effect Schemas for the shape and keep the reference's error texts (docs/requests.md).
 */
import { Result, Schema } from "effect"
import { createHash } from "node:crypto"
import * as Json from "../json/Json.ts"
import * as Canonical from "./Canonical.ts"
import * as ProtocolError from "./ProtocolError.ts"
import type * as RawEcho from "./RawEcho.ts"
import type * as Sse from "./Sse.ts"

/** A decoded model request: the canonical conversation state plus this turn's generation options. */
export interface CanonicalRequest {
  readonly state: Canonical.State
  /** Echoed in the answer; it does not select the inference backend. */
  readonly model: string
  readonly stream: boolean
  /** The turn limit (Chat `max_completion_tokens`/`max_tokens`, Responses `max_output_tokens`, Messages `max_tokens`). */
  readonly maxTokens?: number
  /** Stop strings for this turn (Chat `stop`, Messages `stop_sequences`). */
  readonly stop: ReadonlyArray<string>
  readonly seed?: number
  /** Chat `logprobs`: return generated-token logprobs. */
  readonly logprobs: boolean
  readonly topLogprobs?: number
  /** How the asking protocol spells the ids of generated tool calls (see {@link toolCallId}). */
  readonly toolCallIdPrefix: ToolCallIdPrefix
  /** The protocol that asked (the replay record names it; docs/debugging.md). */
  readonly protocol?: Sse.Protocol
  /** How the body's raw history relates to the Session's previous request (Chat only; see {@link Echo}). */
  readonly echo?: Echo
}

/**
 * A Chat request's raw history (src/protocol/RawEcho.ts): this body's mark, for the Session's next request, and,
 * when the body repeated the previous request's history byte for byte, the committed state whose full messages are
 * this request's first `messages` canonical messages (the very objects, which `Matching.match` checks).
 */
export interface Echo {
  readonly mark: RawEcho.Mark
  readonly known: { readonly state: string; readonly messages: number } | undefined
}

/** The tool-call id prefix of a protocol: `call_` (Chat Completions, Responses) or `toolu_` (Anthropic Messages). */
export type ToolCallIdPrefix = "call_" | "toolu_"

export interface ToolCallIdInput {
  readonly prefix: ToolCallIdPrefix
  readonly sessionId: string
  /** Identifies the generated response: the same on a retry of the same response. */
  readonly responseKey: string
  /** Index of the call in the response. */
  readonly position: number
}

/**
 * The id of a generated tool call: the prefix and 24 hex digits of the SHA-256 of session, response and position, so
 * a retried generation yields the same ids and the agent's echoed history still matches.
 */
export const toolCallId = (input: ToolCallIdInput): string =>
  input.prefix +
  createHash("sha256")
    .update(JSON.stringify([input.sessionId, input.responseKey, input.position]))
    .digest("hex")
    .slice(0, 24)

/** One tool call of a finished generation: a parsed call with its id; `arguments` is JSON text. */
export interface CompletionToolCall extends Canonical.ParsedToolCall {
  readonly id: string
}

/** Why a generation ended. `abort` renders like `stop` (the client sees a finished turn). */
export type FinishReason = "stop" | "length" | "tool_calls" | "abort"

/** Token accounting of one generation, shared by the three renderings. */
export interface Usage {
  readonly promptTokens: number
  readonly completionTokens: number
  /** Prompt tokens served from the engine's prefix cache. */
  readonly cachedTokens: number
}

/** The logprob of one generated token; `bytes` defaults to the UTF-8 bytes of `token`. */
export interface TokenLogprob {
  readonly token: string
  readonly logprob: number
  readonly bytes?: ReadonlyArray<number>
}

/** A finished generation, independent of the protocol it is rendered in. */
export interface Completion {
  /** Lower-case hex; each protocol prefixes it (`chatcmpl_`, `resp_`, `msg_`) and derives its item ids from it. */
  readonly id: string
  /** Unix seconds. */
  readonly created: number
  readonly reasoning?: string
  readonly content: string
  readonly toolCalls: ReadonlyArray<CompletionToolCall>
  readonly finish: FinishReason
  /** The request stop string that ended the generation, when one did (Messages `stop_reason: "stop_sequence"`). */
  readonly stopSequence?: string
  readonly usage: Usage
  readonly logprobs?: ReadonlyArray<TokenLogprob>
}

/** What an answer needs when the generation failed after a Buffered SSE response was opened. */
export interface FailureContext {
  readonly id: string
  readonly created: number
  readonly model: string
}

/** The interface every protocol module implements, so the gateway treats the three alike. */
export interface Adapter {
  readonly protocol: Sse.Protocol
  /**
   * Decode a request body. `known`: what the body's first raw messages canonicalize to, when the Session's previous
   * request sent them byte for byte (Chat reuses it; src/protocol/RawEcho.ts).
   */
  readonly decode: (
    body: unknown,
    known?: Canonical.KnownPrefix
  ) => Result.Result<CanonicalRequest, ProtocolError.ProtocolError>
  readonly renderJson: (completion: Completion, request: CanonicalRequest) => unknown
  readonly renderSse: (completion: Completion, request: CanonicalRequest) => ReadonlyArray<Sse.SseFrame>
  readonly renderError: (error: ProtocolError.AnyError) => ProtocolError.ErrorResponse
  readonly renderSseError: (error: ProtocolError.AnyError, context: FailureContext) => ReadonlyArray<Sse.SseFrame>
}

/** The finish reason as the client sees it: `length`, else `tool_calls` when there are tool calls, else `stop`. */
export const visibleFinish = (completion: Completion): "stop" | "length" | "tool_calls" =>
  completion.finish === "length" ? "length" : completion.toolCalls.length > 0 ? "tool_calls" : "stop"

/** The UTF-8 bytes of a token (for logprob entries that do not carry their own). */
export const utf8Bytes = (token: string): Array<number> => Array.from(new TextEncoder().encode(token))

// ---------------------------------------------------------------------------------------------------------------------
// Decoding helpers shared by the three adapters.

/** A JSON object (not an array, not null). */
export const isObject = Json.isObject

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))
const Integer = Schema.Int
const Strings = Schema.Array(Schema.String)
const isPositiveInt = Schema.is(PositiveInt)
const isInteger = Schema.is(Integer)
const isStrings = Schema.is(Strings)

/** A non-empty string (the reference's "non-empty string" checks). */
export const isNonEmptyString = (value: unknown): value is string => typeof value === "string" && value.length > 0

/** An array of strings. */
export const isStringArray = (value: unknown): value is ReadonlyArray<string> => isStrings(value)

/**
 * A flat function tool (`{name, <schema key>: {...}, description?}`, as Responses and Messages send them) as the Chat
 * tool the canonical request carries, or what is wrong with `tools[i]`. `schemaKey` names its parameters' JSON Schema
 * (`parameters` in Responses, `input_schema` in Messages).
 */
export const flatFunctionTool = (
  tool: Readonly<Record<string, unknown>>,
  i: number,
  schemaKey: "parameters" | "input_schema"
): Result.Result<Readonly<Record<string, unknown>>, ProtocolError.ProtocolError> => {
  const name = tool["name"]
  const parameters = tool[schemaKey]
  const description = tool["description"]
  if (!isNonEmptyString(name)) {
    return Result.fail(ProtocolError.invalid(`tools[${i}].name`, "tools.name must be a non-empty string"))
  }
  if (!isObject(parameters)) {
    return Result.fail(ProtocolError.invalid(`tools[${i}].${schemaKey}`, `tools.${schemaKey} must be a JSON object`))
  }
  return Result.succeed({
    type: "function",
    function: { name, parameters, ...(description === undefined || description === null ? {} : { description }) }
  })
}

/** The request body must be a JSON object. */
export const requireObject = (
  body: unknown
): Result.Result<Readonly<Record<string, unknown>>, ProtocolError.ProtocolError> =>
  isObject(body)
    ? Result.succeed(body)
    : Result.fail(ProtocolError.invalid("body", "request body must be a JSON object"))

/** An optional positive integer field (absent or null = not set); booleans are rejected. */
export const optionalPositiveInt = (
  body: Readonly<Record<string, unknown>>,
  field: string
): Result.Result<number | undefined, ProtocolError.ProtocolError> => {
  const value = body[field]
  if (value === undefined || value === null) return Result.succeed(undefined)
  return isPositiveInt(value)
    ? Result.succeed(value)
    : Result.fail(ProtocolError.invalid(field, `${field} must be a positive integer`))
}

/** `stream`: absent or null = false; otherwise a boolean. */
export const decodeStream = (
  body: Readonly<Record<string, unknown>>
): Result.Result<boolean, ProtocolError.ProtocolError> => {
  const value = body["stream"]
  if (value === undefined || value === null) return Result.succeed(false)
  return typeof value === "boolean"
    ? Result.succeed(value)
    : Result.fail(ProtocolError.invalid("stream", "stream must be a boolean"))
}

/** `seed`: absent or null = not set; otherwise an integer. */
export const decodeSeed = (
  body: Readonly<Record<string, unknown>>
): Result.Result<number | undefined, ProtocolError.ProtocolError> => {
  const value = body["seed"]
  if (value === undefined || value === null) return Result.succeed(undefined)
  return isInteger(value)
    ? Result.succeed(value)
    : Result.fail(ProtocolError.invalid("seed", "seed must be an integer"))
}

/** `model` is only echoed; a missing or non-string model echoes as "". */
export const decodeModel = (body: Readonly<Record<string, unknown>>): string =>
  typeof body["model"] === "string" ? body["model"] : ""

/** The raw Chat-shaped request every protocol projects onto before canonicalization. */
export interface RawChatRequest {
  readonly messages: unknown
  readonly tools?: unknown
  readonly chat_template_kwargs?: unknown
}

/** The turn options that accompany the canonical state. */
export interface TurnOptions {
  readonly model: string
  readonly stream: boolean
  readonly maxTokens: number | undefined
  readonly stop: ReadonlyArray<string>
  readonly seed: number | undefined
  readonly logprobs: boolean
  readonly topLogprobs: number | undefined
  readonly toolCallIdPrefix: ToolCallIdPrefix
  readonly protocol: Sse.Protocol
}

/**
 * The template kwargs of a protocol's reasoning setting (Messages' `thinking.type`, Responses' `reasoning.effort`):
 * `enable_thinking` false for its `off` value, true for its other `known` values; nothing for an unknown or absent one
 * (the template's default).
 */
export const thinkingKwargs = (
  setting: unknown,
  known: ReadonlyArray<string>,
  off: string
): { readonly enable_thinking?: boolean } =>
  typeof setting === "string" && known.includes(setting) ? { enable_thinking: setting !== off } : {}

/**
 * Canonicalize the projected request and attach the turn options.
 *
 * **Details**
 * `historyParam` is the request field holding the history (`messages`, or `input` for Responses). Canonicalization
 * errors about tools keep their `tools…` param; every other canonicalization error is reported on `historyParam` when
 * `keepParam` is false (the projected message indices of Responses and Messages do not match the request's). An empty
 * projected history is `"{historyParam} projected to zero supported messages"`.
 */
export const canonicalizeRequest = (
  raw: RawChatRequest,
  options: TurnOptions,
  historyParam: "messages" | "input",
  keepParam: boolean,
  known?: Canonical.KnownPrefix | undefined
): Result.Result<CanonicalRequest, ProtocolError.ProtocolError> => {
  const canonical = Canonical.canonicalize(raw, known)
  if (Result.isFailure(canonical)) {
    const { message, param } = canonical.failure
    const mapped = param === null ? historyParam : keepParam || param.startsWith("tools") ? param : historyParam
    return Result.fail(ProtocolError.invalid(mapped, message))
  }
  const state = canonical.success
  if (state.messages.length === 0) {
    return Result.fail(ProtocolError.invalid(historyParam, `${historyParam} projected to zero supported messages`))
  }
  return Result.succeed({
    state,
    model: options.model,
    stream: options.stream,
    stop: options.stop,
    logprobs: options.logprobs,
    toolCallIdPrefix: options.toolCallIdPrefix,
    protocol: options.protocol,
    ...(options.maxTokens === undefined ? {} : { maxTokens: options.maxTokens }),
    ...(options.seed === undefined ? {} : { seed: options.seed }),
    ...(options.topLogprobs === undefined ? {} : { topLogprobs: options.topLogprobs })
  })
}

/**
 * {@link canonicalizeRequest} for a protocol whose requests project onto Chat messages and carry no seed or logprobs
 * (Responses, Messages): canonicalization errors other than the tools' are reported on `historyParam`.
 */
export const canonicalizeProjected = (
  projected: {
    readonly messages: ReadonlyArray<Readonly<Record<string, unknown>>>
    readonly tools: ReadonlyArray<Readonly<Record<string, unknown>>>
    readonly kwargs: { readonly enable_thinking?: boolean }
  },
  options: Omit<TurnOptions, "seed" | "logprobs" | "topLogprobs">,
  historyParam: "messages" | "input"
): Result.Result<CanonicalRequest, ProtocolError.ProtocolError> =>
  canonicalizeRequest(
    { messages: projected.messages, tools: projected.tools, chat_template_kwargs: projected.kwargs },
    { ...options, seed: undefined, logprobs: false, topLogprobs: undefined },
    historyParam,
    false
  )
