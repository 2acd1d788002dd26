/**
 * Transfer partitions (docs/runtime.md, "Partial rollout and fully async"): where an accepted Group goes, and how much a step still owes.
 *
 * **Details**
 * At most two partitions are open: *previous* (the unfinished partition of an earlier step, fully async only) and
 * *current*. An accepted Group fills *previous* first. Opening a partition moves an unfinished *current* to
 * *previous*; a third one cannot open while *previous* is still owed Groups. A step's debt is what both still need.
 * The final backfill of fully async mode opens nothing: it drains what is left.
 */
import { Data, Result } from "effect"

/** One training partition: the Groups of rollout step `rolloutId`. */
export interface Partition {
  readonly rolloutId: number
  /** Groups it needs (`--rollout-batch-size`). */
  readonly target: number
  readonly accepted: number
}

export interface Partitions {
  readonly previous: Partition | undefined
  readonly current: Partition | undefined
}

/** A partition rule was broken: a bug in the step loop, reported with the reference's wording. */
export class PartitionError extends Data.TaggedError("PartitionError")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

export const empty: Partitions = { previous: undefined, current: undefined }

/** Groups a partition still needs. */
export const remaining = (partition: Partition | undefined): number =>
  partition === undefined ? 0 : Math.max(0, partition.target - partition.accepted)

/** Groups the open partitions still need: the step's debt. */
export const debt = (partitions: Partitions): number => remaining(partitions.previous) + remaining(partitions.current)

/** Open the partition of step `rolloutId`; an unfinished current partition becomes the previous one. */
export const open = (
  partitions: Partitions,
  rolloutId: number,
  target: number
): Result.Result<Partitions, PartitionError> => {
  const { current } = partitions
  if (current !== undefined && current.rolloutId === rolloutId) {
    return Result.fail(new PartitionError({ detail: `physical partition already active: ${rolloutId}` }))
  }
  const carried = remaining(current) > 0 ? current : undefined
  if (carried !== undefined && remaining(partitions.previous) > 0) {
    return Result.fail(
      new PartitionError({ detail: "previous partition must be produced before opening the next partition" })
    )
  }
  return Result.succeed({
    previous: carried ?? (remaining(partitions.previous) > 0 ? partitions.previous : undefined),
    current: { rolloutId, target, accepted: 0 }
  })
}

/** Accept one Group: it goes to the previous partition while that one needs Groups, else to the current one. */
export const accept = (
  partitions: Partitions
): Result.Result<{ readonly partitions: Partitions; readonly rolloutId: number }, PartitionError> => {
  const { previous, current } = partitions
  if (previous !== undefined && remaining(previous) > 0) {
    return Result.succeed({
      partitions: { ...partitions, previous: { ...previous, accepted: previous.accepted + 1 } },
      rolloutId: previous.rolloutId
    })
  }
  if (current !== undefined && remaining(current) > 0) {
    return Result.succeed({
      partitions: { ...partitions, current: { ...current, accepted: current.accepted + 1 } },
      rolloutId: current.rolloutId
    })
  }
  return Result.fail(new PartitionError({ detail: "no physical partition needs a group" }))
}

/** Partitions that got every Group (in step order); they are complete and leave the open set. */
export const produced = (partitions: Partitions): {
  readonly partitions: Partitions
  readonly produced: ReadonlyArray<Partition>
} => {
  const done = [partitions.previous, partitions.current].filter(
    (p): p is Partition => p !== undefined && remaining(p) === 0
  )
  return {
    partitions: {
      previous: remaining(partitions.previous) > 0 ? partitions.previous : undefined,
      current: remaining(partitions.current) > 0 ? partitions.current : undefined
    },
    produced: done
  }
}
