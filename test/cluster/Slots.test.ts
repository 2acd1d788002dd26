/** `--runner-slots`: when a runner takes a Group (src/cluster/Slots.ts). */
import { assert, describe, it } from "@effect/vitest"
import * as Slots from "../../src/cluster/Slots.ts"

const base = { capacity: 8, used: 0, size: 4, known: false, draining: false }

describe("Slots", () => {
  it("takes a Group only when every Session of it fits", () => {
    assert.strictEqual(Slots.decide(base), "granted")
    assert.strictEqual(Slots.decide({ ...base, used: 4 }), "granted")
    assert.strictEqual(Slots.decide({ ...base, used: 5 }), "full")
    assert.strictEqual(Slots.decide({ ...base, capacity: undefined, used: 1000 }), "granted")
  })

  it("grants a re-delivered reservation again, refuses a Group larger than the runner, and nothing while draining", () => {
    assert.strictEqual(Slots.decide({ ...base, used: 8, known: true }), "granted")
    assert.strictEqual(Slots.decide({ ...base, size: 9 }), "too-small")
    assert.strictEqual(Slots.decide({ ...base, draining: true }), "draining")
    assert.strictEqual(Slots.decide({ ...base, known: true, draining: true }), "draining")
  })

  it("counts free slots", () => {
    assert.strictEqual(Slots.free(8, 3), 5)
    assert.strictEqual(Slots.free(8, 9), 0)
    assert.isUndefined(Slots.free(undefined, 3))
  })

  it("counts the live runners' slots against the Sessions resident at once (the external-slots check)", () => {
    const runners = [{ address: "a:1", slots: 2 }, { address: "b:1", slots: 2 }]
    const warning = Slots.shortfall(runners, 8, "T")
    assert.include(warning, "the 2 runner(s) hold 4 agent slot(s) in all (--runner-slots: a:1 2, b:1 2), below the 8")
    assert.isUndefined(Slots.shortfall(runners, 4, "T"))
    assert.isUndefined(Slots.shortfall([...runners, { address: "c:1", slots: undefined }], 8, "T"))
    assert.isUndefined(Slots.shortfall([], 8, "T"))
    assert.strictEqual(Slots.render(runners), "  runners: 2; --runner-slots: a:1 2, b:1 2; runner slots in all = 4")
    assert.strictEqual(Slots.render([]), "  runners: none joined the cluster")
  })
})
