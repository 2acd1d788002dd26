import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as Batching from "../../src/credit/Batching.ts"
import * as Samples from "../credit/samples.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

const ofLengths = (lengths: ReadonlyArray<number>) =>
  lengths.map((length, i) =>
    Samples.sample({ index: i, session_id: `s${i}`, tokens: new Array<number>(length).fill(1), response_length: 1 })
  )

const packed = (lengths: ReadonlyArray<number>, budget: number) => {
  const result = Batching.pack(ofLengths(lengths), budget)
  if (Result.isFailure(result)) throw new Error(result.failure.message)
  return result.success
}

describe("token-budget micro-batches", () => {
  it("packs first-fit decreasing within the budget", () => {
    // Longest first: 7 → A; 5 → B; 4 → B (9); 3 → A (10); 2 → C.
    assert.deepStrictEqual(packed([5, 3, 7, 2, 4], 10), [
      { indices: [1, 2], tokens: 10 },
      { indices: [0, 4], tokens: 9 },
      { indices: [3], tokens: 2 }
    ])
  })

  it("fits a sample exactly as long as the budget", () => {
    assert.deepStrictEqual(packed([8, 8], 8), [{ indices: [0], tokens: 8 }, { indices: [1], tokens: 8 }])
  })

  it("returns no micro-batch for an empty step", () => {
    assert.deepStrictEqual(packed([], 8), [])
  })

  it("keeps every micro-batch within the budget and places every sample exactly once", () => {
    const random = SeededRandom.floats(12345)
    for (let round = 0; round < 50; round++) {
      const budget = 50 + Math.floor(random() * 200)
      const lengths = Array.from({ length: 1 + Math.floor(random() * 40) }, () => 1 + Math.floor(random() * budget))
      const batches = packed(lengths, budget)
      const placed = batches.flatMap((batch) => batch.indices).sort((a, b) => a - b)
      assert.deepStrictEqual(placed, lengths.map((_, i) => i))
      for (const batch of batches) {
        assert.isAtMost(batch.tokens, budget)
        assert.strictEqual(batch.tokens, batch.indices.reduce((sum, i) => sum + lengths[i]!, 0))
      }
      // First fit never leaves two micro-batches at most half full: the later one's samples would have fit earlier.
      assert.isAtMost(batches.filter((batch) => batch.tokens * 2 <= budget).length, 1)
    }
  })

  it("rejects a sample longer than the budget, naming its Session, context and length", () => {
    const rows = ofLengths([4, 12]).map((row, i) => ({ ...row, export_name: i === 1 ? "searcher_0" : null }))
    const result = Batching.pack(rows, 10)
    assert.isTrue(Result.isFailure(result))
    if (Result.isFailure(result)) {
      assert.strictEqual(result.failure._tag, "BatchingError")
      assert.include(result.failure.message, `sample 1 (Session s1, context "searcher_0") has 12 tokens`)
      assert.include(result.failure.message, "more than --max-tokens-per-gpu 10")
    }
  })
})
