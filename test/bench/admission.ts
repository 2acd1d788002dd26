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
 * - `ADMISSION_ROUNDS` (default 5) rounds; in each, every mode of a case runs back to back (off, on with Relax's
 *   defaults, and at 2× also on with headroom 1.0), the order rotating from round to round. Each figure is reported as
 *   the median and the range of its runs, and each ratio as the median and range of its rounds' off ÷ on.
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
  /** The pool's modelled GPU time (test/support/KvPool.ts `busyMs`): the step's cost without the machine's noise. */
  readonly busyMs: number
  /** Mean requests decoding per pool step. */
  readonly meanBatch: number
  readonly ttftMs: ReadonlyArray<number>
  readonly metrics: Readonly<Record<string, number>>
}

/** Peak KV the workload holds if every Session runs its last turn at once. */
const peakDemand = (w: Workload): number =>
  w.sessions * (w.firstPrompt + (w.turns - 1) * (w.maxNewTokens + w.observation) + w.maxNewTokens)

/** How a run admits: not at all, or with Relax's defaults at `headroom`. */
interface Mode {
  readonly label: string
  readonly headroom?: number
}

const off: Mode = { label: "off" }
const on: Mode = { label: "on", headroom: 0.9 }
/** Reservations may fill the whole pool; the pressure guard (0.92, on measured usage) is what holds attempts back. */
const onFull: Mode = { label: "on, headroom 1.0", headroom: 1 }

const settings = (w: Workload, headroom: number): AdmissionOptions.AdmissionSettings => ({
  headroom,
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

const runStep = (w: Workload, pool: number, mode: Mode, tag: string) =>
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
    if (mode.headroom !== undefined) {
      const coordinator = yield* Coordinator.makeLocal(settings(w, mode.headroom), sglang.kvSnapshot!)
      engine = AdmittedEngine.make(sglang, coordinator, settings(w, mode.headroom))
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
      busyMs: kv.busyMs,
      meanBatch: kv.steps === 0 ? 0 : kv.decodedTokens / kv.steps,
      ttftMs,
      metrics: yield* engine.takeStepMetrics
    } satisfies Outcome
  }))

const quantile = (values: ReadonlyArray<number>, q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
}

/** `median (min–max)` of `values` formatted by `format`. */
const spread = (values: ReadonlyArray<number>, format: (n: number) => string): string =>
  `${format(Harness.median(values))} (${format(Math.min(...values))}–${format(Math.max(...values))})`

const count = (n: number): string => (Number.isInteger(n) ? String(n) : n.toFixed(1))

/** The runs of one case: each mode's run of every round, in round order. */
type Rounds = ReadonlyMap<Mode, ReadonlyArray<Outcome>>

const row = (label: string, mode: Mode, rounds: Rounds): Readonly<Record<string, string>> => {
  const own = rounds.get(mode)!
  const offRuns = rounds.get(off)!
  const admits = mode.headroom !== undefined
  // Each round's ratio (off ÷ this mode): a round's runs ran back to back, so the machine's drift cancels in it.
  const ratio = (of: (o: Outcome) => number) =>
    admits ? spread(offRuns.map((o, i) => of(o) / of(own[i]!)), Harness.formatRatio) : "—"
  return {
    case: label,
    admission: mode.label,
    retractions: spread(own.map((o) => o.retractions), count),
    "recomputed tokens": spread(own.map((o) => o.recomputed), count),
    "step wall time": spread(own.map((o) => o.stepMs), Harness.formatMs),
    "wall vs off": ratio((o) => o.stepMs),
    "pool busy (modelled GPU) time": spread(own.map((o) => o.busyMs), Harness.formatMs),
    "busy vs off": ratio((o) => o.busyMs),
    "mean batch": spread(own.map((o) => o.meanBatch), (n) => n.toFixed(1)),
    "TTFT p50 / p90": `${Harness.formatMs(quantile(own.flatMap((o) => o.ttftMs), 0.5))} / ${
      Harness.formatMs(quantile(own.flatMap((o) => o.ttftMs), 0.9))
    }`,
    "admitted / waited": admits
      ? `${Harness.median(own.map((o) => o.metrics["agentic_kv/admission/admit"] ?? 0))} / ${
        Harness.median(own.map((o) => o.metrics["agentic_kv/admission/wait"] ?? 0))
      }`
      : "—"
  }
}

/** Rounds of runs (`ADMISSION_ROUNDS`, default 5). */
const roundCount = (): number => {
  const asked = Number(process.env.ADMISSION_ROUNDS ?? "5")
  return Number.isInteger(asked) && asked > 0 ? asked : 5
}

const run = async (options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const w: Workload = options.full
    ? { sessions: 64, turns: 4, firstPrompt: 1200, observation: 200, maxNewTokens: 256 }
    : { sessions: 32, turns: 3, firstPrompt: 1200, observation: 200, maxNewTokens: 256 }
  const demand = peakDemand(w)
  const cases = [
    { name: "tight", pool: Math.round(demand / 2), modes: [off, on, onFull] },
    { name: "roomy", pool: demand * 2, modes: [off, on] }
  ] as const
  const rounds = roundCount()
  // Every mode of a case back to back, the order rotating from round to round, and the cases interleaved: the
  // machine's drift (a loaded neighbour) falls on every side of each ratio.
  const outcomes = await Effect.runPromise(
    Effect.gen(function*() {
      const runs = new Map(cases.map((c) => [c.name, new Map(c.modes.map((m) => [m, [] as Array<Outcome>]))]))
      for (let i = 0; i < rounds; i++) {
        for (const c of cases) {
          for (let k = 0; k < c.modes.length; k++) {
            const mode = c.modes[(i + k) % c.modes.length]!
            const outcome = yield* runStep(w, c.pool, mode, `${c.name}${i}${k}`)
            runs.get(c.name)!.get(mode)!.push(outcome)
          }
        }
      }
      return runs
    }).pipe(Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer)))
  )
  const label = (pool: number) => `pool ${pool} (${(demand / pool).toFixed(1)}× demand)`
  const rows = cases.flatMap((c) => c.modes.map((mode) => row(label(c.pool), mode, outcomes.get(c.name)!)))
  const tight = outcomes.get("tight")!
  const total = (mode: Mode, of: (o: Outcome) => number) => tight.get(mode)!.reduce((sum, o) => sum + of(o), 0)
  const fewer = (what: string, of: (o: Outcome) => number) => {
    const before = total(off, of)
    const after = total(on, of)
    const times = after === 0
      ? (before === 0 ? "none either way" : "none with admission")
      : `${(before / after).toFixed(1)}× fewer`
    return `${what} ${before} → ${after} (${times})`
  }
  return {
    title:
      `KV admission: ${w.sessions} Sessions × ${w.turns} turns (first prompt ${w.firstPrompt}, +${w.observation} ` +
      `observation, ${w.maxNewTokens} tokens out per turn; peak demand ${demand} KV tokens) on the SGLang double's ` +
      `KV pool (steps of ${poolTiming.tickMs} ms + ${poolTiming.decodeMsPerKToken} ms per 1,000 KV tokens held + ` +
      `${poolTiming.prefillMsPerKToken} ms per 1,000 prefilled), admission off vs on, ${rounds} rounds`,
    rows,
    notes: [
      `oversubscribed, the ${rounds} rounds together, admission off → on: ` +
      `${fewer("retractions", (o) => o.retractions)}, ${fewer("recomputed tokens", (o) => o.recomputed)}`,
      "each cell: the median run (the lowest–the highest); vs off: each round's off ÷ this mode (> 1: admission made " +
      "the step faster), their median and range",
      "pool busy time: the GPU time the double's pool modelled for the step's scheduler steps (its timing, not the " +
      "machine's), so it is free of the shared machine's noise; it leaves out the moments the pool is empty (nothing " +
      "sent to it), which wall time counts with the HTTP, the gateway and the timers",
      "mean batch: requests decoding per pool step; TTFT counts from the moment an attempt is asked for, so it " +
      "includes the admission wait",
      `on: Relax's defaults (headroom 0.9, pressure threshold 0.92, decode cap ${w.maxNewTokens} = the tokens out); ` +
      "on, headroom 1.0: reservations may fill the pool and the pressure guard on the measured usage holds attempts back"
    ]
  }
}

export const bench: Harness.Bench = { name: "admission", run }
