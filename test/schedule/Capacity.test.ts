import { assert, describe, it } from "@effect/vitest"
import * as Capacity from "../../src/schedule/Capacity.ts"

describe("required external-agent capacity", () => {
  it("needs T = agentic_concurrency * n_samples_per_prompt slots without Eval", () => {
    const report = Capacity.compute({
      agenticConcurrency: 8,
      nSamplesPerPrompt: 4,
      evalDatasets: [],
      trainResidentDuringEval: false
    })
    assert.strictEqual(report.trainSessions, 32)
    assert.strictEqual(report.rule, "T")
    assert.strictEqual(report.requiredSlots, 32)
    assert.strictEqual(report.warning, undefined)
  })

  it("derives C_d = ceil(T / G_d) and E_d = C_d * G_d per Eval dataset, and takes the peak, not the sum", () => {
    const report = Capacity.compute({
      agenticConcurrency: 8,
      nSamplesPerPrompt: 4,
      evalDatasets: [{ name: "a", nSamplesPerEvalPrompt: 3 }, { name: "b", nSamplesPerEvalPrompt: 16 }],
      trainResidentDuringEval: false
    })
    assert.deepStrictEqual(report.evals, [
      { name: "a", groupSize: 3, concurrency: 11, sessions: 33 },
      { name: "b", groupSize: 16, concurrency: 2, sessions: 32 }
    ])
    assert.strictEqual(report.evalPeak, 33)
    assert.strictEqual(report.rule, "max(T, E_peak)")
    assert.strictEqual(report.requiredSlots, 33)
  })

  it("uses an explicit agentic_eval_concurrency", () => {
    const report = Capacity.compute({
      agenticConcurrency: 8,
      nSamplesPerPrompt: 4,
      agenticEvalConcurrency: 5,
      evalDatasets: [{ name: "a", nSamplesPerEvalPrompt: 2 }],
      trainResidentDuringEval: false
    })
    assert.strictEqual(report.evals[0]?.sessions, 10)
    assert.strictEqual(report.requiredSlots, 32)
  })

  it("adds T and E_peak when train sessions stay resident during Eval, and warns below the requirement", () => {
    const report = Capacity.compute({
      agenticConcurrency: 2,
      nSamplesPerPrompt: 4,
      evalDatasets: [{ name: "a", nSamplesPerEvalPrompt: 1 }],
      trainResidentDuringEval: true,
      agentMaxSlots: 10
    })
    assert.strictEqual(report.rule, "T + E_peak")
    assert.strictEqual(report.requiredSlots, 16)
    assert.include(report.warning, "--agent-max-slots 10 is below the required 16 external agent slots")
    const table = Capacity.render(report)
    assert.include(table, "T (agentic_concurrency * n_samples_per_prompt) = 8")
    assert.include(table, "eval a: G_d = 1, C_d = 8, E_d = 8")
    assert.include(table, "required slots: external_slots >= T + E_peak = 16")
    assert.include(table, "WARNING: --agent-max-slots 10")
  })
})
