/**
 * Partial rollout and fully async across 5 steps of a seeded long-tail agent workload, under the TestClock (see
 * lifecycle.ts): no committed state or token is lost, parked requests resume from the right prefix, N aborts protect a
 * request, fully-async debt is carried and drained by the final backfill, the active-time budget pauses between steps,
 * capacity is never exceeded, and no agent is left running.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as Workload from "../support/Workload.ts"
import * as Lifecycle from "./lifecycle.ts"

const base: Omit<Lifecycle.SimOptions, "mode"> = {
  steps: 5,
  batch: 2,
  overSampling: 3,
  concurrency: 3,
  samplesPerPrompt: 2,
  trainSeconds: 120,
  agentTimeout: 3600,
  workload: Workload.longTail(11)
}

/** The part of a sample's `agentic_trace` these checks read. */
const Trace = Schema.Struct({
  turns: Schema.Array(Schema.Struct({
    rollout_id: Schema.Int,
    abort_count: Schema.Int,
    weight_versions: Schema.Array(Schema.String)
  }))
})

const turnsOf = (sample: TrainingSample.TrainingSample) =>
  Schema.decodeUnknownSync(Trace)(sample.metadata["agentic_trace"]).turns

/** Aborts of each turn's own request (the trace's counts accumulate along the lineage). */
const requestAborts = (sample: TrainingSample.TrainingSample): Array<number> => {
  let before = 0
  return turnsOf(sample).map((t) => {
    const own = t.abort_count - before
    before = t.abort_count
    return own
  })
}

const samplesOf = (report: Lifecycle.SimReport) => report.results.flatMap((r) => r.samples)

/**
 * Every response span of every sample equals what the engine generates uninterrupted from the same prefix with the
 * Session's seed: nothing of an aborted attempt was lost, duplicated or resumed from a wrong prefix.
 */
const assertUninterruptedTokens = (report: Lifecycle.SimReport) =>
  Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const engine = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
      ...EmbeddedEngine.EmbeddedEngine.instant,
      seed: 42,
      model: { eosProbability: 0 }
    })
    let spans = 0
    for (const sample of samplesOf(report)) {
      const promptLength = sample.tokens.length - sample.response_length
      const position = sample.index % report.options.samplesPerPrompt
      for (const [start, end] of sample.turn_spans) {
        const whole = yield* engine.generate(
          Lifecycle.turnRequest(sample, [start, end], 42 + position, `check-${sample.session_id}-${start}`)
        ).pipe(Effect.orDie)
        assert.deepStrictEqual(sample.tokens.slice(promptLength + start, promptLength + end), [...whole.outputIds])
        assert.deepStrictEqual(sample.rollout_log_probs.slice(start, end), [...whole.logprobs])
        spans++
      }
    }
    return spans
  })

/**
 * Every resumed attempt continued an aborted one: its input is the aborted attempt's input ++ partial ids, its budget
 * the rest of the aborted attempt's. Returns how many attempts resumed (token equality alone would also hold for a
 * request restarted from scratch with the same seed).
 */
const assertResumedFromPartial = (report: Lifecycle.SimReport): number => {
  const aborted = new Map<string, Array<Lifecycle.SimReport["attempts"][number]>>()
  for (const a of report.attempts) {
    if (!a.aborted) continue
    const key = [...a.inputIds, ...a.outputIds].join(",")
    aborted.set(key, [...(aborted.get(key) ?? []), a])
  }
  const resumed = report.attempts.filter((a) => a.resumedTokens > 0)
  for (const a of resumed) {
    const before = aborted.get(a.inputIds.join(",")) ?? []
    assert.isTrue(
      before.some((p) =>
        p.resumedTokens + p.outputIds.length === a.resumedTokens &&
        p.maxNewTokens - p.outputIds.length === a.maxNewTokens
      ),
      `an attempt resumed ${a.resumedTokens} tokens with max_new_tokens ${a.maxNewTokens}, but no aborted attempt ends at its prefix with that budget left`
    )
  }
  return resumed.length
}

const assertCommon = (report: Lifecycle.SimReport) => {
  const slots = report.options.concurrency * report.options.samplesPerPrompt
  assert.isAtMost(report.peakAgents, slots, "capacity exceeded")
  assert.strictEqual(report.agentsLeft, 0, "an agent is still running after the rollout's scope closed")
  assert.strictEqual(report.generationsLeft, 0, "a generation is still running after the rollout's scope closed")
  assert.isAbove(report.attempts.length, 0)
  assert.deepStrictEqual(report.sessions.filter((s) => s.outcome === "failed").map((s) => s.sessionId), [])
  // The workload never fails: a dropped Group would be a timeout or a lost request.
  assert.deepStrictEqual(report.results.map((r) => r.groups.dropped), report.results.map(() => 0))
  const exported = samplesOf(report)
  assert.strictEqual(new Set(exported.map((s) => s.session_id)).size, exported.length, "a Session was exported twice")
}

describe("synchronous steps on the same workload (the baseline)", () => {
  it.effect(
    "stops the over-sampled stragglers at every close (with a warning at startup) and retains nothing",
    () =>
      Effect.gen(function*() {
        const report = yield* Lifecycle.simulate({ ...base, mode: "synchronous" })
        assertCommon(report)
        assert.deepStrictEqual(report.results.map((r) => r.samples.length), [4, 4, 4, 4, 4])
        assert.isTrue(report.lines.some((l) =>
          l.includes(
            "--over-sampling-batch-size 3 is above --rollout-batch-size 2 without --partial-rollout or --fully-async"
          )
        ))
        const ends = report.lines.filter((l) => l.includes("event=accounting_end"))
        assert.isTrue(
          ends.every((l) => l.includes(" debt=0 resident_groups=0 interrupted_groups=0")),
          ends.join("\n")
        )
        assert.isAbove(report.sessions.filter((s) => s.outcome === "interrupted").length, 0)
        assert.isTrue(samplesOf(report).every((s) => requestAborts(s).every((n) => n === 0)))
        yield* assertUninterruptedTokens(report)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)),
    { timeout: 120_000 }
  )
})

describe("partial rollout across 5 steps (TestClock)", () => {
  it.effect(
    "parks straggling generations at every step boundary and resumes them to exactly the uninterrupted tokens",
    () =>
      Effect.gen(function*() {
        const report = yield* Lifecycle.simulate({ ...base, mode: "partial" })
        assertCommon(report)
        assert.deepStrictEqual(report.results.map((r) => r.groups.accepted), [2, 2, 2, 2, 2])
        assert.deepStrictEqual(report.results.map((r) => r.samples.length), [4, 4, 4, 4, 4])
        const ends = report.lines.filter((l) => l.includes("event=accounting_end"))
        // Stragglers were retained and counted at some boundary.
        assert.isTrue(
          ends.some((l) => / resident_groups=[1-9]/.test(l) && / interrupted_groups=[1-9]/.test(l)),
          ends.join("\n")
        )
        const aborted = samplesOf(report).filter((s) => requestAborts(s).some((n) => n > 0))
        assert.isAbove(aborted.length, 0, "no request was parked across a step boundary")
        // A parked request resumed after the training step ran on the new weights: mixed versions are visible.
        assert.isTrue(aborted.some((s) => new Set(s.weight_versions).size > 1))
        // Its response is recorded under the step that finished it.
        for (const s of aborted) assert.strictEqual(turnsOf(s).at(-1)?.rollout_id, s.rollout_id)
        assert.isAbove(yield* assertUninterruptedTokens(report), 20)
        assert.isAbove(assertResumedFromPartial(report), 0)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)),
    { timeout: 120_000 }
  )

  it.effect(
    "protects a request after --partial-rollout-max-aborted-count aborts: it is never aborted again",
    () =>
      Effect.gen(function*() {
        const report = yield* Lifecycle.simulate({ ...base, mode: "partial", maxAbortedCount: 1, trainSeconds: 30 })
        assertCommon(report)
        const perRequest = samplesOf(report).flatMap(requestAborts)
        assert.include(perRequest, 1)
        assert.isAtMost(Math.max(...perRequest), 1)
        yield* assertUninterruptedTokens(report)
        assert.isAbove(assertResumedFromPartial(report), 0)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)),
    { timeout: 120_000 }
  )

  it.effect(
    "pauses the active-time budget between steps: parked Sessions outlive --agent-timeout in wall time",
    () =>
      Effect.gen(function*() {
        // 15 minutes of training per step, a 10-minute budget: a Session kept across a boundary would time out if
        // its budget counted while parked.
        const report = yield* Lifecycle.simulate({ ...base, mode: "partial", trainSeconds: 900, agentTimeout: 600 })
        assertCommon(report)
        const exported = new Set(samplesOf(report).map((s) => s.session_id))
        // Exported Sessions that spanned a whole training pause (900 s > the 600 s budget) without timing out.
        const long = report.sessions.filter((s) => exported.has(s.sessionId) && s.endedAt - s.startedAt > 900)
        assert.isAbove(long.length, 0)
        // The control: the budget is enforced in this simulation. With 60 s, Sessions whose active time is longer time out.
        const control = yield* Lifecycle.simulate({ ...base, mode: "partial", trainSeconds: 900, agentTimeout: 60 })
        assert.isAbove(control.results.reduce((n, r) => n + r.groups.dropped, 0), 0)
        assert.isTrue(
          control.lines.some((l) => l.includes("Managed command agent timed out after 60.0 seconds")),
          control.lines.join("\n")
        )
      }),
    { timeout: 120_000 }
  )
})

describe("fully async across 5 steps and the final backfill (TestClock)", () => {
  it.effect(
    "closes steps with debt owed by interrupted Groups, fills the previous partition first, and drains it",
    () =>
      Effect.gen(function*() {
        const report = yield* Lifecycle.simulate({ ...base, mode: "fully-async" })
        assertCommon(report)
        assert.strictEqual(report.results.length, 6)
        const starts = report.lines.filter((l) => l.includes("event=accounting_start"))
        assert.deepStrictEqual(starts.map((l) => / final_backfill=(\w+)/.exec(l)?.[1]), [
          "False",
          "False",
          "False",
          "False",
          "False",
          "True"
        ])
        const ends = report.lines.filter((l) => l.includes("event=accounting_end"))
        const debts = ends.map((l) => Number(/ debt=(\d+)/.exec(l)?.[1]))
        const interrupted = ends.map((l) => Number(/ interrupted_groups=(\d+)/.exec(l)?.[1]))
        // Some step closed owing Groups, each time no more than the interrupted resident Groups; the backfill drained all.
        assert.isTrue(debts.slice(0, 5).some((d) => d > 0), ends.join("\n"))
        debts.forEach((d, i) => assert.isAtMost(d, interrupted[i]!))
        assert.strictEqual(debts[5], 0)
        // Every partition 0..4 got exactly --rollout-batch-size Groups, whichever step call delivered them.
        const perPartition = new Map<number, number>()
        for (const s of samplesOf(report)) perPartition.set(s.rollout_id, (perPartition.get(s.rollout_id) ?? 0) + 1)
        assert.deepStrictEqual([...perPartition.entries()].sort((a, b) => a[0] - b[0]), [
          [0, 4],
          [1, 4],
          [2, 4],
          [3, 4],
          [4, 4]
        ])
        // A partition paid over two step calls numbers its Groups and samples once: no (rollout_id, index) repeats.
        const keys = samplesOf(report).map((s) => `${s.rollout_id}/${s.group_index}/${s.index}`)
        assert.strictEqual(new Set(keys).size, keys.length, keys.join(" "))
        // A step call delivers the previous partition's Groups before its own.
        for (const r of report.results) {
          const ids = r.samples.map((s) => s.rollout_id)
          assert.deepStrictEqual(ids, [...ids].sort((a, b) => a - b))
        }
        yield* assertUninterruptedTokens(report)
        assert.isAbove(assertResumedFromPartial(report), 0)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)),
    { timeout: 120_000 }
  )
})
