import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as Metrics from "../../src/credit/Metrics.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as Samples from "./samples.ts"

const metricsOf = (
  samples: ReadonlyArray<TrainingSample.TrainingSample>,
  options: Partial<Metrics.MetricsOptions> = {}
) => {
  const result = Metrics.step(samples, { logPassrate: false, groupSize: 1, ...options })
  if (Result.isFailure(result)) throw new Error(result.failure.message)
  return result.success
}

describe("statistics", () => {
  it("computes mean, median, max and min", () => {
    assert.deepStrictEqual(Metrics.statistics([3, 1, 2]), { mean: 2, median: 2, max: 3, min: 1 })
    assert.deepStrictEqual(Metrics.statistics([4, 1, 2, 3]), { mean: 2.5, median: 2.5, max: 4, min: 1 })
  })
})

describe("step metrics", () => {
  it("reports rollout/raw_reward as the mean primary reward of rows that carry one", () => {
    const metrics = metricsOf([
      Samples.sample({ reward: 1 }),
      Samples.sample({ reward: 0 }),
      Samples.sample({ reward: 0.5 }),
      Samples.sample({ reward: null })
    ])
    assert.strictEqual(metrics["rollout/raw_reward"], 0.5)
  })

  it("reports numeric helper fields of reward objects as rollout/<field>/{mean,median,max,min}", () => {
    const metrics = metricsOf([
      Samples.sample({ reward: { score: 1, length: 10, steps: [1, 2], note: "x", _private: 5, raw_reward: 9 } }),
      Samples.sample({ reward: { score: 0, length: 30, steps: [3] } })
    ], { rewardKey: "score" })
    assert.deepStrictEqual(metrics, {
      "rollout/raw_reward": 0.5,
      "rollout/length/mean": 20,
      "rollout/length/median": 20,
      "rollout/length/max": 30,
      "rollout/length/min": 10,
      "rollout/steps/mean": 2,
      "rollout/steps/median": 2,
      "rollout/steps/max": 3,
      "rollout/steps/min": 1
    })
  })

  it("reports top-level numeric metadata as <field>/{mean,median,max,min} without a rollout/ prefix", () => {
    const metrics = metricsOf([
      Samples.sample({ metadata: { task_success: 1, tool_calls: 4, role: "main", ok: true, _hidden: 1, index: 3 } }),
      Samples.sample({ metadata: { task_success: 0, tool_calls: 2, agentic_trace: { turns: [] }, rollout_turns: 2 } }),
      Samples.sample({ metadata: { tool_calls: 9 } })
    ])
    assert.deepStrictEqual(metrics, {
      "task_success/mean": 0.5,
      "task_success/median": 0.5,
      "task_success/max": 1,
      "task_success/min": 0,
      "tool_calls/mean": 5,
      "tool_calls/median": 4,
      "tool_calls/max": 9,
      "tool_calls/min": 2
    })
  })

  it("never lets a metadata metric overwrite a reward metric of the same name", () => {
    const metrics = metricsOf([Samples.sample({ reward: 1, metadata: { "rollout/raw_reward": 7 } })])
    assert.strictEqual(metrics["rollout/raw_reward"], 1)
    assert.strictEqual(metrics["rollout/raw_reward/mean"], 7)
  })

  it("fails on an object reward whose --reward-key is missing, naming the row", () => {
    const result = Metrics.step([Samples.sample({ session_id: "s4", reward: { acc: 1 } })], {
      rewardKey: "score",
      logPassrate: false,
      groupSize: 1
    })
    assert.isTrue(Result.isFailure(result))
    if (Result.isFailure(result)) {
      assert.include(result.failure.message, "Session s4")
      assert.include(result.failure.message, `--reward-key "score" is not in the reward object (keys present: acc)`)
    }
  })
})

describe("passrate", () => {
  const group = (groupIndex: number, rewards: ReadonlyArray<number>) =>
    rewards.map((reward, i) => Samples.sample({ group_index: groupIndex, session_id: `g${groupIndex}s${i}`, reward }))

  it("estimates pass@k as 1 − C(n−c, k) / C(n, k)", () => {
    assert.closeTo(Metrics.passAtK(4, 2, 1), 0.5, 1e-12)
    assert.closeTo(Metrics.passAtK(4, 2, 2), 5 / 6, 1e-12)
    assert.strictEqual(Metrics.passAtK(4, 2, 4), 1)
    assert.strictEqual(Metrics.passAtK(4, 0, 2), 0)
  })

  it("logs rollout/passrate/pass@k for k = 1, 2, 4, averaged over Groups, success = primary reward 1", () => {
    const metrics = metricsOf([...group(0, [1, 0, 1, 0]), ...group(1, [0, 0, 0.5, 0])], {
      logPassrate: true,
      groupSize: 4
    })
    assert.closeTo(metrics["rollout/passrate/pass@1"]!, 0.25, 1e-12)
    assert.closeTo(metrics["rollout/passrate/pass@2"]!, 5 / 12, 1e-12)
    assert.closeTo(metrics["rollout/passrate/pass@4"]!, 0.5, 1e-12)
    assert.notProperty(metrics, "rollout/passrate/pass@8")
  })

  it("counts one representative context per Session: the one that carries the reward", () => {
    const rows = [0, 1].flatMap((i) => [
      Samples.sample({ group_index: 0, session_id: `s${i}`, export_name: "main", reward: i === 0 ? 1 : 0 }),
      Samples.sample({ group_index: 0, session_id: `s${i}`, export_name: "searcher_0", reward: null }),
      Samples.sample({ group_index: 0, session_id: `s${i}`, export_name: "searcher_1", reward: null })
    ])
    const metrics = metricsOf(rows, { logPassrate: true, groupSize: 2 })
    assert.strictEqual(metrics["rollout/passrate/pass@1"], 0.5)
    assert.strictEqual(metrics["rollout/passrate/pass@2"], 1)
  })

  it("reads the primary value of object rewards through --reward-key", () => {
    const rows = [1, 0].map((score, i) =>
      Samples.sample({ group_index: 0, session_id: `s${i}`, reward: { score, len: 1 } })
    )
    const metrics = metricsOf(rows, { logPassrate: true, groupSize: 2, rewardKey: "score" })
    assert.strictEqual(metrics["rollout/passrate/pass@1"], 0.5)
  })

  it("is not logged without --log-passrate or for Groups of one Session", () => {
    assert.notProperty(metricsOf(group(0, [1, 0]), { groupSize: 2 }), "rollout/passrate/pass@1")
    assert.notProperty(metricsOf(group(0, [1]), { logPassrate: true, groupSize: 1 }), "rollout/passrate/pass@1")
  })
})
