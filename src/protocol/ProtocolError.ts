/**
 * Errors the model API answers with, and their wire bodies: the OpenAI shape (Chat Completions and Responses) and the
 * Anthropic shape (Messages).
 *
 * **Details**
 * A {@link ProtocolError} is a request the gateway refused to decode (400, `param` names the field). A
 * {@link GatewayError} is everything else the gateway can answer with (401, 404, 413, 499, 500, context length); its
 * constructors carry the reference texts so every route says the same thing. Rendering is pure: status, body and
 * headers, no I/O.
 */
import { Data } from "effect"

/** The text of a context-length error, in the reference's four variants (docs/requests.md "Error bodies"). */
export const contextLengthMessage = (
  limit: number | null,
  promptTokens?: number,
  completionTokens?: number
): string => {
  if (limit === null) {
    return "This model's maximum context length was exceeded. Please reduce the length of the messages."
  }
  if (promptTokens === undefined) {
    return `This model's maximum context length is ${limit} tokens. Please reduce the length of the messages.`
  }
  if (completionTokens === undefined) {
    return `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${promptTokens} tokens. Please reduce the length of the messages.`
  }
  return `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${promptTokens} tokens and requested ${completionTokens} completion tokens (${
    promptTokens + completionTokens
  } tokens total). Please reduce the length of the messages or max_completion_tokens.`
}

/** A request body that failed validation: HTTP 400 `invalid_request_error`, `param` naming the offending field. */
export class ProtocolError extends Data.TaggedError("ProtocolError")<{
  readonly message: string
  readonly param: string
}> {}

/** Shorthand for a {@link ProtocolError}. */
export const invalid = (param: string, message: string): ProtocolError => new ProtocolError({ param, message })

/**
 * Any non-validation error answer: authentication, unknown Session, body limits, client disconnects, context length and
 * internal failures. `type` and `code` are the OpenAI fields; the Anthropic type is derived from `status`.
 */
export class GatewayError extends Data.TaggedError("GatewayError")<{
  readonly status: number
  readonly type: string
  readonly code: string
  readonly param: string | null
  readonly message: string
}> {
  /** 401: no `Authorization` header at all. */
  static missingAuthorization(): GatewayError {
    return authentication("Missing Authorization header")
  }

  /** 401: an `Authorization` header that is not `Bearer <token>`. */
  static malformedAuthorization(): GatewayError {
    return authentication("Authorization header must be 'Bearer <token>'")
  }

  /** 404 `session_discarded`: the presented token names no live Session (unknown, or closed: `SessionClosedError`). */
  static sessionClosed(sessionId: string): GatewayError {
    return new GatewayError({
      status: 404,
      type: "not_found_error",
      code: "session_discarded",
      param: "session_id",
      message: `Unknown or discarded agentic session ${pythonRepr(sessionId)}.`
    })
  }

  /**
   * 503 `runner_unavailable` (cluster mode): the runner holding the Session cannot be reached or its connection was
   * lost (`detail`); the answer says to retry (`retry-after`), and a retry finds the Session or its 404.
   */
  static runnerUnavailable(detail: string): GatewayError {
    return new GatewayError({
      status: 503,
      type: "unavailable",
      code: "runner_unavailable",
      param: null,
      message: `The runner holding this Session cannot be reached now (${detail}); retry.`
    })
  }

  /**
   * 503 `service_unavailable_error` (versioned LoRA, docs/lora.md): the Session has no LoRA version to generate with;
   * `code` is the registry's refusal (`no_published_version`: retry once the trainer published one; `session_closed`),
   * as Relax answers it.
   */
  static loraUnavailable(code: string, message: string): GatewayError {
    return new GatewayError({ status: 503, type: "service_unavailable_error", code, param: null, message })
  }

  /** 400: the body is not valid JSON (`detail` is the parser's message). */
  static invalidJson(detail: string): GatewayError {
    return badRequest("body", `Invalid request body: ${detail}`)
  }

  /** 400: the body parsed but is not a JSON object. */
  static bodyNotObject(): GatewayError {
    return badRequest("body", "request body must be a JSON object")
  }

  /**
   * 400: the body nests JSON deeper than the gateway's limit. `path` is where the limit was passed (keys and indices
   * from the body's root); `param` is its top-level field.
   */
  static nestedTooDeep(path: ReadonlyArray<string | number>, limit: number): GatewayError {
    const shown = path.slice(0, 8).map((key, i) => typeof key === "number" ? `[${key}]` : i === 0 ? key : `.${key}`)
      .join("")
    const where = path.length > 8 ? `${shown}...` : shown
    const field = typeof path[0] === "string" ? path[0] : "body"
    return badRequest(
      field,
      `${field} nests JSON deeper than ${limit} levels (at ${where || "body"}); the gateway accepts at most ${limit} ` +
        "levels of nesting. Send a flatter value."
    )
  }

  /** 404: no route at this path. */
  static unknownRoute(method: string, path: string): GatewayError {
    return new GatewayError({
      status: 404,
      type: "not_found_error",
      code: "unknown_route",
      param: null,
      message: `No route ${method} ${path.slice(0, 200)}. The model API is POST /agentic_api/v1/chat/completions, ` +
        "/v1/responses or /v1/messages under RELAX_BASE_URL (GET /v1/models lists the model)."
    })
  }

  /** 405: a model route called with another method than POST. */
  static methodNotAllowed(method: string, path: string): GatewayError {
    return new GatewayError({
      status: 405,
      type: "invalid_request_error",
      code: "method_not_allowed",
      param: null,
      message: `${path} accepts POST only, not ${method}.`
    })
  }

  /** 413: the body is larger than the gateway's configured limit. */
  static bodyTooLarge(limitBytes: number): GatewayError {
    return new GatewayError({
      status: 413,
      type: "invalid_request_error",
      code: "request_too_large",
      param: "body",
      message: `Request body exceeds the gateway limit of ${limitBytes} bytes. Send a smaller request or raise the ` +
        "gateway's body size limit."
    })
  }

  /**
   * 400 `context_length_exceeded`: the prompt (plus requested completion) exceeds the model's context. The message
   * always contains "maximum context length", which is what clients look for.
   */
  static contextLength(limits: {
    readonly limit?: number | undefined
    readonly promptTokens?: number | undefined
    readonly completionTokens?: number | undefined
  }): GatewayError {
    const { completionTokens, limit, promptTokens } = limits
    const message = contextLengthMessage(limit ?? null, promptTokens, completionTokens)
    return new GatewayError({
      status: 400,
      type: "invalid_request_error",
      code: "context_length_exceeded",
      param: "messages",
      message
    })
  }

  /** 400: the request's images cannot get their training tokens (`ImageRejectedError`). Nothing was committed. */
  static imageRejected(reason: string): GatewayError {
    return badRequest("messages", `The images of these messages cannot be prepared for training: ${reason}.`)
  }

  /**
   * 400: the tokenizer's chat template cannot render this conversation (for example image parts under a text-only
   * template, or a history the template rejects). Nothing was committed.
   */
  static templateRejected(reason: string): GatewayError {
    return badRequest(
      "messages",
      `The chat template cannot render these messages: ${reason}. Send a conversation the model's template ` +
        "supports (a text-only template renders text content only; images need a multimodal model's tokenizer " +
        "directory, --tokenizer DIR)."
    )
  }

  /** 499: the client went away before the body was read, or before the completion was produced. */
  static clientDisconnect(phase: "body" | "completion"): GatewayError {
    return new GatewayError({
      status: 499,
      type: "client_disconnect",
      code: "client_disconnect",
      param: null,
      message: phase === "body"
        ? "client disconnected before agentic request body was read"
        : "client disconnected before agentic completion was produced"
    })
  }

  /**
   * The answer to a failed generation (src/generation/GenerationError.ts), the only place one becomes an HTTP error: 404 for a
   * Session closed while its request waited, 400 for a context length, a conversation the chat template rejects or
   * images that cannot get their training tokens, 503 for a Session without a LoRA version (`loraUnavailable`), and 500
   * `internal_error` for everything else (which the gateway
   * logs with the failure's message, since the answer does not say what went wrong).
   */
  static fromGeneration(failure: GenerationFailure): GatewayError {
    switch (failure._tag) {
      case "SessionClosedError":
        return GatewayError.sessionClosed(failure.sessionId)
      case "ContextLengthError":
        return GatewayError.contextLength({
          limit: failure.limit ?? undefined,
          promptTokens: failure.promptTokens,
          completionTokens: failure.completionTokens
        })
      case "TemplateError":
        return GatewayError.templateRejected(failure.detail)
      case "ImageRejectedError":
        return GatewayError.imageRejected(failure.detail)
      case "GenerationEngineError":
        return failure.reason === "lora"
          ? GatewayError.loraUnavailable(failure.code ?? "lora_unavailable", failure.message)
          : GatewayError.internal("chat")
      default:
        return GatewayError.internal("chat")
    }
  }

  /**
   * 500 `internal_error`. `where`: `"chat"` a failure while the generation ran (decode/parse), `"request"` any other
   * failure while handling the request, `"render"` a failure while rendering the answer.
   */
  static internal(where: "chat" | "request" | "render"): GatewayError {
    return new GatewayError({
      status: 500,
      type: "internal_error",
      code: "internal_error",
      param: null,
      message: where === "chat"
        ? "Internal error while handling agentic chat request."
        : where === "request"
        ? "Internal error while handling agentic request."
        : "Internal error while rendering agentic response."
    })
  }
}

/**
 * What {@link GatewayError.fromGeneration} reads of a generation failure: the variants of src/generation/GenerationError.ts
 * `GenerationError`, by tag (a structural type, so the protocol does not import the generation core, which imports it).
 */
export type GenerationFailure =
  | { readonly _tag: "SessionClosedError"; readonly sessionId: string }
  | {
    readonly _tag: "ContextLengthError"
    readonly limit: number | null
    readonly promptTokens?: number | undefined
    readonly completionTokens?: number | undefined
  }
  | { readonly _tag: "TemplateError" | "ImageRejectedError"; readonly detail: string }
  | {
    readonly _tag: "GenerationEngineError"
    readonly message: string
    readonly reason: string
    readonly code?: string | undefined
  }
  | {
    readonly _tag: "UnusableResponseError" | "ForestNotFoundError" | "ForestInvariantError"
    readonly message: string
  }

const authentication = (message: string) =>
  new GatewayError({ status: 401, type: "authentication_error", code: "authentication_error", param: null, message })

const badRequest = (param: string, message: string) =>
  new GatewayError({ status: 400, type: "invalid_request_error", code: "invalid_request_error", param, message })

/** Python's `repr` of a string, which the reference uses to quote session ids. */
const pythonRepr = (s: string): string => {
  const quote = s.includes("'") && !s.includes("\"") ? "\"" : "'"
  let out = quote
  for (const ch of s) {
    if (ch === "\\") out += "\\\\"
    else if (ch === quote) out += `\\${quote}`
    else if (ch === "\n") out += "\\n"
    else if (ch === "\r") out += "\\r"
    else if (ch === "\t") out += "\\t"
    else {
      const code = ch.codePointAt(0) ?? 0
      out += code < 0x20 || code === 0x7f ? `\\x${code.toString(16).padStart(2, "0")}` : ch
    }
  }
  return out + quote
}

/** Either error the gateway can answer with. */
export type AnyError = ProtocolError | GatewayError

/** An error answer: HTTP status, JSON body and extra headers. */
export interface ErrorResponse {
  readonly status: number
  readonly body: OpenAiErrorBody | AnthropicErrorBody
  readonly headers: Readonly<Record<string, string>>
}

/** `{"error":{message,type,param,code}}` — Chat Completions and Responses. */
export interface OpenAiErrorBody {
  readonly error: {
    readonly message: string
    readonly type: string
    readonly param: string | null
    readonly code: string
  }
}

/** `{"type":"error","error":{type,message}}` — Anthropic Messages. */
export interface AnthropicErrorBody {
  readonly type: "error"
  readonly error: { readonly type: string; readonly message: string }
}

const fields = (e: AnyError) =>
  e._tag === "ProtocolError"
    ? { status: 400, type: "invalid_request_error", code: "invalid_request_error", param: e.param, message: e.message }
    : { status: e.status, type: e.type, code: e.code, param: e.param, message: e.message }

/** The OpenAI error body of `e`. */
export const openAiBody = (e: AnyError): OpenAiErrorBody => {
  const f = fields(e)
  return { error: { message: f.message, type: f.type, param: f.param, code: f.code } }
}

/** The OpenAI error answer; `x-should-retry: false` for internal errors and discarded Sessions (retrying cannot help). */
export const renderOpenAi = (e: AnyError): ErrorResponse => {
  const f = fields(e)
  const noRetry = f.type === "internal_error" || f.code === "internal_error" || f.code === "session_discarded"
  return { status: f.status, body: openAiBody(e), headers: noRetry ? { "x-should-retry": "false" } : {} }
}

/** The Anthropic error type for an HTTP status. */
export const anthropicType = (status: number): string =>
  status === 401
    ? "authentication_error"
    : status === 404
    ? "not_found_error"
    : status === 413
    ? "request_too_large"
    : status >= 500
    ? "api_error"
    : "invalid_request_error"

/** The Anthropic error body of `e`. */
export const anthropicBody = (e: AnyError): AnthropicErrorBody => {
  const f = fields(e)
  return { type: "error", error: { type: anthropicType(f.status), message: f.message } }
}

/** The Anthropic error answer; `x-should-retry: false` for 404 and server errors but a 503 (retry it). */
export const renderAnthropic = (e: AnyError): ErrorResponse => {
  const f = fields(e)
  return {
    status: f.status,
    body: anthropicBody(e),
    headers: f.status === 503 ? {} : f.status >= 500 || f.status === 404 ? { "x-should-retry": "false" } : {}
  }
}
