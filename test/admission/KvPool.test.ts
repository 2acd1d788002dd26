/**
 * The SGLang double's KV pool, and reading it as admission does: stepped by hand, an overflowing decode retracts the
 * request with the fewest generated tokens, which is recomputed (counted) when it returns; `/metrics` serves the
 * gauges SGLang serves with `--enable-metrics` (parsed back by src/admission/PrometheusKv.ts, TP ranks by max), and the
 * SGLang engine's KV read of a server without them fails as `metrics-disabled`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as PrometheusKv from "../../src/admission/PrometheusKv.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as KvPool from "../support/KvPool.ts"

describe("the double's KV pool", () => {
  it("retracts on overflow and recomputes the retracted request later", () => {
    // No timer: the test steps the pool (a tick of 1 hour never fires).
    const pool = new KvPool.KvPool({ maxTotalNumTokens: 30, tickMs: 3_600_000, prefillTokensPerTick: 100 })
    const done: Array<string> = []
    pool.add("a", 10, 8, () => done.push("a"))
    pool.add("b", 12, 8, () => done.push("b"))
    pool.tick()
    assert.strictEqual(pool.usedTokens, 24, "both admitted, prefilled and one token each")
    for (let i = 0; i < 3; i++) pool.tick()
    // 10 + 4 + 12 + 4 = 30 held: the next decode step needs two slots, so one request is retracted.
    pool.tick()
    assert.strictEqual(pool.retractions, 1)
    assert.strictEqual(pool.recomputedTokens, 16, "b's prompt (12) and its 4 tokens (fewest generated, longer prompt)")
    for (let i = 0; i < 40 && done.length < 2; i++) pool.tick()
    assert.deepStrictEqual(done, ["a", "b"])
    assert.strictEqual(pool.usedTokens, 0)
    pool.close()
  })

  it("parses Prometheus text as Relax does", () => {
    assert.isUndefined(PrometheusKv.parse("# nothing\nsglang:num_running_reqs 3\n"))
    const text = [
      "# TYPE sglang:max_total_num_tokens gauge",
      "sglang:max_total_num_tokens{tp_rank=\"0\"} 1000",
      "sglang:max_total_num_tokens{tp_rank=\"1\"} 1000",
      "sglang:num_used_tokens{tp_rank=\"0\"} 250",
      "sglang:num_used_tokens{tp_rank=\"1\"} 400",
      "sglang:token_usage 0"
    ].join("\n")
    assert.deepStrictEqual(PrometheusKv.parse(text), { maxTotalNumTokens: 1000, usedTokens: 400, usage: 0.4 })
    assert.deepStrictEqual(
      PrometheusKv.parse(PrometheusKv.render({ maxTotalNumTokens: 10, usedTokens: 5, usage: 0.5 })),
      {
        maxTotalNumTokens: 10,
        usedTokens: 5,
        usage: 0.5
      }
    )
  })

  it.effect("is read through the SGLang engine's /metrics; a server without the gauges is metrics-disabled", () =>
    Effect.scoped(Effect.gen(function*() {
      const withMetrics = yield* FakeSglang.make({
        enableMetrics: true,
        kvPool: { maxTotalNumTokens: 4096, tickMs: 10, prefillTokensPerTick: 1000 }
      })
      const engine = yield* SglangEngine.make({ workerUrls: [withMetrics.url], healthCheck: false })
      const snapshot = yield* engine.kvSnapshot!
      assert.deepStrictEqual(snapshot.workers, [{
        id: withMetrics.url,
        healthy: true,
        maxTotalNumTokens: 4096,
        usage: 0
      }])
      const without = yield* FakeSglang.make({})
      const bare = yield* SglangEngine.make({ workerUrls: [without.url], healthCheck: false })
      const error = yield* Effect.flip(bare.kvSnapshot!)
      assert.strictEqual(error.reason, "metrics-disabled")
      assert.include(error.message, "--enable-metrics")
      assert.include(error.message, without.url)
    })))
})
