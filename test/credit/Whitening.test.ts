import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as Whitening from "../../src/credit/Whitening.ts"
import * as Samples from "./samples.ts"

const whitened = (samples: Parameters<typeof Whitening.whiten>[0]) => {
  const result = Whitening.whiten(samples)
  if (Result.isFailure(result)) throw new Error(result.failure.message)
  return result.success
}

describe("--normalize-advantages whitening", () => {
  it("whitens scalar advantages with per-token statistics over loss-masked tokens", () => {
    // Loss-masked token values: 1, 1 (first sample), -1 (second): mean 1/3, Bessel variance (24/9) / 2 = 4/3.
    const out = whitened([
      Samples.sample({ response_length: 3, loss_mask: [1, 1, 0], advantage: 1 }),
      Samples.sample({ response_length: 2, loss_mask: [1, 0], advantage: -1 })
    ])
    const scale = Math.sqrt(4 / 3 + 1e-8)
    assert.closeTo(out[0]!.advantage as number, (2 / 3) / scale, 1e-12)
    assert.closeTo(out[1]!.advantage as number, (-4 / 3) / scale, 1e-12)
  })

  it("whitens a per-token list on loss-masked positions and keeps observation tokens at 0", () => {
    // Masked values 2 and 4: mean 3, Bessel variance 2.
    const out = whitened([Samples.sample({ response_length: 3, loss_mask: [1, 0, 1], advantage: [2, 0, 4] })])
    const scale = Math.sqrt(2 + 1e-8)
    const advantage = out[0]!.advantage as ReadonlyArray<number>
    assert.closeTo(advantage[0]!, -1 / scale, 1e-12)
    assert.strictEqual(advantage[1], 0)
    assert.closeTo(advantage[2]!, 1 / scale, 1e-12)
  })

  it("leaves the step with zero mean and unit variance over its trainable tokens", () => {
    const out = whitened([
      Samples.sample({ response_length: 4, loss_mask: [1, 1, 1, 1], advantage: 0.9 }),
      Samples.sample({ response_length: 2, loss_mask: [1, 1], advantage: -0.3 }),
      Samples.sample({ response_length: 3, loss_mask: [1, 0, 1], advantage: [1, 0, 2] })
    ])
    const values = out.flatMap((row) =>
      row.loss_mask.flatMap((mask, i) =>
        mask === 1 ? [typeof row.advantage === "number" ? row.advantage : row.advantage![i]!] : []
      )
    )
    const mean = values.reduce((a, b) => a + b, 0) / values.length
    const variance = values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1)
    assert.closeTo(mean, 0, 1e-12)
    assert.closeTo(variance, 1, 1e-6)
  })

  it("fails for a sample without advantage, naming it", () => {
    const result = Whitening.whiten([Samples.sample({ session_id: "s9", export_name: "main", advantage: null })])
    assert.isTrue(Result.isFailure(result))
    if (Result.isFailure(result)) assert.include(result.failure.message, `Session s9, context "main" has no advantage`)
  })

  it("fails for a step without loss-masked tokens", () => {
    const result = Whitening.whiten([Samples.sample({ response_length: 2, loss_mask: [0, 0], advantage: 1 })])
    assert.isTrue(Result.isFailure(result))
    if (Result.isFailure(result)) assert.include(result.failure.message, "no loss-masked token")
  })
})
