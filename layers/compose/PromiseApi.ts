/**
 * The API for programs that do not use Effect: the `TrainerService` as Promises (`createRollout`), replay and rescore
 * as Promises.
 */
import { Effect, ManagedRuntime, Stream } from "effect"
import type * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import type * as Results from "../../src/trainer/Results.ts"
import type * as Engine from "../engine/Engine.ts"
import type * as LoraVersions from "../lora/LoraVersions.ts"
import * as Replay from "../replay/Replay.ts"
import * as Rescore from "../replay/Rescore.ts"
import * as TrainerService from "../trainer/TrainerService.ts"
import type * as RolloutExtras from "./RolloutExtras.ts"
import * as TrainerLayers from "./TrainerLayers.ts"

/**
 * Replay the recorded Sessions of a run's output directory or debug dump through today's code (docs/debugging.md
 * "Replay"), as a Promise: one outcome per Session, `identical` true when none diverged.
 */
export const runReplay = (path: string, options: Replay.ReplayOptions = {}): Promise<Replay.ReplayReport> =>
  Effect.runPromise(Replay.replay(path, options))

/**
 * Re-score a run's saved training samples (docs/debugging.md "Rescore"), as a Promise: a trainer can re-score a saved
 * step with another reward function or custom advantage.
 */
export const runRescore = (runDir: string, options: Rescore.RescoreOptions = {}): Promise<Rescore.RescoreReport> =>
  Effect.runPromise(Rescore.rescore(runDir, options))

/** The `TrainerService` with Promises, for TypeScript trainers that do not use Effect (see `createRollout`). */
export interface RolloutHandle {
  /** One training step: credited samples, metrics, micro-batches (with `--use-dynamic-batch-size`). */
  readonly step: (rolloutId: number) => Promise<Results.StepResult>
  /** Every Eval dataset after `rolloutId` training steps. */
  readonly evaluate: (rolloutId: number) => Promise<Results.EvalResult>
  /** New generations report `version` (default: the next integer); resolves to the version now in effect. */
  readonly updateWeights: (version?: string) => Promise<string>
  /** Stop generation for a weight push the trainer does itself (`abort` by default); see docs/trainer.md. */
  readonly pauseGeneration: (mode?: Engine.PauseMode) => Promise<void>
  /** Continue on `version` (default: SGLang's label after the push); resolves to the version now in effect. */
  readonly resumeGeneration: (version?: string) => Promise<string>
  /** The LoRA form of a weight update: publish an adapter directory (docs/lora.md); resolves to its version. */
  readonly publishAdapter: (input: LoraVersions.PublishInput) => Promise<Results.PublishedAdapter>
  /** What the rollout is doing now: activity, weight version, steps completed, engine, gateway URL. */
  readonly status: () => Promise<Results.RolloutStatus>
  /** Finished Groups, step after step, as the loop pulls them (`for await (const group of rollout.groups())`). */
  readonly groups: (options?: TrainerService.StreamOptions) => AsyncIterable<Results.FinishedGroup>
  /** Reap every agent and close the gateway; the handle is unusable afterwards. */
  readonly close: () => Promise<void>
  readonly [Symbol.asyncDispose]: () => Promise<void>
}

/**
 * Start a rollout and return its `TrainerService` as Promises. Resolves once the rollout is up (gateway listening,
 * datasets loaded); rejects with a `RolloutStartupError` otherwise. Call `close()` (or `await using`) when done.
 *
 * **Details**
 * ```ts
 * const rollout = await createRollout({
 *   promptData: "data/train.jsonl", rolloutBatchSize: 4, agentCommand: "bash run_agent_app.sh", agentCwd: "."
 * })
 * try {
 *   for (let step = 0; step < 2; step++) {
 *     const { samples } = await rollout.step(step)
 *     // train on samples, then:
 *     await rollout.updateWeights()
 *   }
 * } finally {
 *   await rollout.close()
 * }
 * ```
 * A failed call rejects with the Effect API's error (`TooManyDroppedGroupsError`, `EngineError`, ...): the same
 * object, with its `_tag` and `message`.
 */
export const createRollout = async (
  options: RolloutOptions.RolloutOptionsInput,
  extras: RolloutExtras.MakeRolloutExtras = {}
): Promise<RolloutHandle> => {
  const runtime = ManagedRuntime.make(TrainerLayers.makeTrainer(options, extras))
  const trainer = await runtime.runPromise(Effect.gen(function*() {
    return yield* TrainerService.TrainerService
  })).catch(async (error: unknown) => {
    await runtime.dispose()
    throw error
  })
  const close = () => runtime.dispose()
  return {
    step: (rolloutId) => runtime.runPromise(trainer.step(rolloutId)),
    evaluate: (rolloutId) => runtime.runPromise(trainer.evaluate(rolloutId)),
    updateWeights: (version) => runtime.runPromise(trainer.updateWeights(version)),
    pauseGeneration: (mode) => runtime.runPromise(trainer.pauseGeneration(mode)),
    resumeGeneration: (version) => runtime.runPromise(trainer.resumeGeneration(version)),
    publishAdapter: (input) => runtime.runPromise(trainer.publishAdapter(input)),
    status: () => runtime.runPromise(trainer.status),
    groups: (streamOptions) => Stream.toAsyncIterable(trainer.stream(streamOptions)),
    close,
    [Symbol.asyncDispose]: close
  }
}
