/**
 * The errors credit assignment can raise, with the text a user sees.
 *
 * **Details**
 * Every message says where (Session, context, option) and what to do. A context is named by its export name, or
 * `null (implicit export)` for an implicit export, matching the key the custom advantage hook sees.
 */
import { Data } from "effect"
import type * as Batching from "./Batching.ts"

/** How a context is named in messages: `"main"`, or `null (implicit export)`. */
export const contextLabel = (exportName: string | null): string =>
  exportName === null ? "null (implicit export)" : JSON.stringify(exportName)

/** A reward that cannot be read or scored: a bad exported reward, a missing reward, or a custom RM that failed. */
export class RewardError extends Data.TaggedError("RewardError")<{
  readonly sessionId: string
  readonly exportName: string | null
  readonly detail: string
}> {
  override get message(): string {
    return `reward of Session ${this.sessionId}, context ${contextLabel(this.exportName)}: ${this.detail}`
  }
}

/** A custom RM that failed for a whole Group (`--group-rm`): it threw or returned the wrong shape. */
export class GroupRewardError extends Data.TaggedError("GroupRewardError")<{
  readonly groupIndex: number
  readonly detail: string
}> {
  override get message(): string {
    return `--custom-rm-path (--group-rm) for Group ${this.groupIndex}: ${this.detail}`
  }
}

/**
 * A custom advantage hook result that breaks the contract. `sessionIndex` is the position in the Group (the hook's
 * outer list); absent when the whole result is malformed.
 */
export class AdvantageError extends Data.TaggedError("AdvantageError")<{
  readonly groupIndex: number
  readonly sessionIndex?: number | undefined
  readonly sessionId?: string | undefined
  readonly exportName?: string | null | undefined
  readonly detail: string
}> {
  override get message(): string {
    const where = [`Group ${this.groupIndex}`]
    if (this.sessionIndex !== undefined) {
      where.push(
        `session index ${this.sessionIndex}${this.sessionId === undefined ? "" : ` (Session ${this.sessionId})`}`
      )
    }
    if (this.exportName !== undefined) where.push(`context ${contextLabel(this.exportName)}`)
    return `--agentic-custom-advantage-path result for ${where.join(", ")}: ${this.detail}`
  }
}

/** A combination of options and exports that the guide forbids, or an option value out of range. */
/** The `--dynamic-sampling-filter-path` hook threw or returned something that is not a verdict. */
export class FilterError extends Data.TaggedError("FilterError")<{
  readonly groupIndex: number
  readonly detail: string
}> {
  override get message(): string {
    return `--dynamic-sampling-filter-path for Group ${this.groupIndex}: ${this.detail}`
  }
}

export class CreditConfigError extends Data.TaggedError("CreditConfigError")<{
  readonly detail: string
}> {
  override get message(): string {
    return this.detail
  }
}

/** Rewards or advantages that cannot be normalized (a Group of the wrong size, a step without trainable tokens). */
export class NormalizationError extends Data.TaggedError("NormalizationError")<{
  readonly detail: string
}> {
  override get message(): string {
    return this.detail
  }
}

/** Everything `scoreGroup` / `finishStep` can fail with. */
export type CreditError =
  | FilterError
  | RewardError
  | GroupRewardError
  | AdvantageError
  | CreditConfigError
  | NormalizationError
  | Batching.BatchingError
