/**
 * The controller's failures of a cluster call (docs/scale-out.md "Failure").
 *
 * **Details**
 * Cluster calls never time out by themselves (a dead owner, no runner at all and a `shardsPerGroup` mismatch all just
 * block), so every controller call has a deadline; a call that passes it, or that the cluster refuses, fails the
 * Session with this error and its Group is dropped and refilled.
 */
import { Data } from "effect"

/** A cluster call that failed or passed its deadline. */
export class ClusterCallError extends Data.TaggedError("ClusterCallError")<{
  readonly reason: "deadline" | "refused"
  /** The message (`Place`, `RunSession`, `Grant`) and what happened. */
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.reason === "deadline"
      ? `cluster call passed its deadline: ${this.detail} (no runner answered; are runners up and is ` +
        "--cluster-call-timeout long enough?)"
      : `cluster call refused: ${this.detail}`
  }
}
