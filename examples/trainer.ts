/**
 * A training-loop skeleton on the Effect API: each step's credited samples from the `TrainerService`, a weight update
 * after each step, then Eval, and one more step consumed Group by Group from `stream`.
 *
 * Run from the repository root: `node --conditions=relax-agentic-source examples/trainer.ts` (the arithmetic example on
 * the embedded engine; the condition resolves `relax-agentic` to the sources instead of a build, docs/package.md).
 * Everything the rollout started (gateway, agent processes) stops when the program ends or is interrupted.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import {
  type MakeRolloutExtras,
  makeTrainer,
  type Results,
  type RolloutOptionsInput,
  TrainerService
} from "relax-agentic"
import * as TrainerShared from "./trainer-shared.ts"

/** `steps` training steps (train, then `updateWeights`), Eval, then `streamSteps` more steps Group by Group. */
export const trainingLoop = (options: { readonly steps: number; readonly streamSteps: number }) =>
  Effect.gen(function*() {
    const trainer = yield* TrainerService
    const steps: Array<Results.StepResult> = []
    for (let rolloutId = 0; rolloutId < options.steps; rolloutId++) {
      const step = yield* trainer.step(rolloutId)
      yield* Console.log(TrainerShared.describeStep(step))
      // Train here: per sample, the continuation tokens.slice(-response_length) with loss_mask, rollout_log_probs and
      // advantage; step.microBatches groups sample positions by --max-tokens-per-gpu with --use-dynamic-batch-size.
      const version = yield* trainer.updateWeights()
      yield* Console.log(`weight version -> ${version}`)
      steps.push(step)
    }
    const evaluation = yield* trainer.evaluate(options.steps)
    for (const dataset of evaluation.datasets) {
      const scored = dataset.rewards.filter((r): r is number => r !== null)
      yield* Console.log(
        `eval ${dataset.name}: ${scored.filter((r) => r === 1).length}/${dataset.rewards.length} correct`
      )
    }
    const groups = yield* trainer.stream({ steps: options.streamSteps }).pipe(
      Stream.tap((group) =>
        Console.log(`step ${group.rolloutId} Group ${group.groupIndex}: ${group.samples.length} samples`)
      ),
      Stream.runCollect
    )
    return { steps, evaluation, groups }
  })

/** The example: two steps, Eval, one streamed step. */
export const main = (options: RolloutOptionsInput = TrainerShared.arithmetic, extras: MakeRolloutExtras = {}) =>
  trainingLoop({ steps: 2, streamSteps: 1 }).pipe(Effect.provide(makeTrainer(options, extras)))

if (TrainerShared.isMain(import.meta.url)) NodeRuntime.runMain(main())
