import { assert, describe, it } from "@effect/vitest"
import * as Grpo from "../../src/credit/Grpo.ts"

const options = { disableGrpoStdNormalization: false, disableRewardsNormalization: false, nSamplesPerPrompt: 3 }

const close = (actual: ReadonlyArray<number>, expected: ReadonlyArray<number>) => {
  assert.strictEqual(actual.length, expected.length)
  actual.forEach((value, i) => assert.closeTo(value, expected[i]!, 1e-12))
}

describe("GRPO group normalization", () => {
  it("subtracts the Group mean and divides by the sample std plus 1e-6", () => {
    // mean 2, deviations [1, -1, 0], sample std sqrt((1 + 1 + 0) / 2) = 1
    close(Grpo.normalizeGroup([3, 1, 2], options), [1 / (1 + 1e-6), -1 / (1 + 1e-6), 0])
  })

  it("uses the Bessel-corrected std (n − 1), as torch.std does", () => {
    // mean 0.5, deviations ±0.5, sample std sqrt(4 · 0.25 / 3) = sqrt(1/3); population std would be 0.5
    const scale = Math.sqrt(1 / 3) + 1e-6
    close(Grpo.normalizeGroup([1, 0, 0, 1], { ...options, nSamplesPerPrompt: 4 }), [
      0.5 / scale,
      -0.5 / scale,
      -0.5 / scale,
      0.5 / scale
    ])
    assert.closeTo(Grpo.sampleStd([1, 0, 0, 1]), Math.sqrt(1 / 3), 1e-15)
  })

  it("gives zero advantages to a Group whose rewards are all equal", () => {
    close(Grpo.normalizeGroup([1, 1, 1], options), [0, 0, 0])
  })

  it("only centers with --disable-grpo-std-normalization", () => {
    close(Grpo.normalizeGroup([3, 1, 2], { ...options, disableGrpoStdNormalization: true }), [1, -1, 0])
  })

  it("only centers when n_samples_per_prompt is 1", () => {
    close(Grpo.normalizeGroup([0.7], { ...options, nSamplesPerPrompt: 1 }), [0])
  })

  it("keeps the raw rewards with --disable-rewards-normalization", () => {
    close(Grpo.normalizeGroup([3, 1, 2], { ...options, disableRewardsNormalization: true }), [3, 1, 2])
  })
})
