import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as PackedIds from "../../src/ids/PackedIds.ts"

// The reference: what the embedded engine kept before, the ids copied into one Int32Array.
const reference = (...parts: ReadonlyArray<ReadonlyArray<number>>): Int32Array => Int32Array.from(parts.flat())
const referencePrefix = (ids: ReadonlyArray<number>, kept: Int32Array): number => {
  let i = 0
  while (i < Math.min(ids.length, kept.length) && ids[i] === kept[i]) i++
  return i
}

const vocabularyId = fc.integer({ min: 0, max: 2 ** 24 - 1 })
// Anything an id array might hold: small and huge ids, ids just past 3 bytes, negatives, non-integers.
const anyId = fc.oneof(
  vocabularyId,
  fc.constantFrom(
    0,
    1,
    255,
    256,
    65_535,
    65_536,
    151_643,
    2 ** 24 - 1,
    2 ** 24,
    2 ** 31 - 1,
    -1,
    2 ** 32 + 5,
    1.5,
    -0,
    Number.NaN,
    2 ** 24 + 0.5,
    -(2 ** 24),
    2 ** 40 + 7
  )
)

describe("PackedIds", () => {
  it("reads back every id an Int32Array copy would have kept, and the same common prefixes", () => {
    fc.assert(
      fc.property(
        fc.array(anyId, { maxLength: 60 }),
        fc.array(anyId, { maxLength: 8 }),
        fc.array(anyId, { maxLength: 60 }),
        (input, output, next) => {
          const packed = PackedIds.pack(input, output)
          const kept = reference(input, output)
          assert.strictEqual(PackedIds.length(packed), kept.length)
          for (let i = 0; i <= kept.length; i++) assert.strictEqual(PackedIds.at(packed, i), kept[i])
          for (const ids of [next, [...input, ...output, ...next], input, [...input, ...output].slice(0, -1)]) {
            assert.strictEqual(PackedIds.commonPrefix(ids, packed), referencePrefix(ids, kept))
          }
          assert.deepStrictEqual([...PackedIds.unpack(packed)], [...kept])
          const both = PackedIds.concat([packed, PackedIds.pack(next), PackedIds.pack()])
          assert.deepStrictEqual(both, Int32Array.from([...kept, ...reference(next)]))
          const withTail = PackedIds.concat([packed], output)
          assert.deepStrictEqual(withTail, Int32Array.from([...kept, ...output]))
        }
      ),
      { numRuns: 500 }
    )
  })

  it("takes 3 bytes an id for a vocabulary's ids and 4 when one id does not fit", () => {
    const ids = Array.from({ length: 1000 }, (_, i) => (i * 7919) % 151_936)
    assert.strictEqual(PackedIds.pack(ids).byteLength, 3000)
    assert.strictEqual(PackedIds.pack(ids, [2 ** 24]).byteLength, 4004)
    assert.strictEqual(PackedIds.pack(ids, [-1]).byteLength, 4004)
    assert.strictEqual(PackedIds.pack().byteLength, 0)
  })

  it("rewrites a growable sequence in place to what packing the same ids holds", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            keep: fc.integer({ min: 0, max: 80 }),
            parts: fc.array(fc.array(fc.oneof(vocabularyId, vocabularyId, anyId), { maxLength: 30 }), { maxLength: 3 })
          }),
          { maxLength: 12 }
        ),
        (rewrites) => {
          let sequence: PackedIds.Growable | undefined
          let kept: Array<number> = []
          for (const { keep, parts } of rewrites) {
            sequence = PackedIds.rewrite(sequence, keep, parts)
            kept = [...kept.slice(0, keep), ...parts.flat()]
            const expected = PackedIds.pack(kept)
            const view = PackedIds.view(sequence)
            assert.strictEqual(sequence.count, kept.length)
            assert.deepStrictEqual([...PackedIds.unpack(view)], [...PackedIds.unpack(expected)])
            assert.strictEqual(PackedIds.commonPrefix(kept, view), PackedIds.commonPrefix(kept, expected))
          }
        }
      ),
      { numRuns: 500 }
    )
  })

  it("sizes a first sequence exactly, rewrites in place while there is room, and reallocates with a quarter more", () => {
    const first = PackedIds.rewrite(undefined, 0, [[1, 2, 3, 4]])
    assert.strictEqual(first.packed.byteLength, 4 * 3)
    const grown = PackedIds.rewrite(first, 4, [[5, 6]])
    assert.strictEqual(grown.packed.byteLength, (6 + 1 + 16) * 3)
    const second = PackedIds.rewrite(grown, 6, [[7]])
    assert.strictEqual(second.packed, grown.packed)
    const wide = PackedIds.rewrite(second, 2, [[2 ** 30]])
    assert.instanceOf(wide.packed, Int32Array)
    assert.deepStrictEqual([...PackedIds.unpack(PackedIds.view(wide))], [1, 2, 2 ** 30])
  })
})
