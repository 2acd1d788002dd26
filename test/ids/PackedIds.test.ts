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

  it("takes 3 bytes an id (a one-byte string) for a vocabulary's ids and 4 (an Int32Array) when one id does not fit", () => {
    const ids = Array.from({ length: 1000 }, (_, i) => (i * 7919) % 151_936)
    const bytes = (packed: PackedIds.PackedIds) => (typeof packed === "string" ? packed.length : packed.byteLength)
    assert.strictEqual(bytes(PackedIds.pack(ids)), 3000)
    assert.isTrue(/^[\u0000-\u00ff]*$/.test(PackedIds.pack(ids) as string))
    assert.strictEqual(bytes(PackedIds.pack(ids, [2 ** 24])), 4004)
    assert.strictEqual(bytes(PackedIds.pack(ids, [-1])), 4004)
    assert.strictEqual(bytes(PackedIds.pack()), 0)
    // Longer than the reused scratch buffer, and past its limit: the same ids back.
    for (const n of [5000, 400_000]) {
      const long = Array.from({ length: n }, (_, i) => (i * 104_729) % (2 ** 24))
      assert.deepStrictEqual([...PackedIds.unpack(PackedIds.pack(long))], long)
    }
  })

  it("finds the common prefix with a sequence held as a chain of parts as with the same ids packed in one", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.oneof(vocabularyId, vocabularyId, anyId), { maxLength: 20 }), { maxLength: 5 }),
        fc.array(fc.oneof(vocabularyId, anyId), { maxLength: 20 }),
        fc.nat({ max: 120 }),
        fc.nat({ max: 120 }),
        (parts, extra, cut, from) => {
          // The parts as a chain, last part first (as a forest's lineage: each link its part and the ones before it).
          const chain = parts.reduce<PackedIds.Chain | null>((up, part) => ({ ids: PackedIds.pack(part), up }), null)
          const all = parts.flat()
          assert.strictEqual(PackedIds.chainLength(chain), all.length)
          const whole = PackedIds.pack(all)
          for (const ids of [all, [...all, ...extra], all.slice(0, cut), [...all.slice(0, cut), ...extra]]) {
            const expected = PackedIds.commonPrefix(ids, whole)
            assert.strictEqual(PackedIds.commonPrefixOfChain(ids, chain), expected)
            // Told the first `from` agree (only where they do): the same answer.
            const known = Math.min(from, expected)
            assert.strictEqual(PackedIds.commonPrefixOfChain(ids, chain, known), expected)
          }
        }
      ),
      { numRuns: 500 }
    )
  })
})
