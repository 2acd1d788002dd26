/**
 * `--normalize-advantages`: whitening of a step's advantages over its loss-masked tokens.
 */
import { Result } from "effect"
import type * as TrainingSample from "../forest/TrainingSample.ts"
import * as CreditError from "./CreditError.ts"

/** Added to the variance before the square root, as the reference does. */
export const VARIANCE_EPSILON = 1e-8

/**
 * Whiten every sample's advantage with the mean and variance of the step's per-token advantages.
 *
 * **Details**
 * Follows the reference (`distributed_masked_whiten`): the statistics run over every continuation token with loss
 * mask 1 (a scalar advantage counts once per such token), the variance is Bessel-corrected when there are at least two
 * tokens, and each value becomes `(a − mean) / sqrt(var + 1e-8)`. A scalar advantage stays a scalar (it is the same
 * value on every token); in a per-token list only loss-masked positions are whitened, and observation positions keep
 * their 0 because they carry no loss either way. Fails when a sample has no advantage or the step has no loss-masked
 * token.
 */
export const whiten = (
  samples: ReadonlyArray<TrainingSample.TrainingSample>
): Result.Result<ReadonlyArray<TrainingSample.TrainingSample>, CreditError.NormalizationError> => {
  for (const sample of samples) {
    if (sample.advantage === null) {
      return Result.fail(
        new CreditError.NormalizationError({
          detail:
            `--normalize-advantages: Session ${sample.session_id}, context ${
              CreditError.contextLabel(sample.export_name)
            } ` +
            `has no advantage; credit must run before whitening`
        })
      )
    }
  }
  // Two passes (mean, then squared deviations) rather than E[x²] − mean², which cancels badly for large means.
  const forEachMasked = (visit: (value: number) => void): void => {
    for (const sample of samples) {
      const advantage = sample.advantage
      sample.loss_mask.forEach((mask, position) => {
        if (mask !== 1 || advantage === null) return
        visit(typeof advantage === "number" ? advantage : (advantage[position] ?? 0))
      })
    }
  }
  let sum = 0
  let count = 0
  forEachMasked((value) => {
    sum += value
    count += 1
  })
  if (count === 0) {
    return Result.fail(
      new CreditError.NormalizationError({
        detail: `--normalize-advantages: the step has no loss-masked token to compute statistics over`
      })
    )
  }
  const center = sum / count
  let squares = 0
  forEachMasked((value) => {
    squares += (value - center) ** 2
  })
  const variance = count >= 2 ? squares / (count - 1) : squares / count
  const scale = Math.sqrt(variance + VARIANCE_EPSILON)
  const whitenOne = (
    advantage: Exclude<TrainingSample.Advantage, null>,
    lossMask: ReadonlyArray<number>
  ): TrainingSample.Advantage =>
    typeof advantage === "number"
      ? (advantage - center) / scale
      : advantage.map((value, position) => lossMask[position] === 1 ? (value - center) / scale : value)
  return Result.succeed(samples.map((sample) => ({
    ...sample,
    advantage: sample.advantage === null ? null : whitenOne(sample.advantage, sample.loss_mask)
  })))
}
