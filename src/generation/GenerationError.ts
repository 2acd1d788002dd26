/**
 * Why one model request failed in the generation core (layers/generation/Generation.ts), protocol-neutral.
 *
 * **Details**
 * The gateway maps each variant to its HTTP answer (src/protocol/ProtocolError.ts `GatewayError.fromGeneration`): a context-length failure is
 * 400 `context_length_exceeded`, a template the conversation cannot render (`TemplateError`) and images that cannot
 * get their training tokens are 400 `invalid_request_error`, a Session closed while its request waited
 * (`SessionClosedError`) is 404 `session_discarded`, and everything else is 500 `internal_error` (logged with the
 * variant's message). Nothing is committed for a context-length, template or image failure. Errors raised elsewhere
 * keep their own name here (one event, one name); the classes below are the generation core's own.
 */
import { Data } from "effect"
import type * as ContextLengthError from "../engine/ContextLengthError.ts"
import type * as ForestError from "../forest/ForestError.ts"
import type * as SessionError from "../session/SessionError.ts"
import type * as ChatTemplate from "../template/ChatTemplate.ts"

/**
 * The request's images cannot get their processor-expanded training tokens: an image that cannot be read, a size the
 * processor refuses, or placeholders without a vision processor (nothing was committed).
 */
export class ImageRejectedError extends Data.TaggedError("ImageRejectedError")<{
  /** What was wrong, in words. */
  readonly detail: string
}> {
  override get message(): string {
    return `images cannot be prepared for training: ${this.detail}`
  }
}

/**
 * Why the engine failed a request: it raised an `EngineError` (the `cause`), aborted it too often without output, or
 * the Session has no LoRA version to generate with (`lora`, docs/lora.md; `code` says which refusal).
 */
export type GenerationEngineErrorReason = "engine" | "aborted" | "lora"

/** The engine failed the request, or aborted it too often without producing a token. */
export class GenerationEngineError extends Data.TaggedError("GenerationEngineError")<{
  readonly reason: GenerationEngineErrorReason
  /** What was wrong, in words (the engine error's message for `engine`). */
  readonly detail: string
  /** The engine's error, for `engine`. */
  readonly cause?: unknown
  /** For `lora`: the registry's refusal (`no_published_version`, `session_closed`). */
  readonly code?: string | undefined
}> {
  override get message(): string {
    return this.detail
  }
}

/**
 * The engine's output cannot be committed as an assistant message: no output tokens, parsers that left nothing, or
 * a message canonicalization rejects.
 */
export class UnusableResponseError extends Data.TaggedError("UnusableResponseError")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

/** Every way `Generation.generate` can fail. */
export type GenerationError =
  | ContextLengthError.ContextLengthError
  | ChatTemplate.TemplateError
  | ImageRejectedError
  | SessionError.SessionClosedError
  | GenerationEngineError
  | UnusableResponseError
  | ForestError.ForestNotFoundError
  | ForestError.ForestInvariantError
