/**
 * Prometheus `/metrics`: the route the gateway serves, and `--metrics-port`, the same route on its own loopback port.
 *
 * **Details**
 * The text is Effect's own Prometheus exposition (`effect/observability`, `PrometheusMetrics.format`) of every metric
 * in `Instruments.ts`. The separate server answers `GET /metrics` on `127.0.0.1:<port>` and 404 on anything else, so
 * a scraper can reach the metrics without reaching the model API (docs/observability.md).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, type HttpServerError, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { createServer } from "node:http"

/** `GET /metrics`: every metric in Prometheus' text format. */
export const route = Effect.map(
  PrometheusMetrics.format(),
  (text) => HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
)

/** The running `--metrics-port` server. */
export class MetricsServer extends Context.Service<MetricsServer, {
  /** `http://127.0.0.1:<port>/metrics`. */
  readonly url: string
  readonly port: number
}>()("relax-agentic/MetricsServer") {}

const notFound = Effect.succeed(
  HttpServerResponse.text("Not found: this port serves GET /metrics only\n", { status: 404 })
)

/** Serve `/metrics` on `127.0.0.1:<port>` (`0`: the OS picks one) for the lifetime of the layer; logs its URL. */
export const layer = (port: number): Layer.Layer<MetricsServer, HttpServerError.ServeError> =>
  Layer.effect(
    MetricsServer,
    Effect.gen(function*() {
      const address = (yield* HttpServer.HttpServer).address
      const bound = address._tag === "UnixPathAddress" ? 0 : address.port
      const url = `http://127.0.0.1:${bound}/metrics`
      yield* Effect.logInfo(`Prometheus metrics at ${url}`)
      return MetricsServer.of({ url, port: bound })
    })
  ).pipe(
    Layer.provide(
      HttpRouter.serve(
        HttpRouter.use(Effect.fnUntraced(function*(router) {
          yield* router.add("GET", "/metrics", route)
          yield* router.add("*", "*", notFound)
        })),
        { disableLogger: true, disableListenLog: true }
      ).pipe(
        Layer.provideMerge(
          NodeHttpServer.layer(() => createServer(), { host: "127.0.0.1", port, gracefulShutdownTimeout: "1 second" })
        )
      )
    )
  )
