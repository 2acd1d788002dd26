import { assert, describe, it } from "@effect/vitest"
import * as WeightVersion from "../../src/engine/WeightVersion.ts"

const update = (version: string): WeightVersion.Boundary => ({ _tag: "Update", version })
const pause = (mode: WeightVersion.PauseMode): WeightVersion.Boundary => ({ _tag: "Pause", mode })
const resume = (version: string): WeightVersion.Boundary => ({ _tag: "Resume", version })

/** The versions and whether an update cut it, as one tuple. */
const of = (crossed: ReadonlyArray<WeightVersion.Boundary>, aborted: boolean, label?: string) => {
  const r = WeightVersion.attemptVersions("v0", crossed, aborted, label)
  return [r.versions, r.cutByUpdate]
}

describe("WeightVersion.attemptVersions (what SGLang does at each boundary)", () => {
  it("an attempt that crossed nothing ran on SGLang's label, or its own version without one", () => {
    assert.deepStrictEqual(of([], false, "v5"), [["v5"], false])
    assert.deepStrictEqual(of([], true, "v5"), [["v5"], false])
    assert.deepStrictEqual(of([], false), [["v0"], false])
  })

  it("a one-call update cuts what runs (the old version, whatever the new label says); what finishes after ran on the new", () => {
    assert.deepStrictEqual(of([update("v1")], true, "v1"), [["v0"], true])
    assert.deepStrictEqual(of([update("v1")], false, "v1"), [["v1"], false])
  })

  it("an abort pause: the cut attempt is an abort on the old version; one held at is_pause_cond ran wholly on the new", () => {
    assert.deepStrictEqual(of([pause("abort")], true), [["v0"], true])
    assert.deepStrictEqual(of([pause("abort"), resume("v1")], true), [["v0"], true])
    // Held at SGLang's pause condition until the resume: one attempt, one version (no abort).
    assert.deepStrictEqual(of([pause("abort"), resume("v1")], false, "v1"), [["v1"], false])
    // Slipped past the abort and finished before the resume: the old weights.
    assert.deepStrictEqual(of([pause("abort")], false, "v0"), [["v0"], false])
  })

  it("retract and in_place keep the attempt: one attempt, both versions, no abort", () => {
    for (const mode of ["retract", "in_place"] as const) {
      assert.deepStrictEqual(of([pause(mode), resume("v1")], false, "v1"), [["v0", "v1"], false])
      // Finished before the pause reached the scheduler, or a resume on the same version.
      assert.deepStrictEqual(of([pause(mode)], false), [["v0"], false])
      assert.deepStrictEqual(of([pause(mode), resume("v0")], false), [["v0"], false])
    }
  })

  it("an attempt kept across a retract pause and then cut: every version before the cut, and who cut it", () => {
    // A later one-call update cut it: an update's abort.
    assert.deepStrictEqual(of([pause("retract"), resume("v1"), update("v2")], true, "v2"), [["v0", "v1"], true])
    // A step boundary's per-rid abort cut it: not an update's.
    assert.deepStrictEqual(of([pause("in_place"), resume("v1")], true, "v1"), [["v0", "v1"], false])
  })

  it("after several boundaries, a finished attempt ran from the last cut on", () => {
    assert.deepStrictEqual(
      of([update("v1"), pause("abort"), resume("v2"), pause("retract"), resume("v3")], false, "v3"),
      [["v2", "v3"], false]
    )
    assert.deepStrictEqual(of([update("v1"), pause("abort")], false), [["v1"], false])
  })

  it("next counts integer versions up and replaces others by the update count", () => {
    assert.strictEqual(WeightVersion.next("3", 1), "4")
    assert.strictEqual(WeightVersion.next("default", 2), "2")
  })
})
