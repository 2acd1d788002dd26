/**
 * Partial rollout and fully async (docs/runtime.md "Partial rollout and fully async"): the cross-step retention
 * arithmetic of the step loop, as pure functions.
 *
 * **Details**
 * The behaviour spans these files: this one (the modes, the step count, protection), src/schedule/Partitions.ts
 * (which step an accepted Group pays), `Leasing.closes` / `Leasing.closeRuntime` (when a step closes, which leased
 * Groups stay), layers/schedule/GenerationGate.ts (parking generations between steps) and the Group pool
 * (layers/schedule/GroupPool.ts: retained Groups keep their slot and finish into a later step).
 * - A step closes when its debt is paid, or, in fully async mode (outside the final backfill), when every Group still
 *   owed is an interrupted resident Group: training can start while those Groups finish in a later step
 *   (`Leasing.closes`).
 * - With `--partial-rollout` or `--fully-async`, Groups still running at the close are kept across the boundary
 *   (their generations parked, their agents' HTTP requests held open) instead of being interrupted; the final backfill
 *   keeps nothing.
 * - A request aborted `--partial-rollout-max-aborted-count` times becomes protected at the next resume: it bypasses
 *   the generation gate and its Session's active-time budget keeps running through pauses.
 */

/** The cross-step modes of a rollout. */
export interface Mode {
  /** `--partial-rollout` */
  readonly partialRollout: boolean
  /** `--fully-async` */
  readonly fullyAsync: boolean
  /** `--partial-rollout-max-aborted-count` (only with partial rollout). */
  readonly maxAbortedCount?: number | undefined
}

export const synchronous: Mode = { partialRollout: false, fullyAsync: false }

/** The extra step `rollout_id == num_rollout` of fully async mode: it opens no partition and drains the last debt. */
export const isFinalBackfill = (mode: Mode, rolloutId: number, numRollout: number): boolean =>
  mode.fullyAsync && rolloutId >= numRollout

/** Step calls of a whole rollout: `num_rollout`, plus the final backfill in fully async mode. */
export const stepCount = (mode: Mode, numRollout: number): number => mode.fullyAsync ? numRollout + 1 : numRollout

/** Whether Groups still running at a step's close are kept for the next step. */
export const retainsAcrossSteps = (mode: Mode, finalBackfill: boolean): boolean =>
  !finalBackfill && (mode.partialRollout || mode.fullyAsync)

/**
 * Whether a step closes once its debt is at most the interrupted resident Groups (§6.5 step 6): fully async outside
 * the final backfill. The close itself is `Leasing.closes`.
 */
export const closesWithInterrupted = (mode: Mode, finalBackfill: boolean): boolean => mode.fullyAsync && !finalBackfill

/** Whether a request aborted `abortCount` times is protected from further aborts (takes effect at the next resume). */
export const isProtected = (mode: Mode, abortCount: number): boolean =>
  mode.partialRollout && mode.maxAbortedCount !== undefined && abortCount >= mode.maxAbortedCount

/** One live model request of a Session, as the interruption rule sees it. */
export interface LiveRequest {
  /** A backend attempt is running for it. */
  readonly running: boolean
  /** It was aborted at least once (it holds or held a partial output). */
  readonly aborted: boolean
}

/**
 * A Session that can be retained across a step boundary (§6.4): active, not protected, and either waiting on its
 * agent (no live request: a tool or think step) or with every live request parked (queued, not running) and at least
 * one of them aborted.
 */
export const isSessionInterrupted = (session: {
  readonly active: boolean
  readonly protected: boolean
  readonly requests: ReadonlyArray<LiveRequest>
}): boolean =>
  session.active && !session.protected &&
  (session.requests.length === 0 ||
    (session.requests.every((r) => !r.running) && session.requests.some((r) => r.aborted)))

/** A Runtime Group none of whose unfinished Sessions is making progress, and none failed or dropped. */
export const isGroupInterrupted = (group: {
  readonly runtime: boolean
  readonly failed: boolean
  readonly unfinishedSessions: number
  readonly interruptedSessions: number
}): boolean =>
  group.runtime && !group.failed && group.unfinishedSessions > 0 &&
  group.unfinishedSessions === group.interruptedSessions
