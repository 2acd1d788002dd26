import { assert, describe, it } from "@effect/vitest"
import * as Workload from "../support/Workload.ts"

describe("seeded long-tail workload", () => {
  it("is a pure function of (seed, task, position) and differs across them", () => {
    const options = Workload.longTail(7)
    assert.deepStrictEqual(Workload.plan(options, 3, 1), Workload.plan(options, 3, 1))
    assert.notDeepEqual(Workload.plan(options, 3, 1), Workload.plan(options, 3, 2))
    assert.notDeepEqual(Workload.plan(options, 3, 1), Workload.plan(Workload.longTail(8), 3, 1))
  })

  it("has a long tail: the slowest Session takes several times the median, and every draw stays in bounds", () => {
    const options = Workload.longTail(1)
    const plans = Array.from({ length: 200 }, (_, task) => Workload.plan(options, task, 0))
    const tokens = plans.map((p) => Workload.totals(p).tokens).sort((a, b) => a - b)
    const median = tokens[100]!
    assert.isAbove(tokens[tokens.length - 1]!, 4 * median)
    for (const p of plans) {
      assert.isAtLeast(p.turns.length, 1)
      assert.isAtMost(p.turns.length, 12)
      for (const t of p.turns) {
        assert.isAtLeast(t.outputTokens, 24)
        assert.isAtMost(t.outputTokens, 400)
        assert.isAtMost(t.toolSeconds, 120)
      }
    }
  })
})
