import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as Partitions from "../../src/schedule/Partitions.ts"
import * as Results from "../support/results.ts"

const ok = Results.success

const acceptN = (p: Partitions.Partitions, n: number) => {
  const ids: Array<number> = []
  for (let i = 0; i < n; i++) {
    const r = ok(Partitions.accept(p))
    ids.push(r.rolloutId)
    p = r.partitions
  }
  return { partitions: p, ids }
}

describe("Transfer partitions", () => {
  it("derives the debt of a carried partition from its remaining target (1, then 5, then 4)", () => {
    let p = ok(Partitions.open(Partitions.empty, 0, 4))
    p = acceptN(p, 3).partitions
    assert.strictEqual(Partitions.debt(p), 1)
    p = ok(Partitions.open(p, 1, 4))
    assert.strictEqual(Partitions.debt(p), 5)
    const step = acceptN(p, 1)
    assert.deepStrictEqual(step.ids, [0])
    assert.strictEqual(Partitions.debt(step.partitions), 4)
  })

  it("routes accepted Groups to the previous partition first, then the current one", () => {
    let p = acceptN(ok(Partitions.open(Partitions.empty, 0, 2)), 1).partitions
    p = ok(Partitions.open(p, 1, 2))
    const { ids, partitions } = acceptN(p, 2)
    assert.deepStrictEqual(ids, [0, 1])
    const done = Partitions.produced(partitions)
    assert.deepStrictEqual(done.produced.map((x) => x.rolloutId), [0])
    assert.strictEqual(done.partitions.previous, undefined)
    assert.deepStrictEqual(done.partitions.current, { rolloutId: 1, target: 2, accepted: 1 })
  })

  it("refuses a third partition while the previous one is owed Groups, a partition opened twice, and a Group nobody needs", () => {
    let p = acceptN(ok(Partitions.open(Partitions.empty, 0, 2)), 1).partitions
    p = ok(Partitions.open(p, 1, 2))
    const third = Partitions.open(p, 2, 2)
    assert.isTrue(Result.isFailure(third))
    if (Result.isFailure(third)) {
      assert.strictEqual(third.failure.message, "previous partition must be produced before opening the next partition")
    }
    const twice = Partitions.open(p, 1, 2)
    assert.isTrue(Result.isFailure(twice))
    if (Result.isFailure(twice)) assert.strictEqual(twice.failure.message, "physical partition already active: 1")
    const full = acceptN(p, 3).partitions
    const extra = Partitions.accept(full)
    assert.isTrue(Result.isFailure(extra))
    if (Result.isFailure(extra)) assert.strictEqual(extra.failure.message, "no physical partition needs a group")
  })

  it("the final backfill opens nothing and drains what the last step left", () => {
    let p = acceptN(ok(Partitions.open(Partitions.empty, 4, 3)), 1).partitions
    assert.strictEqual(Partitions.debt(p), 2)
    const drained = acceptN(p, 2)
    assert.deepStrictEqual(drained.ids, [4, 4])
    p = Partitions.produced(drained.partitions).partitions
    assert.strictEqual(Partitions.debt(p), 0)
    assert.deepStrictEqual(p, Partitions.empty)
  })
})
