/**
 * The output of a request's engine attempts, carried from attempt to attempt until the turn finishes.
 *
 * **Details**
 * An engine abort (SGLang `finish_reason: abort`, e.g. a paused or preempted request) returns a partial output: it is
 * kept {@link Pending}, not committed, and the request resumes from prefix ++ pending ids with the rest of the budget
 * (docs/runtime.md, "Model requests"). The committed response holds every attempt's ids, logprobs and weight versions.
 */
import type * as Stop from "../engine/Stop.ts"
import type * as Forest from "../forest/Forest.ts"

/** What one engine attempt returned (the fields of the engine port's result the attempts read). */
export interface AttemptOutput {
  readonly outputIds: ReadonlyArray<number>
  readonly logprobs: ReadonlyArray<number>
  readonly weightVersion: string
  /** Every version the attempt ran on when more than one (SGLang kept it across a retract / in_place pause). */
  readonly weightVersions?: ReadonlyArray<string> | undefined
  /** With routing replay: one row of MoE expert ids per sequence position the attempt went through. */
  readonly routedExperts?: ReadonlyArray<ReadonlyArray<number>> | undefined
  /** Versioned LoRA: the adapter version the attempt generated with. */
  readonly loraVersion?: string | undefined
  readonly finishReason: Stop.FinishReason
  /** The attempt's SGLang worker died under it (no token): the request resumes on a live worker. */
  readonly movedFrom?: { readonly worker: string; readonly cause: string } | undefined
}

/** Consecutive engine aborts without a single new token after which the request fails instead of resuming again. */
export const MAX_EMPTY_ABORTS = 3

/** The output of a request's engine attempts so far: one value, carried from attempt to attempt. */
export interface Pending {
  readonly outputIds: ReadonlyArray<number>
  /** One per output id. */
  readonly logprobs: ReadonlyArray<number>
  /** One per attempt. */
  readonly weightVersions: ReadonlyArray<string>
  /** The token count of each attempt, in order (where a resumed request's aborts fall). */
  readonly attemptLengths: ReadonlyArray<number>
  /** The response's abort count: the parent state's plus this request's engine aborts. */
  readonly abortCount: number
  /** Aborts in a row that produced no token. */
  readonly emptyAborts: number
  /** Time spent in the engine, summed over attempts. */
  readonly generationMs: number
  /**
   * With routing replay: the rows of the latest attempt that returned any, one per sequence position it went through
   * (a resumed attempt's prompt holds the earlier attempts' ids, so its rows cover them too); absent without.
   */
  readonly routedExperts?: ReadonlyArray<ReadonlyArray<number>> | undefined
  /** Versioned LoRA: the adapter version of each attempt (one per attempt); absent without. */
  readonly loraVersions?: ReadonlyArray<string> | undefined
  /** The attempts whose worker died under them, when any did. */
  readonly movedAttempts?: ReadonlyArray<Forest.MovedAttempt> | undefined
}

/** Nothing generated yet at a parent state whose lineage counted `abortCount` aborts. */
export const noPending = (abortCount: number): Pending => ({
  outputIds: [],
  logprobs: [],
  weightVersions: [],
  attemptLengths: [],
  abortCount,
  emptyAborts: 0,
  generationMs: 0
})

/** The next attempt's token budget: the turn's budget less what is pending. */
export const remainingTokens = (maxNewTokens: number, pending: Pending): number =>
  maxNewTokens - pending.outputIds.length

/** After an attempt: finished (with the finish reason to report), resume from the pending output, or give up. */
export type AttemptOutcome =
  | { readonly _tag: "Finished"; readonly pending: Pending; readonly finishReason: Stop.FinishReason }
  | { readonly _tag: "Resume"; readonly pending: Pending }
  | { readonly _tag: "GiveUp"; readonly pending: Pending }

/**
 * Add an attempt's output to the pending output and decide what comes next.
 *
 * **Details**
 * A non-abort finish ends the request. An abort counts; once the pending ids fill the budget the request ends as
 * `length`; after {@link MAX_EMPTY_ABORTS} aborts in a row without a token it gives up; otherwise it resumes.
 */
export const afterAttempt = (
  pending: Pending,
  output: AttemptOutput,
  elapsedMs: number,
  maxNewTokens: number
): AttemptOutcome => {
  const aborted = output.finishReason.type === "abort"
  const next: Pending = {
    outputIds: [...pending.outputIds, ...output.outputIds],
    logprobs: [...pending.logprobs, ...output.logprobs],
    weightVersions: [...pending.weightVersions, ...(output.weightVersions ?? [output.weightVersion])],
    attemptLengths: [...pending.attemptLengths, output.outputIds.length],
    abortCount: aborted ? pending.abortCount + 1 : pending.abortCount,
    emptyAborts: aborted ? (output.outputIds.length === 0 ? pending.emptyAborts + 1 : 0) : pending.emptyAborts,
    generationMs: pending.generationMs + elapsedMs,
    ...(output.movedFrom === undefined
      ? pending.movedAttempts === undefined ? {} : { movedAttempts: pending.movedAttempts }
      : {
        movedAttempts: [...(pending.movedAttempts ?? []), {
          attempt: pending.attemptLengths.length,
          ...output.movedFrom
        }]
      }),
    ...(output.loraVersion === undefined
      ? {}
      : { loraVersions: [...(pending.loraVersions ?? []), output.loraVersion] }),
    ...(output.routedExperts !== undefined && output.routedExperts.length > 0
      ? { routedExperts: output.routedExperts }
      : pending.routedExperts === undefined
      ? {}
      : { routedExperts: pending.routedExperts })
  }
  if (!aborted) return { _tag: "Finished", pending: next, finishReason: output.finishReason }
  if (next.outputIds.length >= maxNewTokens) {
    return { _tag: "Finished", pending: next, finishReason: { type: "length", length: next.outputIds.length } }
  }
  return next.emptyAborts >= MAX_EMPTY_ABORTS ? { _tag: "GiveUp", pending: next } : { _tag: "Resume", pending: next }
}

/**
 * The outcome of an attempt that a step boundary aborted (partial rollout): the request is parked, not failing, so
 * the abort does not count toward giving up.
 */
export const parked = (outcome: AttemptOutcome): AttemptOutcome =>
  outcome._tag === "Finished" ? outcome : { _tag: "Resume", pending: { ...outcome.pending, emptyAborts: 0 } }
