import { assert, describe, it } from "@effect/vitest"
import * as RolloutStats from "../../src/rollout/RolloutStats.ts"
import * as Samples from "../credit/samples.ts"

describe("stopReasonBucket", () => {
  it("follows Relax's rules: rollout_stop_reason first, stripped exact match, env_error: prefix, other, unknown", () => {
    assert.strictEqual(RolloutStats.stopReasonBucket({ stop_reason: " completed " }), "completed")
    assert.strictEqual(
      RolloutStats.stopReasonBucket({ rollout_stop_reason: "max_turns", stop_reason: "completed" }),
      "max_turns"
    )
    assert.strictEqual(RolloutStats.stopReasonBucket({ stop_reason: "env_error: sandbox died" }), "env_error")
    assert.strictEqual(RolloutStats.stopReasonBucket({ stop_reason: "Completed" }), "other")
    assert.strictEqual(RolloutStats.stopReasonBucket({ stop_reason: "   " }), "unknown")
    assert.strictEqual(RolloutStats.stopReasonBucket({ stop_reason: 3 }), "unknown")
    assert.strictEqual(RolloutStats.stopReasonBucket({}), "unknown")
  })
})

describe("compute", () => {
  const turns = (pairs: ReadonlyArray<readonly [number, number]>) => ({
    agentic_trace: { turns: pairs.map(([cached, prompt]) => ({ cached_tokens: cached, prompt_tokens: prompt })) }
  })

  it("reports every stop-reason bucket, turn percentiles, truncation, length, cache, images and staleness", () => {
    const metrics = RolloutStats.compute([
      Samples.sample({
        rollout_id: 3,
        response_length: 2,
        metadata: { stop_reason: "completed", rollout_turns: 1, start_rollout_id: 3, ...turns([[0, 10]]) }
      }),
      Samples.sample({
        rollout_id: 3,
        response_length: 4,
        status: "truncated",
        multimodal_inputs: { images: ["a", "b"] },
        metadata: { stop_reason: "finish_length", rollout_turns: 3, start_rollout_id: 1, ...turns([[6, 10], [14, 20]]) }
      }),
      Samples.sample({ rollout_id: 3, response_length: 6, metadata: { rollout_turns: -2, start_rollout_id: 2 } })
    ], { staleness: true })
    assert.strictEqual(
      Object.keys(metrics).filter((k) => k.startsWith("stop_reason/")).length,
      RolloutStats.STOP_REASON_BUCKETS.length * 2
    )
    assert.strictEqual(metrics["stop_reason/completed/count"], 1)
    assert.strictEqual(metrics["stop_reason/finish_length/ratio"], 1 / 3)
    assert.strictEqual(metrics["stop_reason/unknown/count"], 1)
    assert.strictEqual(metrics["stop_reason/other/count"], 0)
    // rollout_turns -2 is not a valid count: it counts as 1.
    assert.strictEqual(metrics["num_turn/min"], 1)
    assert.strictEqual(metrics["num_turn/max"], 3)
    assert.strictEqual(metrics["num_turn/mean"], 5 / 3)
    assert.strictEqual(metrics["num_turn/p50"], 1)
    assert.strictEqual(metrics["num_turn/p90"], 1 + 2 * 0.8)
    assert.strictEqual(metrics["truncated_ratio"], 1 / 3)
    assert.strictEqual(metrics["response_len/mean"], 4)
    assert.strictEqual(metrics["prefix_cache_hit_rate"], 20 / 40)
    assert.strictEqual(metrics["avg_cached_tokens_per_sample"], 20 / 3)
    assert.strictEqual(metrics["image_count/max"], 2)
    assert.strictEqual(metrics["global_batch_size"], 3)
    assert.strictEqual(metrics["staleness/avg"], (0 + 2 + 1) / 3)
    assert.strictEqual(metrics["staleness/min"], 0)
    assert.strictEqual(metrics["staleness/max"], 2)
  })

  it("leaves out prefix-cache and staleness statistics when nothing reports them", () => {
    const metrics = RolloutStats.compute([Samples.sample({ metadata: { rollout_turns: 2 } })], { staleness: false })
    assert.isUndefined(metrics["prefix_cache_hit_rate"])
    assert.isUndefined(metrics["avg_cached_tokens_per_sample"])
    assert.isUndefined(metrics["staleness/avg"])
    assert.strictEqual(metrics["num_turn/p99"], 2)
    assert.deepStrictEqual(RolloutStats.compute([], { staleness: true }), {})
  })

  it("prefixes keys for a training step or an Eval dataset", () => {
    assert.deepStrictEqual(RolloutStats.withPrefix("rollout/", { truncated_ratio: 0.5 }), {
      "rollout/truncated_ratio": 0.5
    })
  })
})
