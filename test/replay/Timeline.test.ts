/**
 * Where a Session's time went (src/replay/Timeline.ts): the phases read off a replay record, their totals, the step
 * metrics, and the Chrome trace checked against the trace-event format.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Record from "../../src/replay/Record.ts"
import * as Timeline from "../../src/replay/Timeline.ts"

const attempt = (at: number, done: number, finish: Record.Finish = { type: "stop" }): Record.Attempt => ({
  at,
  done_at: done,
  rid: "r",
  n: 3,
  finish,
  weight_version: "0",
  prompt_tokens: 10,
  cached_tokens: 0
})

const request = (at: number, done: number, attempts: ReadonlyArray<Record.Attempt>): Record.Request => ({
  at,
  done_at: done,
  protocol: "chat",
  stream: false,
  model: "m",
  keep: 0,
  messages: [],
  stop: [],
  logprobs: false,
  rollout_ids: [0, 0],
  attempts
})

/** Launched at 1000; request 1 waits 500 ms for its lease, generates 200 ms, is parked 300 ms at a step's close and
 * resumed for 100 ms; the agent works 400 ms; request 2 waits 0 and generates 50 ms; its Group's Reward takes 20 ms. */
const record: Record.SessionRecord = {
  version: Record.version,
  generation: {
    tokenizer: null,
    tool_call_parser: null,
    reasoning_parser: null,
    strict_match: false,
    skip_special_tokens: false,
    allow_special_tokens: false,
    fail_unparsed_turns: false,
    apply_chat_template_kwargs: {}
  },
  mode: "train",
  sampling: { temperature: 1, top_p: 1, top_k: -1, max_new_tokens: 10, stop: [], stop_token_ids: [] },
  max_context_len: null,
  started_at: 1000,
  requests: [
    request(3000, 4100, [attempt(3500, 3700, { type: "abort" }), attempt(4000, 4100)]),
    request(4500, 4550, [attempt(4500, 4550)])
  ],
  reward: { at: 5000, done_at: 5020 }
}

/** The trace-event format's complete and metadata events (catapult's "Trace Event Format" document). */
const TraceFile = Schema.Struct({
  traceEvents: Schema.Array(Schema.Union([
    Schema.Struct({
      name: Schema.String,
      cat: Schema.String,
      ph: Schema.Literal("X"),
      ts: Schema.Number.check(Schema.isGreaterThanOrEqualTo(0)),
      dur: Schema.Number.check(Schema.isGreaterThanOrEqualTo(0)),
      pid: Schema.Int,
      tid: Schema.Int,
      args: Schema.Record(Schema.String, Schema.Json)
    }),
    Schema.Struct({
      name: Schema.Literals(["process_name", "thread_name"]),
      ph: Schema.Literal("M"),
      pid: Schema.Int,
      tid: Schema.optionalKey(Schema.Int),
      args: Schema.Struct({ name: Schema.String })
    })
  ])),
  displayTimeUnit: Schema.Literals(["ms", "ns"])
})

describe("Timeline", () => {
  it("reads the phases off a replay record", () => {
    assert.deepStrictEqual(Timeline.spans(record), [
      { phase: "agent_start", start: 1000, end: 3000 },
      { phase: "wait", start: 3000, end: 3500, request: 1 },
      { phase: "model", start: 3500, end: 3700, request: 1 },
      { phase: "parked", start: 3700, end: 4000, request: 1 },
      { phase: "model", start: 4000, end: 4100, request: 1 },
      { phase: "agent", start: 4100, end: 4500, request: 2 },
      { phase: "wait", start: 4500, end: 4500, request: 2 },
      { phase: "model", start: 4500, end: 4550, request: 2 },
      { phase: "reward", start: 5000, end: 5020 }
    ])
    const totals = Timeline.totals(record)
    const expected = { agent_start: 2, wait: 0.5, model: 0.35, parked: 0.3, agent: 0.4, reward: 0.02 }
    for (const phase of Timeline.phases) assert.closeTo(totals[phase], expected[phase], 1e-9, phase)
  })

  it("gives each phase's mean and p90 over a step's Sessions under perf/session/", () => {
    const fast: Record.SessionRecord = { ...record, started_at: 2000 }
    const metrics = Timeline.stepMetrics([record, fast, fast])
    assert.closeTo(metrics["perf/session/agent_start_s/mean"]!, (2 + 1 + 1) / 3, 1e-9)
    assert.closeTo(metrics["perf/session/agent_start_s/p90"]!, 1.8, 1e-9)
    assert.closeTo(metrics["perf/session/model_s/mean"]!, 0.35, 1e-9)
    assert.deepStrictEqual(Object.keys(metrics).length, Timeline.phases.length * 2)
    assert.deepStrictEqual(Timeline.stepMetrics([]), {})
  })

  it("writes a Chrome trace in the trace-event format: a process per Group, a thread per Session", () => {
    const trace = Timeline.chromeTrace([
      { step: "0", groupIndex: 0, sessionId: "a", record },
      { step: "0", groupIndex: 0, sessionId: "b", record: { ...record, started_at: 500 } },
      { step: "0", groupIndex: 1, sessionId: "c", record }
    ])
    const decoded = Schema.decodeUnknownSync(TraceFile)(JSON.parse(JSON.stringify(trace)))
    const meta = decoded.traceEvents.filter((e) => e.ph === "M")
    assert.deepStrictEqual(meta.map((e) => [e.name, e.pid, e.tid, e.args.name]), [
      ["process_name", 1, undefined, "step 0 · Group 0"],
      ["thread_name", 1, 1, "a"],
      ["thread_name", 1, 2, "b"],
      ["process_name", 2, undefined, "step 0 · Group 1"],
      ["thread_name", 2, 1, "c"]
    ])
    const complete = decoded.traceEvents.filter((e) => e.ph === "X")
    assert.strictEqual(complete.length, 3 * 9)
    // Microseconds from the earliest start (b's, at 500 ms): a's agent start begins 500 ms later and lasts 2 s.
    const aStart = complete.find((e) => e.tid === 1 && e.pid === 1 && e.name === "agent_start")!
    assert.strictEqual(aStart.ts, 500_000)
    assert.strictEqual(aStart.dur, 2_000_000)
  })
})
