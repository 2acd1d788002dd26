/**
 * One configuration at join (layers/cluster/Members.ts `refusal`): a runner is compared with the live controllers, a
 * controller with the live runners, never a runner with another runner; the refusal names the first differing flag.
 * The table itself is exercised by test/cluster/runners.e2e.test.ts on a real PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Members from "../../layers/cluster/Members.ts"

const same = { rolloutTemperature: "1", tokenizer: "null" }
const other = { rolloutTemperature: "0.5", tokenizer: "null" }
const live = (role: "runner" | "controller", fingerprint: Record<string, string>, id = role) => ({
  id,
  role,
  address: `${role}-host:1`,
  slots: undefined,
  fingerprint
})

describe("Members.refusal", () => {
  it("refuses a runner whose sampling differs from a live controller's, naming the flag and both values", () => {
    const refused = Members.refusal({ id: "r", role: "runner", address: "r:1", fingerprint: other }, [
      live("controller", same)
    ])
    assert.strictEqual(refused?.reason, "runner")
    assert.include(refused?.message, "this runner is refused at join: --rollout-temperature: this runner has 0.5")
    assert.include(refused?.message, "the controller (controller-host:1) 1")
  })

  it("refuses a controller whose settings differ from a live runner's, naming the runner", () => {
    const refused = Members.refusal({ id: "c", role: "controller", address: "c", fingerprint: other }, [
      live("runner", same)
    ])
    assert.strictEqual(refused?.reason, "controller")
    assert.include(refused?.message, "--rollout-temperature: the runner runner-host:1 has 1, this controller 0.5")
  })

  it("does not compare runners with each other, nor members that agree", () => {
    assert.isUndefined(
      Members.refusal({ id: "r2", role: "runner", address: "r2:1", fingerprint: other }, [live("runner", same)])
    )
    assert.isUndefined(
      Members.refusal({ id: "r2", role: "runner", address: "r2:1", fingerprint: same }, [live("controller", same)])
    )
  })
})
