import { assert, describe, it } from "@effect/vitest"
import * as RunReport from "../../src/rollout/RunReport.ts"

const none = { written: [], salvaged: [], inFlight: [] }

describe("the last line of an interrupted run", () => {
  it("names the interrupted step and that nothing was written", () => {
    assert.strictEqual(
      RunReport.interruptedLine(
        "SIGINT",
        { ...none, activity: { _tag: "Step", rolloutId: 0, writing: false } },
        "/r/out"
      ),
      "Interrupted by SIGINT during step 0: step 0's samples were not written; nothing was written to /r/out"
    )
  })

  it("lists the files written in the output directory by name, others by path", () => {
    assert.strictEqual(
      RunReport.interruptedLine("SIGTERM", {
        ...none,
        activity: { _tag: "Step", rolloutId: 1, writing: false },
        written: ["/r/out/rollout_0.jsonl", "/r/out/metrics.jsonl", "/r/dumps/debug_0.jsonl"]
      }, "/r/out"),
      "Interrupted by SIGTERM during step 1: step 1's samples were not written; " +
        "written: rollout_0.jsonl, metrics.jsonl in /r/out; /r/dumps/debug_0.jsonl"
    )
  })

  it("says which write was abandoned and where its content went", () => {
    assert.strictEqual(
      RunReport.interruptedLine("SIGTERM", {
        activity: { _tag: "Step", rolloutId: 0, writing: true },
        written: [],
        salvaged: [{ path: "/r/out/rollout_0.jsonl", fallback: "/tmp/u/rollout_0.jsonl" }],
        inFlight: ["/r/out/rollout_0.jsonl"]
      }, "/r/out"),
      "Interrupted by SIGTERM during step 0 while writing its outputs: step 0's samples were not written; " +
        "abandoned unfinished write(s) of /r/out/rollout_0.jsonl; /r/out/rollout_0.jsonl was saved to " +
        "/tmp/u/rollout_0.jsonl instead; nothing was written to /r/out"
    )
  })

  it("names an interrupted Eval and the time between steps", () => {
    assert.match(
      RunReport.interruptedLine(
        "SIGINT",
        { ...none, activity: { _tag: "Eval", afterSteps: 2, writing: false } },
        undefined
      ),
      /^Interrupted by SIGINT during the Eval after 2 step\(s\): its Eval samples were not written; nothing was written$/
    )
    assert.match(
      RunReport.interruptedLine("SIGINT", { ...none, activity: { _tag: "Between", lastStep: 3 } }, "/o"),
      /^Interrupted by SIGINT after step 3; nothing was written to \/o$/
    )
  })
})
