/**
 * KV admission side by side (docs/sglang.md "KV scheduling"): one simulated step of long multi-turn Sessions through
 * the SGLang engine against the SGLang double with a KV pool (test/support/KvPool.ts: retraction on overflow,
 * recomputation, prefill time per token), with `--agentic-program-admission` off and on, at ~2× oversubscription and
 * with a pool large enough for every Session at once. Real HTTP and real time; it asserts nothing.
 *
 * **Details**
 * - A Session sends `turns` attempts; each prompt is its history (the first prompt, then every output and a fixed
 *   observation), each output exactly `maxNewTokens` tokens (no early end of turn).
 * - retractions / recomputed tokens: counted by the double's pool; step time: from the first attempt to the last
 *   answer; TTFT: from the moment an attempt is asked for (before any admission wait) to its first generated token.
 * - Each case runs off, on, on, off, and reports the means of the two runs of each (TTFT over both).
 */
import { Effect, Layer } from "effect"
import { performance } from "node:perf_hooks"
import * as AdmittedEngine from "../../layers/admission/AdmittedEngine.ts"
import * as Coordinator from "../../layers/admission/Coordinator.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as Harness from "./harness.ts"

interface Workload {
  readonly sessions: number
  readonly turns: number
  readonly firstPrompt: number
  readonly observation: number
  readonly maxNewTokens: number
}

interface Outcome {
  readonly retractions: number
  readonly recomputed: number
  readonly stepMs: number
  readonly ttftMs: ReadonlyArray<number>
  readonly metrics: Readonly<Record<string, number>>
}

/** Peak KV the workload holds if every Session runs its last turn at once. */
const peakDemand = (w: Workload): number =>
  w.sessions * (w.firstPrompt + (w.turns - 1) * (w.maxNewTokens + w.observation) + w.maxNewTokens)

const settings = (w: Workload): AdmissionOptions.AdmissionSettings => ({
  headroom: 0.9,
  pressureThreshold: 0.92,
  expectedDecodeCap: w.maxNewTokens,
  maxWaitMs: 30_000,
  scope: "train",
  ...AdmissionOptions.constants
})

/**
 * The pool's timing, shaped on an 8B model on one H100 (~3 TB/s): a decode step reads the weights (~5 ms) and every
 * held KV token (~0.13 ms per 1,000 tokens at 128 KiB each), and prefill runs at ~40,000 tokens a second.
 */
const poolTiming = { tickMs: 5, decodeMsPerKToken: 0.13, prefillTokensPerTick: 16_384, prefillMsPerKToken: 25 }

const runStep = (w: Workload, pool: number, admission: boolean, tag: string) =>
  Effect.scoped(Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const model = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
      ...EmbeddedEngine.EmbeddedEngine.instant,
      model: { eosProbability: 0 }
    })
    const server = yield* FakeSglang.make({
      engine: model,
      enableMetrics: true,
      contextLength: 1_000_000,
      kvPool: { maxTotalNumTokens: pool, ...poolTiming }
    })
    const sglang = yield* SglangEngine.make({ workerUrls: [server.url], healthCheck: false })
    let engine: Engine.EngineShape = sglang
    if (admission) {
      const coordinator = yield* Coordinator.makeLocal(settings(w), sglang.kvSnapshot!)
      engine = AdmittedEngine.make(sglang, coordinator, settings(w))
    }
    const askedAt = new Map<string, number>()
    const session = (index: number) =>
      Effect.gen(function*() {
        let history = w.firstPrompt
        for (let turn = 0; turn < w.turns; turn++) {
          const rid = `${tag}-s${String(index).padStart(4, "0")}-t${turn}`
          askedAt.set(rid, Date.now())
          const result = yield* engine.generate({
            inputIds: Array.from({ length: history }, (_, i) => 1000 + ((i * 31 + index) % 5000)),
            sampling: {
              maxNewTokens: w.maxNewTokens,
              temperature: 1,
              topP: 1,
              topK: -1,
              stop: [],
              stopTokenIds: []
            },
            rid,
            returnLogprob: false,
            sessionId: `${tag}-s${index}`,
            admission: { promptTokens: history, training: true }
          })
          history += result.outputIds.length + w.observation
        }
      })
    const started = performance.now()
    yield* Effect.forEach(Array.from({ length: w.sessions }, (_, i) => i), session, {
      concurrency: "unbounded",
      discard: true
    })
    const stepMs = performance.now() - started
    const kv = server.kv!
    const ttftMs = [...askedAt].flatMap(([rid, at]) => {
      const first = kv.firstTokenAt.get(rid)
      return first === undefined ? [] : [first - at]
    })
    return {
      retractions: kv.retractions,
      recomputed: kv.recomputedTokens,
      stepMs,
      ttftMs,
      metrics: yield* engine.takeStepMetrics
    } satisfies Outcome
  }))

/** Two runs as one: mean counts and step time, every TTFT. */
const mean = (a: Outcome, b: Outcome): Outcome => ({
  retractions: (a.retractions + b.retractions) / 2,
  recomputed: (a.recomputed + b.recomputed) / 2,
  stepMs: (a.stepMs + b.stepMs) / 2,
  ttftMs: [...a.ttftMs, ...b.ttftMs],
  metrics: Object.fromEntries(Object.keys(a.metrics).map((k) => [k, ((a.metrics[k] ?? 0) + (b.metrics[k] ?? 0)) / 2]))
})

const quantile = (values: ReadonlyArray<number>, q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
}

const row = (label: string, admission: boolean, o: Outcome, off: Outcome): Readonly<Record<string, string>> => ({
  case: label,
  admission: admission ? "on" : "off",
  retractions: String(o.retractions),
  "recomputed tokens": String(o.recomputed),
  "step wall time": Harness.formatMs(o.stepMs),
  "step vs off": admission ? Harness.formatRatio(off.stepMs / o.stepMs) : "—",
  "TTFT p50": Harness.formatMs(quantile(o.ttftMs, 0.5)),
  "TTFT p90": Harness.formatMs(quantile(o.ttftMs, 0.9)),
  "admitted / waited": admission
    ? `${o.metrics["agentic_kv/admission/admit"] ?? 0} / ${o.metrics["agentic_kv/admission/wait"] ?? 0}`
    : "—"
})

const run = async (options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const w: Workload = options.full
    ? { sessions: 64, turns: 4, firstPrompt: 1200, observation: 200, maxNewTokens: 256 }
    : { sessions: 32, turns: 3, firstPrompt: 1200, observation: 200, maxNewTokens: 256 }
  const demand = peakDemand(w)
  const tight = Math.round(demand / 2)
  const roomy = demand * 2
  const rows: Array<Readonly<Record<string, string>>> = []
  // Each case off, on, on, off: the order's drift (a loaded machine) falls on both sides.
  const pair = (pool: number, tag: string) =>
    Effect.gen(function*() {
      const off1 = yield* runStep(w, pool, false, `${tag}0`)
      const on1 = yield* runStep(w, pool, true, `${tag}1`)
      const on2 = yield* runStep(w, pool, true, `${tag}2`)
      const off2 = yield* runStep(w, pool, false, `${tag}3`)
      return { off: mean(off1, off2), on: mean(on1, on2) }
    })
  const outcomes = await Effect.runPromise(
    Effect.gen(function*() {
      const tightRuns = yield* pair(tight, "a")
      const roomyRuns = yield* pair(roomy, "b")
      return { tightOff: tightRuns.off, tightOn: tightRuns.on, roomyOff: roomyRuns.off, roomyOn: roomyRuns.on }
    }).pipe(Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer)))
  )
  const label = (pool: number) => `pool ${pool} (${(demand / pool).toFixed(1)}× demand)`
  rows.push(row(label(tight), false, outcomes.tightOff, outcomes.tightOff))
  rows.push(row(label(tight), true, outcomes.tightOn, outcomes.tightOff))
  rows.push(row(label(roomy), false, outcomes.roomyOff, outcomes.roomyOff))
  rows.push(row(label(roomy), true, outcomes.roomyOn, outcomes.roomyOff))
  const fewer = (
    off: number,
    on: number
  ) => (on === 0 ? (off === 0 ? "none either way" : `${off} → 0`) : `${(off / on).toFixed(1)}×`)
  return {
    title:
      `KV admission: ${w.sessions} Sessions × ${w.turns} turns (first prompt ${w.firstPrompt}, +${w.observation} ` +
      `observation, ${w.maxNewTokens} tokens out per turn; peak demand ${demand} KV tokens) on the SGLang double's ` +
      `KV pool (steps of ${poolTiming.tickMs} ms + ${poolTiming.decodeMsPerKToken} ms per 1,000 KV tokens held + ` +
      `${poolTiming.prefillMsPerKToken} ms per 1,000 prefilled), admission off vs on`,
    rows,
    notes: [
      `oversubscribed: retractions ${fewer(outcomes.tightOff.retractions, outcomes.tightOn.retractions)} fewer, ` +
      `recomputed tokens ${fewer(outcomes.tightOff.recomputed, outcomes.tightOn.recomputed)} fewer with admission`,
      "TTFT counts from the moment an attempt is asked for, so it includes the admission wait",
      "step vs off: > 1 means admission made the step faster; each row is the mean of two runs (off, on, on, off)"
    ]
  }
}

export const bench: Harness.Bench = { name: "admission", run }
