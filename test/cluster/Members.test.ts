/**
 * One configuration at join (layers/cluster/MemberTable.ts `refusal`): a runner is compared with the live controllers, a
 * controller with the live runners, never a runner with another runner; the refusal names the first differing flag.
 * The cross-step modes are compared by what a runner does with them (`--partial-rollout` and `--fully-async` alike).
 * The table itself is exercised by test/cluster/runners.e2e.test.ts on a real PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as MemberTable from "../../layers/cluster/MemberTable.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import * as Settings from "../../src/config/Settings.ts"

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
    const refused = MemberTable.refusal({ id: "r", role: "runner", address: "r:1", fingerprint: other }, [
      live("controller", same)
    ])
    assert.strictEqual(refused?.reason, "runner")
    assert.include(refused?.message, "this runner is refused at join: --rollout-temperature: this runner has 0.5")
    assert.include(refused?.message, "the controller (controller-host:1) 1")
  })

  it("refuses a controller whose settings differ from a live runner's, naming the runner", () => {
    const refused = MemberTable.refusal({ id: "c", role: "controller", address: "c", fingerprint: other }, [
      live("runner", same)
    ])
    assert.strictEqual(refused?.reason, "controller")
    assert.include(refused?.message, "--rollout-temperature: the runner runner-host:1 has 1, this controller 0.5")
  })

  it("does not compare runners with each other, nor members that agree", () => {
    assert.isUndefined(
      MemberTable.refusal({ id: "r2", role: "runner", address: "r2:1", fingerprint: other }, [live("runner", same)])
    )
    assert.isUndefined(
      MemberTable.refusal({ id: "r2", role: "runner", address: "r2:1", fingerprint: same }, [live("controller", same)])
    )
  })

  it.effect("compares what a runner does at a step boundary: --partial-rollout serves --fully-async, neither is refused", () =>
    Effect.gen(function*() {
      const base = { promptData: "train.jsonl", rolloutBatchSize: 4 }
      const partial = Fingerprint.of(yield* Settings.resolve({ ...base, partialRollout: true }))
      const fullyAsync = Fingerprint.of(yield* Settings.resolve({ ...base, fullyAsync: true }))
      const neither = Fingerprint.of(yield* Settings.resolve(base))
      assert.isUndefined(Fingerprint.mismatch(fullyAsync, partial))
      assert.strictEqual(
        Fingerprint.mismatch(fullyAsync, neither)?.split(";")[0],
        "--partial-rollout / --fully-async: this runner has false, the controller true"
      )
    }))
})
