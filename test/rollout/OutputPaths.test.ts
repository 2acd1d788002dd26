import { assert, describe, it } from "@effect/vitest"
import * as Path from "node:path"
import * as OutputPaths from "../../src/rollout/OutputPaths.ts"

const base = { skipEvalBeforeTrain: false, evalDatasets: [{ name: "test" }, { name: "hard" }] }

describe("the first step's output directories", () => {
  it("are --output-dir and the debug dump template's directory for step 0, each once, resolved", () => {
    assert.deepStrictEqual(
      OutputPaths.firstStepTargets({
        ...base,
        outputDir: "runs/x",
        saveDebugRolloutData: "runs/x/debug_{rollout_id}.jsonl"
      }),
      [{ flag: "--output-dir", directory: Path.resolve("runs/x") }]
    )
    assert.deepStrictEqual(
      OutputPaths.firstStepTargets({ ...base, saveDebugRolloutData: "/d/{rollout_id}/dump.jsonl" }),
      [{ flag: "--save-debug-rollout-data", directory: "/d/0" }]
    )
  })

  it("include the Eval before training's dump directories when Eval runs first", () => {
    assert.deepStrictEqual(
      OutputPaths.firstStepTargets({ ...base, evalInterval: 1, saveDebugRolloutData: "/d/{rollout_id}/dump.jsonl" })
        .map((t) => t.directory),
      ["/d/eval_0_test", "/d/eval_0_hard", "/d/0"]
    )
    assert.deepStrictEqual(
      OutputPaths.firstStepTargets({
        ...base,
        evalInterval: 1,
        skipEvalBeforeTrain: true,
        saveDebugRolloutData: "/d/{rollout_id}/x"
      })
        .map((t) => t.directory),
      ["/d/0"]
    )
  })

  it("are none without --output-dir and --save-debug-rollout-data", () => {
    assert.deepStrictEqual(OutputPaths.firstStepTargets(base), [])
  })
})
