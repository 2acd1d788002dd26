/**
 * A training-loop skeleton for TypeScript trainers that do not use Effect: `createRollout` gives the same service as
 * Promises. Two steps with a weight update after each (one call, or the two-phase pause / resume), then one more step
 * consumed Group by Group.
 *
 * Run from the repository root: `node --conditions=relax-agentic-source examples/trainer-promise.ts` (the arithmetic
 * example on the embedded engine; the condition resolves `relax-agentic` to the sources, docs/package.md).
 */
import {
  createRollout,
  type MakeRolloutExtras,
  type PauseMode,
  type Results,
  type RolloutOptionsInput
} from "relax-agentic"
import * as TrainerShared from "./trainer-shared.ts"

/**
 * `pauseMode`: update the weights in two phases (`pauseGeneration(mode)`, the trainer's own push into SGLang,
 * `resumeGeneration()`) instead of one `updateWeights()` call.
 */
export const main = async (
  options: RolloutOptionsInput = TrainerShared.arithmetic,
  extras: MakeRolloutExtras = {},
  pauseMode?: PauseMode
) => {
  const rollout = await createRollout(options, extras)
  try {
    const steps: Array<Results.StepResult> = []
    for (let rolloutId = 0; rolloutId < 2; rolloutId++) {
      const step = await rollout.step(rolloutId)
      console.log(TrainerShared.describeStep(step))
      // Train here on step.samples (tokens, loss_mask, rollout_log_probs, advantage).
      if (pauseMode === undefined) console.log(`weight version -> ${await rollout.updateWeights()}`)
      else {
        await rollout.pauseGeneration(pauseMode)
        // Push the new weights into SGLang here, with their version (update_weights_from_distributed / _from_tensor /
        // _from_disk with weight_version); then resume on it (no version: SGLang's label after the push).
        console.log(`weight version -> ${await rollout.resumeGeneration()}`)
      }
      steps.push(step)
    }
    const groups: Array<Results.FinishedGroup> = []
    for await (const group of rollout.groups({ steps: 1 })) {
      console.log(`step ${group.rolloutId} Group ${group.groupIndex}: ${group.samples.length} samples`)
      groups.push(group)
    }
    return { steps, groups, status: await rollout.status() }
  } finally {
    await rollout.close()
  }
}

if (TrainerShared.isMain(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error))
    process.exitCode = 1
  })
}
