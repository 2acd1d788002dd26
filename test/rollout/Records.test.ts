import { assert, describe, it } from "@effect/vitest"
import type * as DebugView from "../../src/forest/DebugView.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as Samples from "../credit/samples.ts"

const turn = (abortCount: number): DebugView.Turn => ({
  turn_idx: 0,
  resp_state_hash: "r",
  parent_state_hash: "p",
  rollout_id: 0,
  request_id: "rid",
  abort_count: abortCount,
  status: "completed",
  response_length: 3,
  wall_elapsed_s: 1,
  generation_elapsed_s: 1,
  weight_versions: ["0"]
})

const facts = (sessionId: string, aborts: ReadonlyArray<number>): Records.ContextDebug => ({
  view: {
    session_id: sessionId,
    leaf_state_hash: `leaf-${sessionId}`,
    state_hashes: [{ hash: "p", kind: "obs", tokens: 4 }],
    terminal_status: "completed",
    turn_count: aborts.length,
    turns: aborts.map(turn)
  },
  counters: { requests: 5, generations: 4, parserFailures: 0, droppedToolCalls: 0 }
})

describe("parserFailureMetrics", () => {
  it("reports the step's count under the parser's name, and nothing without a parser", () => {
    assert.deepStrictEqual(Records.parserFailureMetrics(4, "glm45"), {
      "rollout/parser_failures": 4,
      "rollout/parser_failures/glm45": 4
    })
    assert.deepStrictEqual(Records.parserFailureMetrics(0, "qwen25"), {
      "rollout/parser_failures": 0,
      "rollout/parser_failures/qwen25": 0
    })
    assert.deepStrictEqual(Records.parserFailureMetrics(3, undefined), {})
  })
})

describe("transferOrder", () => {
  it("numbers Groups by start order and samples by Session position, under the step's rollout id", () => {
    const late: Records.ScoredGroup = {
      seq: 7,
      size: 2,
      samples: [Samples.sample({ session_id: "b1" }), Samples.sample({ session_id: "b0" })],
      debug: [facts("b1", []), facts("b0", [])]
    }
    const early: Records.ScoredGroup = {
      seq: 3,
      size: 2,
      samples: [Samples.sample({ session_id: "a0" }), Samples.sample({ session_id: "a1" })],
      debug: [facts("a0", []), facts("a1", [])]
    }
    const { samples, debug } = Records.transferOrder([late, early], 5)
    assert.deepStrictEqual(
      samples.map((s) => [s.session_id, s.rollout_id, s.group_index, s.index]),
      [["a0", 5, 0, 0], ["a1", 5, 0, 1], ["b1", 5, 1, 2], ["b0", 5, 1, 3]]
    )
    assert.deepStrictEqual(debug.map((d) => d.view.session_id), ["a0", "a1", "b1", "b0"])
  })

  it("continues a partition's numbering after the Groups it already delivered (fully async late Groups)", () => {
    const late: Records.ScoredGroup = {
      seq: 9,
      size: 2,
      samples: [Samples.sample({ session_id: "c0" }), Samples.sample({ session_id: "c1" })],
      debug: []
    }
    assert.deepStrictEqual(
      Records.transferOrder([late], 4, 3).samples.map((s) => [s.session_id, s.rollout_id, s.group_index, s.index]),
      [["c0", 4, 3, 6], ["c1", 4, 3, 7]]
    )
  })

  it("gives every context of one Session (explicit exports) that Session's index", () => {
    const group: Records.ScoredGroup = {
      seq: 0,
      size: 2,
      samples: [
        Samples.sample({ session_id: "s0", export_name: "main" }),
        Samples.sample({ session_id: "s0", export_name: "searcher_0" }),
        Samples.sample({ session_id: "s1", export_name: "main" })
      ],
      debug: []
    }
    assert.deepStrictEqual(Records.transferOrder([group], 0).samples.map((s) => s.index), [0, 0, 1])
  })
})

describe("debugRecords", () => {
  it("writes the documented fields in order, summing aborts over the turns", () => {
    const [record] = Records.debugRecords(
      [Samples.sample({ session_id: "s0", reward: 1, label: "4" })],
      [facts("s0", [1, 2])],
      "eval_3"
    )
    assert.deepStrictEqual(Object.keys(record as object), [
      "rollout_id",
      "session_id",
      "group_index",
      "index",
      "export_name",
      "terminal_status",
      "turn_count",
      "leaf_state_hash",
      "state_hashes",
      "turns",
      "abort_count",
      "request_count",
      "generation_count",
      "weight_versions",
      "reward",
      "advantage",
      "response_length",
      "tokens",
      "prompt",
      "response",
      "label",
      "metadata",
      "status",
      "loss_mask",
      "rollout_log_probs",
      "turn_spans",
      "parser_failures",
      "parser_failures_by_request"
    ])
    assert.deepInclude(record, {
      rollout_id: "eval_3",
      session_id: "s0",
      leaf_state_hash: "leaf-s0",
      turn_count: 2,
      // Per-turn counts accumulate along the lineage (1, then 2): the total is the last one, not their sum.
      abort_count: 2,
      request_count: 5,
      generation_count: 4,
      reward: 1,
      label: "4"
    })
  })

  it("falls back to the sample's own status when a sample has no debug facts", () => {
    const [record] = Records.debugRecords([Samples.sample({ status: "truncated" })], [undefined], 0)
    assert.deepInclude(record, {
      terminal_status: "truncated",
      turn_count: 0,
      leaf_state_hash: null,
      abort_count: 0,
      request_count: 0
    })
  })
})

describe("primaryReward", () => {
  it("reads a number, a keyed object reward, and null for a missing reward or key", () => {
    assert.strictEqual(Records.primaryReward(Samples.sample({ reward: 0.5 }), undefined), 0.5)
    assert.strictEqual(Records.primaryReward(Samples.sample({ reward: { score: 1 } }), "score"), 1)
    assert.strictEqual(Records.primaryReward(Samples.sample({ reward: { score: 1 } }), "other"), null)
    assert.strictEqual(Records.primaryReward(Samples.sample({ reward: null }), undefined), null)
  })
})

describe("metric lines", () => {
  it("writes a step line as rollout_id, the Group counts, then the metrics", () => {
    assert.strictEqual(
      JSON.stringify(Records.stepMetricLine(2, { accepted: 4, dropped: 1, filtered: 0 }, { "rollout/x": 1 })),
      `{"rollout_id":2,"accepted":4,"dropped":1,"filtered":0,"metrics":{"rollout/x":1}}`
    )
  })

  it("writes an Eval line with the dataset and its dropped Groups", () => {
    assert.strictEqual(
      JSON.stringify(Records.evalMetricLine(0, "gsm", { "eval/gsm/r": 1 }, 2)),
      `{"rollout_id":0,"dataset":"gsm","metrics":{"eval/gsm/r":1},"dropped":2}`
    )
  })

  it("prefixes Eval metrics with eval/<dataset>/", () => {
    assert.deepStrictEqual(Records.evalMetrics("gsm", { reward: 0.5, passrate: 1 }), {
      "eval/gsm/reward": 0.5,
      "eval/gsm/passrate": 1
    })
  })
})

describe("log lines", () => {
  const quotedSample = Samples.sample({ prompt: "Q: 2+2?", response: " 4", label: "4", reward: { score: 1 } })

  it("quotes a step's first and last sample with label and reward", () => {
    assert.strictEqual(
      Records.firstSampleLine(quotedSample),
      `First rollout sample: ["Q: 2+2? 4"], label: "4", reward: {"score":1}`
    )
    assert.strictEqual(
      Records.finishLine(quotedSample),
      `Finish rollout: ["Q: 2+2? 4"], label: "4", reward: {"score":1}`
    )
  })

  it("cuts a long label to 100 characters", () => {
    const line = Records.finishLine(Samples.sample({ label: "x".repeat(200) }))
    assert.include(line, `label: "${"x".repeat(99)}, reward`)
  })

  it("quotes an Eval dataset's example", () => {
    assert.strictEqual(
      Records.evalExampleLine(quotedSample),
      `eval_rollout_single_dataset example data: ["Q: 2+2? 4"] reward={"score":1}`
    )
  })

  it("summarizes an Eval dataset's mean reward and pass rate, ignoring missing rewards in the mean", () => {
    assert.strictEqual(
      Records.evalSummaryLine("gsm", 2, 4, [1, 0, null, 1]),
      "eval gsm: rollout=2 samples=4 reward=0.6667 passrate=0.5000"
    )
    assert.strictEqual(
      Records.evalSummaryLine("gsm", 0, 0, []),
      "eval gsm: rollout=0 samples=0 reward=n/a passrate=n/a"
    )
  })
})
