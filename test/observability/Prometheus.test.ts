/**
 * `/metrics` on the real gateway with the embedded engine: a model request through the official `openai` client, then
 * a scrape of the Prometheus text, parsed line by line; a small rollout (in-process agents on the official client,
 * through the gateway) scraped on `--metrics-port` while and after it runs; with debug dumps, the time-breakdown
 * histograms (`relax_agentic_session_phase_seconds`) against the replay records of the dump. (Aborts are counted in
 * test/generation/Generation.engine.test.ts, where an engine aborts.)
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { PrometheusMetrics } from "effect/observability"
import * as Net from "node:net"
import { join, resolve } from "node:path"
import OpenAI from "openai"
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Replay from "../../layers/replay/Replay.ts"
import type * as Supervisor from "../../layers/session/Supervisor.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as Timeline from "../../src/replay/Timeline.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as Sessions from "../support/sessions.ts"
import * as TempDir from "../support/TempDir.ts"

interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/** Parse Prometheus text exposition: `name{a="x",b="y"} value` lines; comments skipped. */
const parse = (text: string): ReadonlyArray<Sample> =>
  text.split("\n").filter((line) => line.length > 0 && !line.startsWith("#")).map((line) => {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line)
    assert(match !== null, `not a Prometheus sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const pair of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]!] = pair[2]!
    }
    return { name: match[1]!, labels, value: Number(match[3]) }
  })

const newSession = Sessions.registeredSession({
  sampling: Sessions.sampling({ maxNewTokens: 256 }),
  maxContextLen: 4096
})

describe("Prometheus /metrics", () => {
  it.layer(GatewayStack.gatewayStack(), { timeout: 60_000 })((it) => {
    it.effect("counts a chat request by protocol and status, its tokens and its generation time", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const metricsUrl = `${new URL(baseUrl).origin}/metrics`
        // The counters are the process's: what this request adds is the change since this scrape.
        const before = yield* scrape(metricsUrl)
        const client = new OpenAI({ baseURL: baseUrl, apiKey: yield* newSession, maxRetries: 0 })
        const completion = yield* Effect.promise(() =>
          client.chat.completions.create({
            model: "policy",
            messages: [{ role: "user", content: "Please compute 2+2?" }],
            tools: [Policy.calcTool]
          })
        )
        const generated = completion.usage?.completion_tokens ?? 0
        expect(generated).toBeGreaterThan(0)
        const response = yield* Effect.promise(() => fetch(metricsUrl))
        expect(response.status).toBe(200)
        expect(response.headers.get("content-type")).toContain("text/plain")
        const after = parse(yield* Effect.promise(() => response.text()))
        const change = (name: string, labels: Readonly<Record<string, string>> = {}) =>
          (valueOf(after, name, labels) ?? Number.NaN) - (valueOf(before, name, labels) ?? 0)
        expect(change("relax_agentic_requests_total", { protocol: "chat", status: "200" })).toBe(1)
        expect(change("relax_agentic_tokens_generated_total")).toBe(generated)
        expect(change("relax_agentic_generation_seconds_count")).toBe(1)
        expect(change("relax_agentic_generation_seconds_bucket", { le: "+Inf" })).toBe(1)
      }))
  })
})

/** A free loopback port (bound and released: `--metrics-port` is then bound by the rollout). */
const freePort = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const server = Net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })
)

const scrape = (url: string) =>
  Effect.promise(() => fetch(url).then((response) => response.text())).pipe(Effect.map(parse))

/** The value of one series (name and labels), or undefined when it is not exported. */
const valueOf = (
  samples: ReadonlyArray<Sample>,
  name: string,
  labels: Readonly<Record<string, string>> = {}
): number | undefined =>
  samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value

const fixtures = resolve(import.meta.dirname, "../fixtures")

/** An in-process agent's conversation: its prompt as the first message, and a call asking the gateway with the calc tool (a failed request retried once). */
const conversation = (input: Parameters<Supervisor.InProcessAgent>[0]) => {
  const client = new OpenAI({ baseURL: input.baseUrl, apiKey: input.sessionId, maxRetries: 1 })
  const messages: Array<ChatCompletionMessageParam> = [{
    role: "user",
    content: String(input.input.messages?.[0]?.content ?? "")
  }]
  const ask = () =>
    Effect.promise(() => client.chat.completions.create({ model: "policy", messages, tools: [Policy.calcTool] }))
  return { messages, ask }
}

describe("Prometheus /metrics after a small rollout", () => {
  it.live(
    "exports every series: requests, latencies, lease waits, gauges, engine errors, parser failures, drift",
    () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const before = parse(yield* PrometheusMetrics.format())
        const metricsUrl = `http://127.0.0.1:${port}/metrics`
        let during: ReadonlyArray<Sample> = []
        let started = 0
        // Each agent: one question with the calc tool, its tool call answered (or a check), then a second turn. The
        // first agent scrapes mid-run; the second edits the committed text before echoing it (drift); a failed
        // request (the policy's engine error) is retried once.
        const agent: Supervisor.InProcessAgent = (input) =>
          Effect.gen(function*() {
            const position = started++
            const { messages, ask } = conversation(input)
            const first = (yield* ask()).choices[0]!.message
            if (position === 0) during = yield* scrape(metricsUrl)
            messages.push(position === 1 ? { ...first, content: `${first.content ?? ""} (edited)` } : first)
            for (const call of first.tool_calls ?? []) {
              messages.push({ role: "tool", tool_call_id: call.id, content: "4" })
            }
            if (first.tool_calls === undefined || first.tool_calls.length === 0) {
              messages.push({ role: "user", content: "Check." })
            }
            messages.push((yield* ask()).choices[0]!.message)
            const record = { name: "main", messages, tools: [Policy.calcTool], reward: 1 }
            return [JSON.parse(JSON.stringify(record))]
          })
        const step = yield* Effect.gen(function*() {
          const gateway = yield* Gateway.Gateway
          const result = yield* (yield* Rollout).runStep(0)
          // The gateway serves the same text as --metrics-port.
          const viaGateway = yield* scrape(`${new URL(gateway.baseUrl).origin}/metrics`)
          return { result, viaGateway, after: yield* scrape(metricsUrl) }
        }).pipe(Effect.provide(makeRollout({
          promptData: join(fixtures, "rollout/train.jsonl"),
          embeddedPolicy: join(fixtures, "observability/policy.mjs"),
          agenticToolCallParser: "qwen25",
          agenticReasoningParser: "qwen3",
          metricsPort: port,
          rolloutBatchSize: 3,
          nSamplesPerPrompt: 2,
          rolloutMaxResponseLen: 64,
          agentTimeout: 60
        }, { agent, telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant })))
        assert.strictEqual(step.result.groups.accepted, 3)
        // Metrics are process-wide: what this file's other test counted is subtracted.
        const change = (name: string, labels: Readonly<Record<string, string>> = {}) =>
          (valueOf(step.after, name, labels) ?? Number.NaN) - (valueOf(before, name, labels) ?? 0)
        // While an agent ran: it was an active Session and a running agent.
        expect(valueOf(during, "relax_agentic_sessions_active")).toBeGreaterThan(
          valueOf(before, "relax_agentic_sessions_active") ?? 0
        )
        expect(valueOf(during, "relax_agentic_agent_processes", { state: "running" })).toBeGreaterThanOrEqual(1)
        // Afterwards every gauge is back where it was (a synchronous rollout parks nothing).
        expect(change("relax_agentic_sessions_active")).toBe(0)
        expect(change("relax_agentic_sessions_parked")).toBe(0)
        expect(change("relax_agentic_agent_processes", { state: "running" })).toBe(0)
        expect(change("relax_agentic_agent_processes", { state: "starting" })).toBe(0)
        // 6 Sessions × 2 turns answered 200; the "3 + 5" Sessions' first generations failed once each (500, retried).
        expect(change("relax_agentic_requests_total", { protocol: "chat", status: "200" })).toBe(12)
        expect(change("relax_agentic_requests_total", { protocol: "chat", status: "500" })).toBe(2)
        expect(change("relax_agentic_engine_errors_total", { reason: "policy", operation: "generate" })).toBe(2)
        // The "10 + 7" Sessions called an unknown tool once each.
        expect(change("relax_agentic_parser_failures_total")).toBe(2)
        expect(step.result.metrics["rollout/parser_failures"]).toBe(2)
        // One agent edited the committed text: one drifted request, in the step's metrics too.
        expect(change("relax_agentic_drift_total", { cause: "text-changed" })).toBe(1)
        expect(step.result.metrics["rollout/drift/text_changed"]).toBe(1)
        // Latencies: one generation and one request time per committed response; a lease wait per engine attempt
        // (the 2 failed ones too).
        expect(change("relax_agentic_generation_seconds_count")).toBe(12)
        expect(change("relax_agentic_request_seconds_count")).toBe(12)
        expect(change("relax_agentic_lease_wait_seconds_count")).toBe(14)
        expect(change("relax_agentic_lease_wait_seconds_bucket", { le: "+Inf" })).toBe(14)
        const tokens = step.result.samples.reduce((a, s) => a + s.loss_mask.filter((m) => m === 1).length, 0)
        expect(change("relax_agentic_tokens_generated_total")).toBeGreaterThanOrEqual(tokens)
        // The gateway's /metrics is the same text.
        expect(valueOf(step.viaGateway, "relax_agentic_requests_total", { protocol: "chat", status: "200" })).toBe(
          valueOf(step.after, "relax_agentic_requests_total", { protocol: "chat", status: "200" })
        )
      }),
    { timeout: 60_000 }
  )
})

describe("Prometheus /metrics: the time breakdown (with debug dumps)", () => {
  it.live(
    "relax_agentic_session_phase_seconds: a histogram per phase holding each Session's time as its replay record says",
    () =>
      Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-phases-")
        const before = parse(yield* PrometheusMetrics.format())
        // Each agent: one question with the calc tool, its tool call answered, then a second turn.
        const agent: Supervisor.InProcessAgent = (input) =>
          Effect.gen(function*() {
            const { messages, ask } = conversation(input)
            const first = (yield* ask()).choices[0]!.message
            messages.push(first)
            for (const call of first.tool_calls ?? []) {
              messages.push({ role: "tool", tool_call_id: call.id, content: "4" })
            }
            if ((first.tool_calls ?? []).length === 0) {
              messages.push({ role: "user", content: "Check." })
            }
            messages.push((yield* ask()).choices[0]!.message)
            return [JSON.parse(JSON.stringify({ name: "main", messages, tools: [Policy.calcTool], reward: 1 }))]
          })
        const result = yield* Effect.gen(function*() {
          return yield* (yield* Rollout).runStep(0)
        }).pipe(Effect.provide(makeRollout({
          promptData: join(fixtures, "rollout/train.jsonl"),
          embeddedPolicy: join(fixtures, "observability/policy.mjs"),
          agenticToolCallParser: "qwen25",
          agenticReasoningParser: "qwen3",
          rolloutBatchSize: 2,
          nSamplesPerPrompt: 2,
          rolloutMaxResponseLen: 64,
          agentTimeout: 60,
          outputDir: dir,
          saveDebugRolloutData: join(dir, "debug_{rollout_id}.jsonl")
        }, { agent, telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant })))
        assert.strictEqual(result.groups.accepted, 2)
        const text = yield* PrometheusMetrics.format()
        const after = parse(text)
        const name = "relax_agentic_session_phase_seconds"
        expect(text).toContain(`# TYPE ${name} histogram`)
        // What each Session's replay record says it spent in each phase.
        const records = (yield* Replay.read(dir)).sessions.map((s) => s.record)
        expect(records.length).toBe(4)
        const totals = records.map(Timeline.totals)
        // The bucket bounds (Instruments.ts: 18 exponential boundaries): 10 ms doubling to 655.36 s, then +Inf.
        const bounds = [...Array.from({ length: 17 }, (_, i) => 0.01 * 2 ** i), Number.POSITIVE_INFINITY]
        const change = (metric: string, labels: Readonly<Record<string, string>>) =>
          (valueOf(after, metric, labels) ?? Number.NaN) - (valueOf(before, metric, labels) ?? 0)
        for (const phase of Timeline.phases) {
          const les = after.filter((s) => s.name === `${name}_bucket` && s.labels["phase"] === phase)
            .map((s) => Number(s.labels["le"]!.replace("+Inf", "Infinity")))
          expect(les, phase).toEqual(bounds)
          // One observation per Session, but reward: one per Group (its Sessions share it).
          const observed = phase === "reward" ? [totals[0]!.reward, totals[2]!.reward] : totals.map((t) => t[phase])
          expect(change(`${name}_count`, { phase }), phase).toBe(observed.length)
          expect(change(`${name}_sum`, { phase }), phase).toBeCloseTo(observed.reduce((a, b) => a + b, 0), 6)
          for (const le of bounds) {
            const inBucket = observed.filter((seconds) => seconds <= le).length
            const label = le === Number.POSITIVE_INFINITY ? "+Inf" : String(le)
            const series = after.find((s) =>
              s.name === `${name}_bucket` && s.labels["phase"] === phase && Number(s.labels["le"]) === le
            )?.labels["le"] ?? label
            expect(change(`${name}_bucket`, { phase, le: series }), `${phase} le=${label}`).toBe(inBucket)
          }
        }
        // The model phase is time the Sessions spent: something was generated.
        expect(change(`${name}_sum`, { phase: "model" })).toBeGreaterThan(0)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
