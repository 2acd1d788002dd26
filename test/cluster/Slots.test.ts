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
})
