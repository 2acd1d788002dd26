/**
 * The off-loop encoder's ids copied into a plain array in slices (`OffLoopEncoder.toArrayInSlices`): the same ids as
 * one copy, and a task boundary before every slice, so that a 1 MB text's ~250,000 ids are not copied in one go.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as OffLoopEncoder from "../../layers/tokenizer/OffLoopEncoder.ts"

const { SLICE_IDS, toArrayInSlices } = OffLoopEncoder

describe("OffLoopEncoder.toArrayInSlices", () => {
  it.effect("gives the ids as a plain array, whatever the length against the slice", () =>
    Effect.gen(function*() {
      for (const length of [0, 1, SLICE_IDS - 1, SLICE_IDS, SLICE_IDS + 1, 3 * SLICE_IDS + 5]) {
        const ids = Int32Array.from({ length }, (_, i) => (i * 7919) % 151_669)
        const copied = yield* toArrayInSlices(ids)
        assert.isTrue(Array.isArray(copied))
        assert.deepStrictEqual(copied, Array.from(ids))
      }
      const already = [1, 2, 3]
      assert.strictEqual(yield* toArrayInSlices(already), already)
    }))

  it.effect("lets another fiber run before every slice", () =>
    Effect.gen(function*() {
      let turns = 0
      let stop = false
      const other = yield* Effect.forkChild(Effect.whileLoop({
        while: () => !stop,
        body: () => Effect.andThen(Effect.sync(() => void turns++), Effect.yieldNow),
        step: () => {}
      }))
      yield* Effect.yieldNow
      const before = turns
      const slices = 4
      yield* toArrayInSlices(new Int32Array((slices - 1) * SLICE_IDS + 5))
      const during = turns - before
      stop = true
      yield* Fiber.join(other)
      assert.isAtLeast(during, slices)
    }))
})
