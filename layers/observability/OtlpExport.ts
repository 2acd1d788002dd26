/**
 * OpenTelemetry export: traces and metrics over OTLP/HTTP (JSON) with Effect's own exporter (`effect/observability`).
 *
 * **Details**
 * With an endpoint (`--otlp-endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`) every span the code opens (`Gateway.handle`
 * for a model request, `Generation.generate` and its steps, the engine's `generate`, `Credit.*`, `Rollout.runStep`)
 * goes to `<endpoint>/v1/traces` and every metric of `Instruments` to `<endpoint>/v1/metrics`. Installing a tracer
 * also turns on the per-step spans of `StepSpan`. What is still batched is flushed when the layer closes.
 */
import { Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import { Otlp, type OtlpExporter } from "effect/observability"

/** The OTLP endpoint from a flag value, else the standard environment variable; undefined: no export. */
export const endpointOf = (
  flag: string | undefined,
  env: Readonly<Record<string, string | undefined>>
): string | undefined => {
  const value = flag ?? env["OTEL_EXPORTER_OTLP_ENDPOINT"]
  return value === undefined || value.trim().length === 0 ? undefined : value.trim().replace(/\/+$/, "")
}

/** Export traces and metrics to `endpoint` (an OTLP/HTTP base URL such as `http://127.0.0.1:4318`). */
export const layer = (endpoint: string): Layer.Layer<OtlpExporter.Flusher> =>
  Otlp.layerJson({
    baseUrl: endpoint,
    resource: { serviceName: "relax-agentic" },
    tracerExportInterval: "1 second",
    metricsExportInterval: "10 seconds"
  }).pipe(Layer.provide(FetchHttpClient.layer))
