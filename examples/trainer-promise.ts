/**
 * A training-loop skeleton for TypeScript trainers that do not use Effect: `createRollout` gives the same service as
 * Promises. Two steps with a weight update after each, then one more step consumed Group by Group.
 *
 * Run from the repository root: `npx tsx examples/trainer-promise.ts` (the arithmetic example on the embedded engine).
 */
import { createRollout, type MakeRolloutExtras, type Results, type RolloutOptionsInput } from "relax-agentic"
import { arithmetic, describeStep, isMain } from "./trainer-shared.ts"

export const main = async (options: RolloutOptionsInput = arithmetic, extras: MakeRolloutExtras = {}) => {
  const rollout = await createRollout(options, extras)
  try {
    const steps: Array<Results.StepResult> = []
    for (let rolloutId = 0; rolloutId < 2; rolloutId++) {
      const step = await rollout.step(rolloutId)
      console.log(describeStep(step))
      // Train here on step.samples (tokens, loss_mask, rollout_log_probs, advantage).
      console.log(`weight version -> ${await rollout.updateWeights()}`)
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

if (isMain(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error))
    process.exitCode = 1
  })
}
