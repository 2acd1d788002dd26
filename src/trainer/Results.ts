/**
 * What a trainer gets back from the rollout, as Schemas: a step's result, an Eval result, a finished Group, the
 * rollout's status and the one error a remote trainer sees. The TypeScript API, the Promise facade and the RPC wire
 * (docs/trainer.md) all use these shapes, so a sample is the same object whichever way a trainer asks for it.
 */
import { Schema } from "effect"
import * as RolloutOptions from "../config/RolloutOptions.ts"
import * as WorkerEvents from "../engine/WorkerEvents.ts"
import * as TrainingSample from "../forest/TrainingSample.ts"

/** Accepted, dropped and filtered Group counts of one step. */
export const GroupCounts = Schema.Struct({
  accepted: Schema.Int,
  dropped: Schema.Int,
  filtered: Schema.Int
})
export type GroupCounts = typeof GroupCounts.Type

/** Metric name → value (`rollout/...`, `eval/<dataset>/...`). */
export const Metrics = Schema.Record(Schema.String, Schema.Number)
export type Metrics = typeof Metrics.Type

/** The result of one training step, as a trainer receives it. */
export const StepResult = Schema.Struct({
  rolloutId: Schema.Int,
  /** The engine's weight version when the step started (each attempt's own version is in `weight_versions`). */
  weightVersion: Schema.String,
  /** Credited samples, Group by Group (`group_index` order), Sessions in Group order. */
  samples: Schema.Array(TrainingSample.TrainingSample),
  metrics: Metrics,
  /** Positions in `samples` per micro-batch under `--use-dynamic-batch-size`; otherwise null. */
  microBatches: Schema.NullOr(Schema.Array(Schema.Array(Schema.Int))),
  groups: GroupCounts
})
export type StepResult = typeof StepResult.Type

/** One Eval dataset's result. */
export const EvalDatasetResult = Schema.Struct({
  name: Schema.String,
  /** Primary reward per sample (by `--eval-reward-key` / `--reward-key`), `index` order; null when missing. */
  rewards: Schema.Array(Schema.NullOr(Schema.Number)),
  truncated: Schema.Array(Schema.Boolean),
  samples: Schema.Array(TrainingSample.TrainingSample),
  metrics: Metrics,
  dropped: Schema.Int
})
export type EvalDatasetResult = typeof EvalDatasetResult.Type

/** Every Eval dataset's result after `rolloutId` training steps. */
export const EvalResult = Schema.Struct({
  rolloutId: Schema.Int,
  datasets: Schema.Array(EvalDatasetResult)
})
export type EvalResult = typeof EvalResult.Type

/** A Group whose samples are credited and ready to train on. */
export const FinishedGroup = Schema.Struct({
  rolloutId: Schema.Int,
  /** The Group's index in its step (the samples' `group_index`). */
  groupIndex: Schema.Int,
  /** The Group's samples, Sessions in Group order. */
  samples: Schema.Array(TrainingSample.TrainingSample)
})
export type FinishedGroup = typeof FinishedGroup.Type

/** A published LoRA adapter (docs/lora.md): the version Sessions generate with, and whether it was new. */
export const PublishedAdapter = Schema.Struct({
  /** The version, by the adapter name the engines know it by (`<prefix>@<epoch>-<id>-<digest16>`). */
  version: Schema.String,
  /** Its number in this run (1, 2, ...). */
  id: Schema.Int,
  /** The adapter's digest (SHA-256 of its files unless the trainer gave one). */
  digest: Schema.String,
  /** The same content was published before: nothing was loaded, `version` is the earlier one. */
  noOp: Schema.Boolean
})
export type PublishedAdapter = typeof PublishedAdapter.Type

/** What the rollout is doing right now. */
export const Activity = Schema.Literals(["idle", "step", "evaluate"])
export type Activity = typeof Activity.Type

/** The rollout's state, as `status` reports it. */
export const RolloutStatus = Schema.Struct({
  activity: Activity,
  /** The weight version new generations report (the engine's). */
  weightVersion: Schema.String,
  /** Training steps finished since the rollout started. */
  stepsCompleted: Schema.Int,
  /** The `rolloutId` of the last finished training step; null before the first. */
  lastRolloutId: Schema.NullOr(Schema.Int),
  engine: RolloutOptions.EngineKind,
  /** The model API agents are given (`RELAX_BASE_URL`). */
  gatewayUrl: Schema.String,
  /** SGLang workers that are down now (docs/sglang.md, "When a worker dies"); absent when none. */
  workersDown: Schema.optionalKey(Schema.Array(Schema.String)),
  /** SGLang workers back on other weights than the fleet's, waiting for the next update; absent when none. */
  workersNeedingWeights: Schema.optionalKey(Schema.Array(WorkerEvents.WorkerNeedsWeights))
})
export type RolloutStatus = typeof RolloutStatus.Type

/**
 * The answer of a weight update or a resume: the version now in effect, and the SGLang workers the call did not
 * reach (down, or back on other weights and not relabelled), when there were any.
 */
export const WeightsAnswer = Schema.Struct({
  weightVersion: Schema.String,
  skippedWorkers: Schema.optionalKey(Schema.Array(Schema.String))
})
export type WeightsAnswer = typeof WeightsAnswer.Type

/** The workers a call skipped, from the engine's report after it. */
export const weightsAnswer = (weightVersion: string, report: WorkerEvents.WorkerReport): WeightsAnswer => {
  const skipped = [...report.down, ...report.needsWeights.map((worker) => worker.url)]
  return skipped.length === 0 ? { weightVersion } : { weightVersion, skippedWorkers: skipped }
}

/**
 * A call the rollout could not answer: `kind` is the failure's tag (`TooManyDroppedGroupsError`, `EngineError`,
 * `CreditError`, ...), `message` says what was wrong and what to do.
 */
export class RolloutCallError extends Schema.TaggedError<RolloutCallError>()("RolloutCallError", {
  kind: Schema.String,
  message: Schema.String
}) {}

/** The one error shape a remote trainer sees, from any tagged failure. */
export const callError = (error: { readonly _tag: string; readonly message: string }): RolloutCallError =>
  new RolloutCallError({ kind: error._tag, message: error.message })
