/**
 * SGLang's native HTTP wire shapes (`/generate`, `/abort_request`, `/close_session`, `/update_weight_version`, `/tokenize`,
 * `/get_model_info`, router `/workers`),
 * as Schemas shared by the client (layers/engine/sglang/SglangEngine.ts) and the test server.
 *
 * **Details**
 * Request shapes list exactly what relax-agentic sends; response shapes read only the fields it uses and ignore the
 * rest, so newer SGLang builds that add fields still decode.
 */
import { Result, Schema } from "effect"
import type * as Stop from "../Stop.ts"
import * as WeightVersion from "../WeightVersion.ts"
import * as PromptIdsJson from "./PromptIdsJson.ts"

/** `sampling_params`: every field is sent explicitly because SGLang's server-side defaults differ between versions. */
export const SamplingParams = Schema.Struct({
  max_new_tokens: Schema.Int,
  temperature: Schema.Number,
  top_p: Schema.Number,
  top_k: Schema.Int,
  min_p: Schema.Number,
  stop: Schema.Array(Schema.String),
  stop_token_ids: Schema.Array(Schema.Int),
  skip_special_tokens: Schema.Boolean,
  spaces_between_special_tokens: Schema.Boolean,
  no_stop_trim: Schema.Boolean,
  sampling_seed: Schema.optionalKey(Schema.Int)
})
export type SamplingParams = typeof SamplingParams.Type

/** `POST /generate` body (token-in: `input_ids`, never `text`). */
export const GenerateRequest = Schema.Struct({
  input_ids: Schema.Array(Schema.Int),
  sampling_params: SamplingParams,
  rid: Schema.String,
  return_logprob: Schema.Boolean,
  image_data: Schema.optionalKey(Schema.Array(Schema.String)),
  /** With `--agentic-session-lifecycle`: the Session, whose radix-cache entries `/close_session` releases. */
  session_id: Schema.optionalKey(Schema.String),
  /** With `--sglang-priority-scheduling` (servers launched with `--enable-priority-scheduling`): larger runs first. */
  priority: Schema.optionalKey(Schema.Int),
  /** With `--sglang-lora-path`: the LoRA adapter to generate with. */
  lora_path: Schema.optionalKey(Schema.String),
  /** With `--use-rollout-routing-replay`: MoE expert choices per token in `meta_info.routed_experts`. */
  return_routed_experts: Schema.optionalKey(Schema.Boolean)
})
export type GenerateRequest = typeof GenerateRequest.Type

/** A `/generate` body to encode: {@link GenerateRequest} with its ids as any array of numbers (an `Int32Array`). */
export type GenerateBody = Omit<GenerateRequest, "input_ids"> & { readonly input_ids: ArrayLike<number> }

/** Write `value`'s JSON text at `at` (ASCII); returns the end. Plain ids digit pair by digit pair. */
const writeNumber = (bytes: Uint8Array, at: number, value: number): number => {
  if (PromptIdsJson.isPlainId(value)) return PromptIdsJson.writeId(bytes, at, value)
  // JSON's own text for anything else (negative, fractional, huge; -0 is "0", NaN and infinities are "null").
  const text = JSON.stringify(value) ?? "null"
  for (let i = 0; i < text.length; i++) bytes[at + i] = text.charCodeAt(i)
  return at + text.length
}

const inputIdsOpen = Buffer.from("{\"input_ids\":[")

/**
 * The `/generate` body as UTF-8 bytes: exactly `JSON.stringify(request)` for a request whose first key is `input_ids`
 * (as every request the engine builds; ids given as an `Int32Array` are written as the array of numbers they hold),
 * written without the intermediate string.
 *
 * **Details**
 * A prompt is thousands of ids, sent on every turn; `JSON.stringify` builds a ~20 KB string that the HTTP client
 * then encodes again into bytes. Here the ids are written as digits straight into the buffer that is sent, and only
 * the small rest of the request goes through `JSON.stringify` (its text after `{` follows the ids). `idsText`: the ids'
 * text already written (src/engine/sglang/PromptIdsJson.ts keeps it per Session), copied instead.
 */
export const encodeGenerateRequest = (request: GenerateBody, idsText?: Uint8Array): Uint8Array =>
  encodeGenerateBody(request, idsText === undefined ? undefined : { text: idsText, from: request.input_ids.length })
    .body

/**
 * {@link encodeGenerateRequest} from a kept head (src/engine/sglang/PromptIdsJson.ts): `head.text` is the text of the first
 * `head.from` ids, copied; the rest are written after it. Also gives the ids' whole text as a view of the body
 * (`idsText`), which the caller may keep as the head of the Session's next prompt: the body is never written again
 * once encoded, so the text is written once and copied once per prompt. `idsText` is `undefined` when an id written
 * is not a plain one (src/engine/sglang/PromptIdsJson.ts `isPlainId`): the ids kept with a text are compared as int32 values,
 * which would not tell `1.5` or `NaN` from `1` or `0`.
 */
export const encodeGenerateBody = (
  request: GenerateBody,
  head?: PromptIdsJson.Head
): { readonly body: Uint8Array; readonly idsText: Uint8Array | undefined } => {
  const { input_ids: ids, ...rest } = request
  const restText = JSON.stringify(rest)
  const from = head?.from ?? 0
  // The longest text of one id is 24 bytes (e.g. -1.2345678901234567e-300); ints take at most 8 digits + comma.
  let capacity = inputIdsOpen.length + 2 + Buffer.byteLength(restText) + (head?.text.length ?? 0)
  for (let i = from; i < ids.length; i++) {
    const id = ids[i]!
    capacity += PromptIdsJson.isPlainId(id) ? 9 : 25
  }
  const bytes = Buffer.allocUnsafeSlow(capacity)
  let at = inputIdsOpen.copy(bytes, 0)
  if (head !== undefined) {
    bytes.set(head.text, at)
    at += head.text.length
  }
  let plain = true
  for (let i = from; i < ids.length; i++) {
    if (i > 0) bytes[at++] = 44 // ,
    const id = ids[i]!
    if (PromptIdsJson.isPlainId(id)) at = PromptIdsJson.writeId(bytes, at, id)
    else {
      plain = false
      at = writeNumber(bytes, at, id)
    }
  }
  const idsText = plain ? bytes.subarray(inputIdsOpen.length, at) : undefined
  bytes[at++] = 93 // ]
  if (restText.length > 2) bytes[at++] = 44 // , before the other fields
  at += bytes.write(restText.slice(1), at, "utf8")
  return { body: bytes.subarray(0, at), idsText }
}

export const FinishReasonWire = Schema.Union([
  Schema.Struct({
    type: Schema.Literal("stop"),
    matched: Schema.optionalKey(Schema.NullOr(Schema.Union([Schema.Int, Schema.String])))
  }),
  Schema.Struct({ type: Schema.Literal("length"), length: Schema.optionalKey(Schema.NullOr(Schema.Int)) }),
  Schema.Struct({ type: Schema.Literal("abort"), message: Schema.optionalKey(Schema.NullOr(Schema.String)) })
])
export type FinishReasonWire = typeof FinishReasonWire.Type

/** One `output_token_logprobs` entry: `[logprob, token_id, text | null]`. */
export const TokenLogprob = Schema.TupleWithRest(Schema.Tuple([Schema.Number, Schema.Int]), [Schema.Unknown])

export const MetaInfo = Schema.Struct({
  id: Schema.optionalKey(Schema.String),
  finish_reason: Schema.NullOr(FinishReasonWire),
  /**
   * Absent on an abort that hit the request in the scheduler's waiting queue (`TokenizerManager._handle_abort_req`:
   * `output_ids: []`, finish `abort` "Abort in waiting queue", no `prompt_tokens` / `cached_tokens`).
   */
  prompt_tokens: Schema.optionalKey(Schema.Int),
  completion_tokens: Schema.optionalKey(Schema.Int),
  cached_tokens: Schema.optionalKey(Schema.Int),
  /** Absent on SGLang builds older than mid-2025. */
  weight_version: Schema.optionalKey(Schema.String),
  output_token_logprobs: Schema.optionalKey(Schema.Array(TokenLogprob)),
  /**
   * With `return_routed_experts` (servers launched with `--enable-return-routed-experts`): base64 of a little-endian
   * int32 array of shape `(prompt + output − 1, layers × topk)`, the whole sequence so far.
   */
  routed_experts: Schema.optionalKey(Schema.String)
})

/**
 * `meta_info.routed_experts` (`RoutedExpertsCapturer`, `srt/layers/moe/routed_experts_capturer.py`, put in
 * `meta_info` by the tokenizer manager: `pybase64.b64encode` of a little-endian int32 array of shape
 * `(prompt + output − 1, layers, topk)`) as one row of `layers × topk` expert ids per sequence position the request
 * went through: row `p` is the routing of the forward step that processed token `p` (the step at `prompt + k − 1`
 * produced output token `k`; the last output token is never fed back). Fails when the size does not fit.
 */
export const decodeRoutedExperts = (
  base64: string,
  promptTokens: number,
  outputTokens: number
): Result.Result<ReadonlyArray<ReadonlyArray<number>>, string> => {
  const positions = promptTokens + outputTokens - 1
  if (positions <= 0) return Result.succeed([])
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) return Result.fail("routed_experts is not base64 text")
  const bytes = Buffer.from(base64, "base64")
  if (bytes.length % 4 !== 0 || (bytes.length / 4) % positions !== 0 || bytes.length === 0) {
    return Result.fail(
      `routed_experts holds ${bytes.length} bytes, not int32 rows for ${positions} positions ` +
        `(${promptTokens} prompt + ${outputTokens} output tokens − 1)`
    )
  }
  const width = bytes.length / 4 / positions
  const rows: Array<ReadonlyArray<number>> = []
  for (let p = 0; p < positions; p++) {
    const row = new Array<number>(width)
    for (let j = 0; j < width; j++) row[j] = bytes.readInt32LE((p * width + j) * 4)
    rows.push(row)
  }
  return Result.succeed(rows)
}

/**
 * The `meta_info.routed_experts` text SGLang would send for `rows` (one int32 row per sequence position): the fake
 * server's encoding, as `RoutedExpertsCapturer` does it (`pybase64.b64encode(array.astype(int32).tobytes())`).
 */
export const encodeRoutedExperts = (rows: ReadonlyArray<ReadonlyArray<number>>): string => {
  const width = rows[0]?.length ?? 0
  const bytes = Buffer.alloc(rows.length * width * 4)
  rows.forEach((row, i) => row.forEach((v, j) => bytes.writeInt32LE(v, (i * width + j) * 4)))
  return bytes.toString("base64")
}

export const GenerateResponse = Schema.Struct({
  text: Schema.optionalKey(Schema.String),
  output_ids: Schema.optionalKey(Schema.Array(Schema.Int)),
  meta_info: MetaInfo
})
export type GenerateResponse = typeof GenerateResponse.Type

/** `POST /abort_request` body (200 with an empty body on success). */
export const AbortRequest = Schema.Struct({
  rid: Schema.String,
  abort_all: Schema.optionalKey(Schema.Boolean)
})
export type AbortRequest = typeof AbortRequest.Type

/** `POST /close_session` body (200 with an empty body; an unknown session is a no-op on the server). */
export const CloseSessionRequest = Schema.Struct({
  session_id: Schema.String
})
export type CloseSessionRequest = typeof CloseSessionRequest.Type

export const UpdateWeightVersionRequest = Schema.Struct({
  new_version: Schema.String,
  abort_all_requests: Schema.Boolean
})
export type UpdateWeightVersionRequest = typeof UpdateWeightVersionRequest.Type

export const UpdateWeightVersionResponse = Schema.Struct({
  success: Schema.Boolean,
  message: Schema.optionalKey(Schema.String),
  new_version: Schema.optionalKey(Schema.String)
})

export const WeightVersionResponse = Schema.Struct({ weight_version: Schema.String })

/** `POST /tokenize` body (SGLang's OpenAI-style tokenize helper). */
export const TokenizeRequest = Schema.Struct({
  prompt: Schema.String,
  add_special_tokens: Schema.Boolean
})
export type TokenizeRequest = typeof TokenizeRequest.Type

export const TokenizeResponse = Schema.Struct({ tokens: Schema.Array(Schema.Int) })

/** `GET /get_model_info`: the fields read (the model the server was launched with). */
export const ModelInfoResponse = Schema.Struct({
  model_path: Schema.optionalKey(Schema.NullOr(Schema.String)),
  tokenizer_path: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/** Router (SGLang Model Gateway) `GET /workers`. */
export const WorkersResponse = Schema.Struct({
  workers: Schema.Array(Schema.Struct({ url: Schema.String, is_healthy: Schema.optionalKey(Schema.Boolean) }))
})

/** Older router `GET /list_workers`. */
export const ListWorkersResponse = Schema.Struct({ urls: Schema.Array(Schema.String) })

/**
 * SGLang's error bodies: `/generate`'s `{"error":{"message":…}}` (`_create_error_response`), the OpenAI-style
 * `{"object":"error","message":…}`, FastAPI's `{"detail":…}`, and the API-key middleware's `{"error":"Unauthorized"}`.
 */
export const ErrorBody = Schema.Struct({
  object: Schema.optionalKey(Schema.String),
  message: Schema.optionalKey(Schema.String),
  error: Schema.optionalKey(
    Schema.Union([Schema.String, Schema.Struct({ message: Schema.optionalKey(Schema.String) })])
  ),
  detail: Schema.optionalKey(Schema.Unknown),
  code: Schema.optionalKey(Schema.Int)
})

/** The port's finish reason from the wire shape (`null` means an unfinished chunk: reported as an abort). */
export const toFinishReason = (wire: FinishReasonWire | null): Stop.FinishReason => {
  if (wire === null) return { type: "abort", message: "SGLang returned no finish_reason" }
  switch (wire.type) {
    case "stop":
      return wire.matched === undefined || wire.matched === null
        ? { type: "stop" }
        : { type: "stop", matched: wire.matched }
    case "length":
      return wire.length === undefined || wire.length === null
        ? { type: "length" }
        : { type: "length", length: wire.length }
    case "abort":
      return wire.message === undefined || wire.message === null
        ? { type: "abort" }
        : { type: "abort", message: wire.message }
  }
}

/** The wire shape of a port finish reason (the test server's responses). */
export const fromFinishReason = (reason: Stop.FinishReason): FinishReasonWire => {
  switch (reason.type) {
    case "stop":
      return reason.matched === undefined ? { type: "stop" } : { type: "stop", matched: reason.matched }
    case "length":
      return reason.length === undefined ? { type: "length" } : { type: "length", length: reason.length }
    case "abort":
      return { type: "abort", message: reason.message ?? "Aborted" }
  }
}

/**
 * Whether an HTTP 400 body is a context-length rejection: relax's two markers, SGLang's input-only wording
 * (`TokenizerManager._validate_one_request`) and the scheduler's (`validate_input_length` in `managers/utils.py`,
 * on servers whose KV pool is smaller than the context window).
 */
export const isContextLengthMessage = (body: string): boolean =>
  body.includes("maximum context length") ||
  body.includes("Requested token count exceeds") ||
  body.includes("is longer than the model's context length") ||
  body.includes("exceeds the maximum allowed length")

/** The scheduler's wording for an input at or above `max_req_input_len` (`validate_input_length`, managers/utils.py). */
export const inputLengthMessage = (inputTokens: number, maxReqInputLen: number): string =>
  `Input length (${inputTokens} tokens) exceeds the maximum allowed length (${maxReqInputLen} tokens). ` +
  "Use a shorter input or enable --allow-auto-truncate."

/** `POST /pause_generation` body (`PauseGenerationReqInput`). */
export const PauseGenerationRequest = Schema.Struct({
  mode: WeightVersion.PauseMode
})
export type PauseGenerationRequest = typeof PauseGenerationRequest.Type

/** `POST /update_weights_from_disk` body: the fields the test server reads (`UpdateWeightFromDiskReqInput`). */
export const UpdateWeightsFromDiskRequest = Schema.Struct({
  model_path: Schema.String,
  weight_version: Schema.optionalKey(Schema.NullOr(Schema.String)),
  abort_all_requests: Schema.optionalKey(Schema.Boolean),
  flush_cache: Schema.optionalKey(Schema.Boolean)
})

/** SGLang's wording for a prompt that alone fills the context window. */
export const inputTooLongMessage = (inputTokens: number, contextLength: number): string =>
  `The input (${inputTokens} tokens) is longer than the model's context length (${contextLength} tokens).`

/** SGLang's wording for prompt + `max_new_tokens` reaching the context window. */
export const requestTooLongMessage = (inputTokens: number, maxNewTokens: number, contextLength: number): string =>
  `Requested token count exceeds the model's maximum context length of ${contextLength} tokens. ` +
  `You requested a total of ${inputTokens + maxNewTokens} tokens: ${inputTokens} tokens from the input messages and ` +
  `${maxNewTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the ` +
  `completion to fit within the limit.`

/**
 * SGLang's context check (`_validate_one_request`): the input alone must be shorter than the window, and
 * input + max_new_tokens must be too (both `>=` comparisons). Fails with SGLang's message.
 */
export const checkContextLength = (
  inputTokens: number,
  maxNewTokens: number,
  contextLength: number
): Result.Result<void, string> => {
  if (inputTokens >= contextLength) return Result.fail(inputTooLongMessage(inputTokens, contextLength))
  if (inputTokens + maxNewTokens >= contextLength) {
    return Result.fail(requestTooLongMessage(inputTokens, maxNewTokens, contextLength))
  }
  return Result.void
}
