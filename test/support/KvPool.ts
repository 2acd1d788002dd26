/**
 * The SGLang double's KV pool (test/support/FakeSglang.ts `kvPool`), modelled on SGLang's scheduler: a running
 * request holds KV for its prompt and the tokens it generated so far; when a decode step does not fit, requests are
 * **retracted** (their KV freed, back to the front of the waiting queue keeping their tokens) and recomputed when
 * they are admitted again (`schedule_batch.retract_decode`, ../shared/docs/reference/sglang-lora-metrics-streaming.md
 * §2.1). Counted: retractions, recomputed tokens, each request's first-token time.
 *
 * **Details**
 * Time runs in steps (one scheduler iteration, on a timer while anything is in the pool) of `tickMs`, plus
 * `prefillMsPerKToken` for every 1,000 tokens the step prefilled (a prefill holds the GPU, so recomputation slows
 * every running request), plus `decodeMsPerKToken` for every 1,000 KV tokens held (a decode step reads them all):
 * 1. waiting requests are admitted in order while their current length (prompt + generated) fits the free KV
 *    (SGLang admits optimistically: it reserves no room for the tokens still to come);
 * 2. prefill: at most `prefillTokensPerTick` prompt tokens are computed in the step, in admission order (a retracted
 *    request recomputes its prompt and its generated tokens: what retraction costs);
 * 3. decode: every prefilled request gets one token; when the pool cannot hold them all, requests are retracted
 *    first (fewest generated tokens, then the longest prompt: SGLang's default order) until the rest fit.
 * A request whose output is complete leaves with `onDone`. Prefix caching is not modelled.
 */
import * as PrometheusKv from "../../src/admission/PrometheusKv.ts"

export interface KvPoolOptions {
  /** `max_total_num_tokens`. */
  readonly maxTotalNumTokens: number
  /** One scheduler step. */
  readonly tickMs: number
  /** Prompt tokens one step can prefill. */
  readonly prefillTokensPerTick: number
  /** Extra step time per 1,000 prefilled tokens (default 0). */
  readonly prefillMsPerKToken?: number | undefined
  /** Extra step time per 1,000 KV tokens held (a decode step reads every running request's KV; default 0). */
  readonly decodeMsPerKToken?: number | undefined
}

interface Entry {
  readonly rid: string
  readonly prompt: number
  readonly output: number
  generated: number
  /** Tokens still to prefill; 0 once decoding. */
  prefillLeft: number
  running: boolean
  readonly onDone: () => void
}

/** The pool: see the module doc. */
export class KvPool {
  readonly options: KvPoolOptions
  retractions = 0
  /** Prompt and generated tokens of retracted requests, computed again when they return. */
  recomputedTokens = 0
  /** When each rid produced its first token (`Date.now()`). */
  readonly firstTokenAt = new Map<string, number>()
  /** The modelled GPU time of every step so far (ms): what the steps cost by the timing options, not the wall clock. */
  busyMs = 0
  /** Scheduler steps so far. */
  steps = 0
  /** Tokens decoded so far (one per decoding request a step): `decodedTokens / steps` is the mean batch. */
  decodedTokens = 0
  private readonly waiting: Array<Entry> = []
  private readonly running: Array<Entry> = []
  private readonly byRid = new Map<string, Entry>()
  private timer: ReturnType<typeof setTimeout> | undefined

  constructor(options: KvPoolOptions) {
    this.options = options
  }

  /** KV tokens held now (every running request's prompt and generated tokens). */
  get usedTokens(): number {
    let used = 0
    for (const e of this.running) used += e.prompt + e.generated
    return used
  }

  /** A request whose whole output (`output` tokens) is known enters the waiting queue. */
  add(rid: string, prompt: number, output: number, onDone: () => void): void {
    const entry: Entry = { rid, prompt, output, generated: 0, prefillLeft: prompt, running: false, onDone }
    this.byRid.set(rid, entry)
    this.waiting.push(entry)
    if (this.timer === undefined) this.schedule(this.options.tickMs)
  }

  /** Tokens `rid` generated so far (undefined: not in the pool). */
  progress(rid: string): number | undefined {
    return this.byRid.get(rid)?.generated
  }

  /** `rid` leaves (answered or aborted). */
  remove(rid: string): void {
    const entry = this.byRid.get(rid)
    if (entry === undefined) return
    this.byRid.delete(rid)
    const list = entry.running ? this.running : this.waiting
    list.splice(list.indexOf(entry), 1)
    this.idle()
  }

  /** Stop the timer (the server closes). */
  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }

  private schedule(delayMs: number): void {
    this.busyMs += delayMs
    this.timer = setTimeout(() => {
      this.timer = undefined
      const prefilled = this.tick()
      if (this.byRid.size > 0 && this.timer === undefined) {
        this.schedule(
          this.options.tickMs + (prefilled / 1000) * (this.options.prefillMsPerKToken ?? 0) +
            (this.usedTokens / 1000) * (this.options.decodeMsPerKToken ?? 0)
        )
      }
    }, delayMs)
  }

  /** One scheduler step; the tokens it prefilled. */
  tick(): number {
    const capacity = this.options.maxTotalNumTokens
    let used = this.usedTokens
    while (this.waiting.length > 0) {
      const next = this.waiting[0]!
      const length = next.prompt + next.generated
      if (used + length > capacity) break
      this.waiting.shift()
      next.running = true
      this.running.push(next)
      used += length
    }
    let budget = this.options.prefillTokensPerTick
    const prefillBudget = budget
    for (const e of this.running) {
      if (budget <= 0) break
      if (e.prefillLeft === 0) continue
      const done = Math.min(e.prefillLeft, budget)
      e.prefillLeft -= done
      budget -= done
    }
    const decoding = this.running.filter((e) => e.prefillLeft === 0)
    // Retract until every decoding request gets its next token's slot.
    decoding.sort((a, b) => a.generated - b.generated || b.prompt - a.prompt)
    while (decoding.length > 0 && used + decoding.length > capacity) {
      const victim = decoding.shift()!
      this.running.splice(this.running.indexOf(victim), 1)
      victim.running = false
      used -= victim.prompt + victim.generated
      this.retractions++
      this.recomputedTokens += victim.prompt + victim.generated
      victim.prefillLeft = victim.prompt + victim.generated
      this.waiting.unshift(victim)
    }
    const now = Date.now()
    this.steps++
    this.decodedTokens += decoding.length
    for (const e of decoding) {
      e.generated++
      if (!this.firstTokenAt.has(e.rid)) this.firstTokenAt.set(e.rid, now)
      if (e.generated >= e.output) {
        this.remove(e.rid)
        e.onDone()
      }
    }
    this.idle()
    return prefillBudget - budget
  }

  private idle(): void {
    if (this.byRid.size === 0) this.close()
  }
}

/** `GET /metrics` of a server with `--enable-metrics` (a server without a pool: a large, empty one). */
export const metricsText = (pool: KvPool | undefined): string => {
  const capacity = pool?.options.maxTotalNumTokens ?? 1_000_000
  const used = pool?.usedTokens ?? 0
  return PrometheusKv.render({ maxTotalNumTokens: capacity, usedTokens: used, usage: used / capacity })
}
