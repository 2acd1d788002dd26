/**
 * KV admission simulated on the TestClock: 200 long Sessions (4 turns each, prompts growing by each turn's output and
 * observation) on an embedded engine with a small KV pool (20,000 tokens, ~15× oversubscribed). With admission on the
 * pool never holds more than the ceiling (headroom × pool), every Session finishes, every attempt waited its turn in
 * the ledger (admitted, none bypassed), and the ledger is back at zero; with admission off the same Sessions hold
 * many times the pool at once (what SGLang would retract).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as Admission from "../../layers/admission/Admission.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"

const pool = 20_000
const sessions = 200
const turns = 4
const maxNewTokens = 200

const settings: AdmissionOptions.AdmissionSettings = {
  headroom: 0.9,
  pressureThreshold: 0.92,
  expectedDecodeCap: maxNewTokens,
  // Long enough that no attempt ages out: every one goes through the ledger.
  maxWaitMs: 3_600_000,
  scope: "train",
  ...AdmissionOptions.constants
}

/** One Session: `turns` attempts, each prompt its history (the previous prompt, output and a 100-token observation). */
const session = (engine: Engine.EngineShape, index: number) =>
  Effect.gen(function*() {
    let history = 400 + (index % 7) * 50
    for (let turn = 0; turn < turns; turn++) {
      const result = yield* engine.generate({
        inputIds: Array.from({ length: history }, (_, i) => 1000 + ((i * 31 + index) % 5000)),
        sampling: {
          maxNewTokens,
          temperature: 1,
          topP: 1,
          topK: -1,
          stop: [],
          stopTokenIds: [],
          seed: index * 10 + turn
        },
        rid: `s${index}-t${turn}`,
        returnLogprob: false,
        sessionId: `s${index}`,
        admission: { promptTokens: history, training: true }
      })
      history += result.outputIds.length + 100
    }
  })

/** Run every Session to its end on the TestClock; the peak KV the engine held (sampled every 100 ms). */
const run = (admission: boolean) =>
  Effect.gen(function*() {
    const inner = EmbeddedEngine.EmbeddedEngine.layer({
      kvTokens: pool,
      prefillTokensPerSecond: 0,
      decodeTokensPerSecond: 50,
      // No early end of turn: every output is its whole budget, so the pool is really oversubscribed.
      model: { eosProbability: 0 }
    })
    const layer = (admission ? Admission.around(inner, settings) : inner).pipe(
      Layer.provideMerge(Tokenizer.Tokenizer.layer)
    )
    return yield* Effect.gen(function*() {
      const engine = yield* Engine.Engine
      let peak = 0
      const sampler = yield* Effect.forkChild(Effect.forever(Effect.gen(function*() {
        const snapshot = yield* engine.kvSnapshot!
        peak = Math.max(peak, (snapshot.workers[0]?.usage ?? 0) * pool)
        yield* Effect.sleep("100 millis")
      })))
      const all = yield* Effect.forkChild(
        Effect.forEach(Array.from({ length: sessions }, (_, i) => i), (i) => session(engine, i), {
          concurrency: "unbounded",
          discard: true
        })
      )
      let simulated = 0
      while (all.pollUnsafe() === undefined && simulated < 4 * 3600) {
        yield* TestClock.adjust("10 seconds")
        simulated += 10
      }
      yield* Fiber.join(all)
      yield* Fiber.interrupt(sampler)
      return { peak, simulated, metrics: yield* engine.takeStepMetrics }
    }).pipe(Effect.provide(layer))
  })

describe("KV admission, simulated", () => {
  it.effect(
    "keeps 200 long Sessions within a small pool, with no leak; without it they overflow it",
    () =>
      Effect.gen(function*() {
        const on = yield* run(true)
        const ceiling = Math.floor(pool * settings.headroom)
        assert.isAtMost(on.peak, ceiling, "never more KV than the ceiling")
        assert.isAbove(on.peak, ceiling * 0.5, "the pool is used")
        assert.strictEqual(on.metrics["agentic_kv/admission/admit"], sessions * turns)
        assert.isAbove(on.metrics["agentic_kv/admission/wait"] ?? 0, sessions)
        assert.isUndefined(on.metrics["agentic_kv/admission/bypass"])
        assert.strictEqual(on.metrics["agentic_kv/budget/reserved"], 0)
        assert.strictEqual(on.metrics["agentic_kv/budget/lease_count"], 0)
        assert.strictEqual(on.metrics["agentic_kv/admission/waiting"], 0)
        const off = yield* run(false)
        assert.isAbove(off.peak, pool * 5, "without admission the Sessions hold many times the pool")
        assert.isUndefined(off.metrics["agentic_kv/admission/admit"])
      }),
    { timeout: 240_000 }
  )
})
