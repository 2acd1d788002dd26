/**
 * Why one model request failed in the generation core (layers/generation/Generation.ts), protocol-neutral.
 *
 * **Details**
 * The gateway maps each variant to its HTTP answer (src/protocol/errors.ts `GatewayError.fromGeneration`): a context-length failure is
 * 400 `context_length_exceeded`, a template the conversation cannot render and images that cannot get their training
 * tokens are 400 `invalid_request_error`, a Session
 * closed while its request waited is 404 `session_discarded`, and everything else is 500 `internal_error` (logged with
 * the variant's message). Nothing is committed for a context-length or template failure.
 */
import { Data } from "effect"
import { ContextLengthError, ForestInvariantError, ForestNotFound } from "../forest/errors.ts"

/** The Session was closed (finished or discarded) while the request waited for its Group's Runtime lease. */
export class SessionDiscarded extends Data.TaggedError("SessionDiscarded")<{ readonly sessionId: string }> {
  override get message(): string {
    return `agentic session ${this.sessionId} was closed while its request waited for the Runtime lease`
  }
}

/** The tokenizer's chat template cannot render the request's new messages (nothing was committed). */
export class TemplateRejected extends Data.TaggedError("TemplateRejected")<{ readonly reason: string }> {
  override get message(): string {
    return `chat template rendering failed: ${this.reason}`
  }
}

/**
 * The request's images cannot get their processor-expanded training tokens: an image that cannot be read, a size the
 * processor refuses, or placeholders without a vision processor (nothing was committed).
 */
export class ImageRejected extends Data.TaggedError("ImageRejected")<{ readonly reason: string }> {
  override get message(): string {
    return `images cannot be prepared for training: ${this.reason}`
  }
}

/** The engine failed, or aborted the request too often without producing a token. */
export class EngineFailure extends Data.TaggedError("EngineFailure")<{ readonly message: string }> {}

/**
 * The engine's output cannot be committed as an assistant message: no output tokens, parsers that left nothing, or
 * a message canonicalization rejects.
 */
export class UnusableResponse extends Data.TaggedError("UnusableResponse")<{ readonly message: string }> {}

/** Every way `Generation.generate` can fail. */
export type GenerationError =
  | ContextLengthError
  | TemplateRejected
  | ImageRejected
  | SessionDiscarded
  | EngineFailure
  | UnusableResponse
  | ForestNotFound
  | ForestInvariantError

export { ContextLengthError, ForestInvariantError, ForestNotFound }
