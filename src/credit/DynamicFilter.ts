/**
 * The dynamic sampling filter (`--dynamic-sampling-filter-path`): what the Group filter returns, and the metric a
 * dropped Group counts under.
 *
 * **Details**
 * As Relax's `call_dynamic_filter`: the hook is called once per finished training Group with the Group's rows (every
 * export of every Session, in Group order) and returns `true` / `false`, or `{ keep, reason }`. A Group it does not
 * keep is filtered (dropped from the step, its demand refilled); a drop with a reason counts under
 * `rollout/dynamic_filter/drop_<reason>` in the step's metrics. Eval Groups are never filtered.
 */
import { Result, Schema } from "effect"
import * as Reward from "./Reward.ts"

/** What the hook may return. */
export const Verdict = Schema.Union([
  Schema.Boolean,
  Schema.Struct({
    keep: Schema.Boolean,
    reason: Schema.optional(Schema.NullOr(Schema.String))
  })
])
export type Verdict = typeof Verdict.Type

/** The hook's decision for one Group. */
export interface Decision {
  readonly keep: boolean
  /** Why the Group was dropped, when the hook said so. */
  readonly reason: string | undefined
}

const decodeVerdict = Schema.decodeUnknownResult(Verdict)

/** Read the hook's return value; the failure says what was returned instead. */
export const decide = (value: unknown): Result.Result<Decision, string> => {
  const verdict = decodeVerdict(value)
  if (Result.isFailure(verdict)) {
    return Result.fail(
      `the filter must return true, false or { keep: boolean, reason?: string }, got ${Reward.describe(value)}`
    )
  }
  const v = verdict.success
  return Result.succeed(
    typeof v === "boolean" ? { keep: v, reason: undefined } : { keep: v.keep, reason: v.reason ?? undefined }
  )
}

/** The step metric a dropped Group with `reason` counts under. */
export const dropMetric = (reason: string): string => `rollout/dynamic_filter/drop_${reason}`
