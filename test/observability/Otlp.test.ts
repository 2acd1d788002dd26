/**
 * OTLP export of a model request's trace: a loopback OTLP/HTTP receiver (node:http on 127.0.0.1, port 0) collects what
 * Effect's exporter sends while the real gateway with the embedded engine answers one chat request.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { Gateway } from "../../layers/gateway/Gateway.ts"
import * as OtlpExport from "../../layers/observability/OtlpExport.ts"
import { gatewayStack } from "../support/gatewayStack.ts"
import { registeredSession, sampling } from "../support/sessions.ts"

interface Span {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
}

interface TracesBody {
  readonly resourceSpans: ReadonlyArray<{ readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<Span> }> }>
}

/** A loopback OTLP/HTTP receiver that keeps every span posted to `/v1/traces`. */
const receiver = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ server: http.Server; spans: Array<Span>; url: string }>((resolve) => {
      const spans: Array<Span> = []
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
          response.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resolve({ server, spans, url: `http://127.0.0.1:${port}` })
      })
    })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const newSession = registeredSession({ sampling: sampling({ maxNewTokens: 256 }), maxContextLen: 4096 })

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
            const { baseUrl } = yield* Gateway
            const client = new OpenAI({ baseURL: baseUrl, apiKey: yield* newSession, maxRetries: 0 })
            yield* Effect.promise(() =>
              client.chat.completions.create({
                model: "policy",
                messages: [{ role: "user", content: "Please compute 2+2?" }]
              })
            )
          }).pipe(Effect.provide(Layer.provideMerge(gatewayStack(), OtlpExport.layer(url))))
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
