import { assert, describe, it } from "@effect/vitest"
import * as Statistics from "../../src/stats/Statistics.ts"

describe("Statistics", () => {
  it("percentile interpolates linearly between ranks like numpy", () => {
    assert.strictEqual(Statistics.percentile([1, 2, 3, 4], 0.5), 2.5)
    assert.strictEqual(Statistics.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9), 9.1)
    assert.strictEqual(Statistics.percentile([7], 0.99), 7)
    assert.strictEqual(Statistics.percentile([], 0.9), 0)
  })

  it("the median of an even count is the mean of the middle two", () => {
    assert.strictEqual(Statistics.median([4, 1, 3, 2]), 2.5)
    assert.strictEqual(Statistics.median([7]), 7)
  })

  it("mean is 0 for an empty list", () => {
    assert.strictEqual(Statistics.mean([1, 2, 6]), 3)
    assert.strictEqual(Statistics.mean([]), 0)
  })
})
