/**
 * Groups dropped in a row (`--agentic-max-consecutive-drops`, docs/runtime.md "Groups dropped in a row"): the counter
 * every Group pool of a rollout shares, and the error that stops the rollout when it reaches its limit.
 */
import { Data } from "effect"

/** Why a Group was dropped: the `error_type=` and detail text of its drop log line. */
export interface DropReason {
  readonly groupId: string
  readonly type: string
  readonly detail: string
}

/** Lines of the last drop's detail (the agent's error head and the start of its log tail) quoted in the error. */
const QUOTED_LINES = 10
const QUOTED_LINE_CHARS = 240

/**
 * The limit of Groups dropped in a row was reached: the agent most likely fails on every Group (a bad command, a
 * broken environment), and refilling would never end the step.
 */
export class TooManyDroppedGroupsError extends Data.TaggedError("TooManyDroppedGroupsError")<{
  /** Groups dropped in a row (the limit). */
  readonly dropped: number
  readonly last: DropReason
}> {
  override get message(): string {
    const lines = this.last.detail.trimEnd().split("\n")
    const quoted = lines.slice(0, QUOTED_LINES).map((line) =>
      `  | ${line.length > QUOTED_LINE_CHARS ? `${line.slice(0, QUOTED_LINE_CHARS)}...` : line}`
    )
    if (lines.length > QUOTED_LINES) quoted.push(`  | ... (${lines.length - QUOTED_LINES} more lines)`)
    return [
      `${this.dropped} Groups were dropped in a row (--agentic-max-consecutive-drops ${this.dropped}); ` +
      `the agent seems to fail on every Group, so the rollout stopped.`,
      `Last drop: group_id=${this.last.groupId} error_type=${this.last.type}`,
      ...quoted,
      "Run `relax-agentic check` with the same flags to see the agent's failure, or raise the limit with " +
      "--agentic-max-consecutive-drops N (0 disables it)."
    ].join("\n")
  }
}

/**
 * Groups dropped in a row, shared by every pool of one rollout (training steps and Eval). Once tripped it stays
 * tripped: the rollout stopped.
 */
export interface DropStreak {
  /** The limit; 0 = unlimited. */
  readonly limit: number
  /** Drops in a row so far. */
  readonly count: () => number
  /** The error, once the limit was reached. */
  readonly tripped: () => TooManyDroppedGroupsError | undefined
  /** Count a drop; returns true once the streak is tripped (also when it already was). */
  readonly dropped: (reason: DropReason) => boolean
  /** An accepted or filtered Group ends the streak. */
  readonly kept: () => void
}

/** A new streak with `limit` (0 = unlimited). */
export const dropStreak = (limit: number): DropStreak => {
  let count = 0
  let error: TooManyDroppedGroupsError | undefined
  return {
    limit,
    count: () => count,
    tripped: () => error,
    dropped: (reason) => {
      if (error !== undefined) return true
      count += 1
      if (limit > 0 && count >= limit) error = new TooManyDroppedGroupsError({ dropped: count, last: reason })
      return error !== undefined
    },
    kept: () => {
      if (error === undefined) count = 0
    }
  }
}
