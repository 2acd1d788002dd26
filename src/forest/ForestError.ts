/**
 * Tagged errors of the SessionForest: export selection, registration invariants, lookup (a context that does not fit
 * is src/engine/ContextLengthError.ts, which engines raise too).
 * Messages are the reference's texts (docs/requests.md "Error bodies", docs/sessionforest.md), which tests and
 * dashboards match on.
 */
import { Data } from "effect"

/** Why an export could not be turned into a training context; the Session (and its Group) is dropped, not fatal. */
export type ExportFailure = "no-matching-state" | "no-response" | "leaf-count" | "invalid-record"

/**
 * An agent's export (implicit or explicit) that selects no trainable context.
 *
 * **Details**
 * Texts: `"explicit export does not match a committed Forest state"`, `"export leaf has no committed response"`,
 * `"implicit export requires one committed leaf, found N"`; an explicit record that fails canonicalization reports
 * `"export record <i> (<name>): <canonicalization error>"`.
 */
export class ExportError extends Data.TaggedError("ExportError")<{
  readonly reason: ExportFailure
  readonly message: string
  readonly sessionId: string
  /** The explicit record's name, when one record is at fault. */
  readonly record: string | null
}> {}

/**
 * A broken SessionForest invariant (hash collision across kinds, tools or template changed inside a subtree,
 * an unknown parent). The reference treats these as infrastructure failures; callers turn them into defects.
 */
export class ForestInvariantError extends Data.TaggedError("ForestInvariantError")<{
  /** Which invariant broke, in words. */
  readonly detail: string
  readonly sessionId: string
}> {
  override get message(): string {
    return this.detail
  }
}

/** No SessionForest for this session: never created, already finished, or discarded. */
export class ForestNotFoundError extends Data.TaggedError("ForestNotFoundError")<{ readonly sessionId: string }> {
  override get message(): string {
    return `Unknown or discarded agentic session '${this.sessionId}'.`
  }
}
