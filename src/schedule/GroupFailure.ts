/**
 * How a Group fails (docs/runtime.md "Steps"): the two failures the Group pool raises itself, and the `error_type=`
 * and detail text its drop log lines and the drop streak name a failure by.
 *
 * **Details**
 * A Session that ends before its first model request never joined the first-request barrier
 * (`ExitedBeforeFirstRequestError`, logged `error_type=silent-success`); a Session runner or Reward that dies with a
 * defect becomes a `RunnerDiedError` (logged `error_type=RunnerDied` with the defect's stack). Every other failure is
 * the caller's typed error, named by the pool's `describeError` option or, by default, by {@link describeTagged}.
 * The pool itself is layers/schedule/GroupPool.ts.
 */
import { Data } from "effect"
import * as Thrown from "../Thrown.ts"
import type * as DropStreak from "./DropStreak.ts"

/** A Session ended before its first model request (it never joined the barrier); logged as `silent-success`. */
export class ExitedBeforeFirstRequestError extends Data.TaggedError("ExitedBeforeFirstRequestError")<{
  readonly sessionId: string
}> {
  override get message(): string {
    return `session ${this.sessionId} exited without error before its first model request ` +
      `(check that the agent reads RELAX_INPUT_JSON and calls RELAX_BASE_URL)`
  }
}

/**
 * A Session runner or Reward that died (a defect: a bug, a rejected promise) instead of failing with a typed error.
 * It drops the Group like a failure, so the slot is freed and the step refills, and its text is logged
 * (`error_type=RunnerDied`).
 */
export class RunnerDiedError extends Data.TaggedError("RunnerDiedError")<{ readonly cause: unknown }> {
  override get message(): string {
    return `a Session runner or Reward died: ${Thrown.messageOf(this.cause)}`
  }
  /** The defect's stack (or message, or text). */
  get detail(): string {
    return this.cause instanceof Error ? (this.cause.stack ?? this.cause.message) : String(this.cause)
  }
}

/** A failure as its drop log line names it: `error_type=<type>`, then the detail text. */
export interface FailureText {
  readonly type: string
  readonly detail: string
}

/** The default naming of a typed failure: its `_tag` (else `Error`) and its message. */
export const describeTagged = (error: unknown): FailureText => {
  const type = typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag
    : "Error"
  const detail = Thrown.messageOf(error)
  return { type, detail }
}

/** Names a failure of a Session runner or Reward: a `RunnerDiedError` as `RunnerDied`, the rest by `describeTyped`. */
export const describeWith = <E>(describeTyped: (error: E) => FailureText) => (error: E | RunnerDiedError) =>
  error instanceof RunnerDiedError ? { type: "RunnerDied", detail: error.detail } : describeTyped(error)

/** The drop reason of a Group whose Session failed (or ended before its first request). */
export const sessionDropReason = <E>(
  groupId: string,
  error: E | ExitedBeforeFirstRequestError | RunnerDiedError,
  describe: (error: E | RunnerDiedError) => FailureText
): DropStreak.DropReason =>
  error instanceof ExitedBeforeFirstRequestError
    ? { groupId, type: "silent-success", detail: error.message }
    : { groupId, ...describe(error) }
