/**
 * OTLP export: a loopback OTLP/HTTP receiver (node:http on 127.0.0.1, port 0) collects what Effect's exporter sends
 * while the real gateway with the embedded engine answers one chat request (one trace), and while a small rollout
 * with in-process agents (on the official client, through the gateway) runs a step: the step and Session spans, the
 * requests' links to their Sessions, and the metrics.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import OpenAI from "openai"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as OtlpExport from "../../layers/observability/OtlpExport.ts"
import type * as Supervisor from "../../layers/session/Supervisor.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as Sessions from "../support/sessions.ts"

interface Span {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly links?: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
  readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: { readonly stringValue?: string } }>
}

interface MetricsBody {
  readonly resourceMetrics: ReadonlyArray<
    { readonly scopeMetrics: ReadonlyArray<{ readonly metrics: ReadonlyArray<{ readonly name: string }> }> }
  >
}

interface TracesBody {
  readonly resourceSpans: ReadonlyArray<{ readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<Span> }> }>
}

/** A loopback OTLP/HTTP receiver that keeps every span posted to `/v1/traces` and metric name to `/v1/metrics`. */
const receiver = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ server: http.Server; spans: Array<Span>; metrics: Set<string>; url: string }>((resolve) => {
      const spans: Array<Span> = []
      const metrics = new Set<string>()
      const server = http.createServer((request, response) => {
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        request.on("end", () => {
          if (request.url === "/v1/traces") {
            const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as TracesBody
            for (const resource of body.resourceSpans) {
              for (const scope of resource.scopeSpans) spans.push(...scope.spans)
            }
          }
          if (request.url === "/v1/metrics") {
            const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as MetricsBody
            for (const resource of body.resourceMetrics) {
              for (const scope of resource.scopeMetrics) for (const metric of scope.metrics) metrics.add(metric.name)
            }
          }
          response.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resolve({ server, spans, metrics, url: `http://127.0.0.1:${port}` })
      })
    })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const newSession = Sessions.registeredSession({
  sampling: Sessions.sampling({ maxNewTokens: 256 }),
  maxContextLen: 4096
})

describe("OTLP export", () => {
  it("reads the endpoint from the flag, else OTEL_EXPORTER_OTLP_ENDPOINT", () => {
    assert.strictEqual(OtlpExport.endpointOf("http://127.0.0.1:4318/", {}), "http://127.0.0.1:4318")
    assert.strictEqual(
      OtlpExport.endpointOf(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318" }),
      "http://h:4318"
    )
    assert.isUndefined(OtlpExport.endpointOf(undefined, {}))
  })

  it.live(
    "one chat request is one trace: Gateway.handle with Generation.generate under it",
    () =>
      Effect.gen(function*() {
        const { spans, url } = yield* receiver
        yield* Effect.scoped(
          Effect.gen(function*() {
            const { baseUrl } = yield* Gateway.Gateway
            const client = new OpenAI({ baseURL: baseUrl, apiKey: yield* newSession, maxRetries: 0 })
            yield* Effect.promise(() =>
              client.chat.completions.create({
                model: "policy",
                messages: [{ role: "user", content: "Please compute 2+2?" }]
              })
            )
          }).pipe(Effect.provide(Layer.provideMerge(GatewayStack.gatewayStack(), OtlpExport.layer(url))))
        )
        const handle = spans.find((s) => s.name === "Gateway.handle")
        assert(handle !== undefined, `no Gateway.handle span among ${spans.map((s) => s.name).join(", ")}`)
        const generate = spans.find((s) => s.name === "Generation.generate")
        assert(generate !== undefined)
        expect(generate.traceId).toBe(handle.traceId)
        const inTrace = spans.filter((s) => s.traceId === handle.traceId)
        const byId = new Map(inTrace.map((s) => [s.spanId, s]))
        // Every span of the request's trace descends from Gateway.handle.
        for (const span of inTrace) {
          let cursor: Span | undefined = span
          while (cursor !== undefined && cursor.spanId !== handle.spanId) {
            cursor = cursor.parentSpanId === undefined ? undefined : byId.get(cursor.parentSpanId)
          }
          expect(cursor?.spanId, `${span.name} is not under Gateway.handle`).toBe(handle.spanId)
        }
        expect(inTrace.length).toBeGreaterThan(2)
      }),
    { timeout: 60_000 }
  )
})

describe("OTLP export of a rollout", () => {
  it.live(
    "a step and each Session are spans; a model request's trace links to its Session; metrics arrive",
    () =>
      Effect.gen(function*() {
        const { metrics, spans, url } = yield* receiver
        const agent: Supervisor.InProcessAgent = (input) =>
          Effect.gen(function*() {
            const client = new OpenAI({ baseURL: input.baseUrl, apiKey: input.sessionId, maxRetries: 0 })
            yield* Effect.promise(() =>
              client.chat.completions.create({ model: "policy", messages: [{ role: "user", content: "Hello?" }] })
            )
            return { reward: 1 }
          })
        yield* Effect.gen(function*() {
          yield* (yield* Rollout).runStep(0)
        }).pipe(Effect.provide(makeRollout({
          promptData: join(import.meta.dirname, "../fixtures/rollout/train.jsonl"),
          embeddedPolicy: join(import.meta.dirname, "../fixtures/rollout/policy.mjs"),
          otlpEndpoint: url,
          rolloutBatchSize: 1,
          nSamplesPerPrompt: 2,
          rolloutMaxResponseLen: 32
        }, { agent, telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant })))
        const byId = new Map(spans.map((s) => [s.spanId, s]))
        const descendsFrom = (span: Span, ancestor: Span): boolean => {
          let cursor: Span | undefined = span
          while (cursor !== undefined && cursor.spanId !== ancestor.spanId) {
            cursor = cursor.parentSpanId === undefined ? undefined : byId.get(cursor.parentSpanId)
          }
          return cursor !== undefined
        }
        // The step is a span, the root of its trace, with every Session's span under it.
        const step = spans.find((s) => s.name === "Rollout.runStep")
        assert(step !== undefined, `no Rollout.runStep among ${spans.map((s) => s.name).join(", ")}`)
        expect(step.parentSpanId).toBeUndefined()
        const sessions = spans.filter((s) => s.name === "SessionRunner.session")
        expect(sessions).toHaveLength(2)
        for (const session of sessions) {
          expect(session.traceId).toBe(step.traceId)
          expect(descendsFrom(session, step)).toBe(true)
          expect(session.attributes?.some((a) => a.key === "sessionId")).toBe(true)
        }
        // Each model request is a trace of its own (root Gateway.handle), linked to its own Session's span.
        const requests = spans.filter((s) => s.name === "Gateway.handle")
        expect(requests).toHaveLength(2)
        const linked = requests.map((request) => {
          expect(request.parentSpanId).toBeUndefined()
          expect(request.traceId).not.toBe(step.traceId)
          const link = request.links?.[0]
          assert(link !== undefined, "a request's root span has no link")
          const session = sessions.find((s) => s.spanId === link.spanId)
          assert(session !== undefined, "a request links to no Session span")
          expect(link.traceId).toBe(session.traceId)
          return session.spanId
        })
        expect(new Set(linked).size).toBe(2)
        // The metrics reach /v1/metrics too (flushed when the rollout closes).
        for (
          const name of [
            "relax_agentic_requests_total",
            "relax_agentic_lease_wait_seconds",
            "relax_agentic_sessions_active"
          ]
        ) {
          expect(metrics.has(name), `${name} not among ${[...metrics].join(", ")}`).toBe(true)
        }
      }),
    { timeout: 60_000 }
  )
})
