/**
 * The one context-length error of the system, raised by the SessionForest's checks and by engines that reject a
 * prompt; here, under engine, so that the Engine port names it without importing the forest.
 */
import { Data } from "effect"
import * as ProtocolError from "../protocol/ProtocolError.ts"

/**
 * A request whose observation (or whose remaining budget) does not fit the context window; nothing was committed.
 * Gateways answer 400 with code `context_length_exceeded`, type `invalid_request_error`, param `messages`.
 *
 * **Details**
 * The one context-length error of the system: the SessionForest's checks raise it, and so do engines that reject a
 * prompt (with their own wording in `engineMessage`, e.g. SGLang's "Requested token count exceeds …").
 */
export class ContextLengthError extends Data.TaggedError("ContextLengthError")<{
  readonly limit: number | null
  readonly promptTokens?: number | undefined
  readonly completionTokens?: number | undefined
  /** The engine's own text, when an engine rejected the request. */
  readonly engineMessage?: string | undefined
}> {
  override get message(): string {
    return this.engineMessage ??
      ProtocolError.contextLengthMessage(this.limit, this.promptTokens, this.completionTokens)
  }
  readonly code = "context_length_exceeded"
  readonly param = "messages"
}
