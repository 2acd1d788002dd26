/**
 * Default credit (no custom advantage hook): GRPO group normalization of one scalar reward per Session.
 */
import * as Statistics from "../stats/Statistics.ts"
import type * as CreditOptions from "./CreditOptions.ts"

/** Added to the Group std before dividing, as the reference does (`std + 1e-6`). */
export const STD_EPSILON = 1e-6

/**
 * Sample standard deviation (Bessel-corrected, divisor n − 1), what `torch.Tensor.std()` computes by default.
 * Undefined (NaN) for fewer than two values, which is why std normalization is skipped for Groups of one.
 */
export const sampleStd = (values: ReadonlyArray<number>): number => {
  if (values.length < 2) return Number.NaN
  const center = Statistics.mean(values)
  const squares = values.reduce((sum, value) => sum + (value - center) ** 2, 0)
  return Math.sqrt(squares / (values.length - 1))
}

/**
 * The advantages of one Group's rewards (one per Session, in order).
 *
 * **Details**
 * `(r − mean) / (std + 1e-6)` with the sample std. `--disable-grpo-std-normalization`, or `nSamplesPerPrompt == 1`
 * (forced by the reference), keeps `r − mean`. `--disable-rewards-normalization` turns Group normalization off
 * entirely and returns the raw rewards: in the reference that flag guards both steps, so no scaling happens
 * without centering either.
 */
export const normalizeGroup = (
  rewards: ReadonlyArray<number>,
  options: Pick<
    CreditOptions.CreditOptions,
    "disableGrpoStdNormalization" | "disableRewardsNormalization" | "nSamplesPerPrompt"
  >
): ReadonlyArray<number> => {
  if (options.disableRewardsNormalization) return [...rewards]
  const center = Statistics.mean(rewards)
  const centered = rewards.map((reward) => reward - center)
  if (options.disableGrpoStdNormalization || options.nSamplesPerPrompt === 1) return centered
  const scale = sampleStd(rewards) + STD_EPSILON
  return centered.map((value) => value / scale)
}
