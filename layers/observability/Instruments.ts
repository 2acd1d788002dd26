/**
 * The operational metrics relax-agentic records with Effect's `Metric` (docs/observability.md), served as Prometheus
 * text at `/metrics` and exported over OTLP.
 *
 * **Details**
 * Each metric is defined once here; the concern that observes the event updates it (the model route counts requests,
 * the generation core counts tokens, latencies, aborts and parser failures). Names follow Prometheus conventions
 * (`relax_agentic_` prefix, `_total` counters, `_seconds` histograms); attributes become labels.
 */
import { Context, Metric } from "effect"

/** Seconds, from 10 ms to about 20 minutes (generations of long agent turns wait behind whole Groups). */
const secondsBoundaries = Metric.exponentialBoundaries({ start: 0.01, factor: 2, count: 18 })

/** Model requests answered, by `protocol` (`chat`, `responses`, `messages`) and HTTP `status`. */
export const requests = Metric.counter("relax_agentic_requests_total", {
  description: "Model requests answered by the gateway, by protocol and HTTP status",
  incremental: true
})

/** Seconds the engine spent generating one committed response (every attempt of a resumed request together). */
export const generationSeconds = Metric.histogram("relax_agentic_generation_seconds", {
  description: "Engine generation time of one committed response, all attempts together",
  boundaries: secondsBoundaries
})

/** Seconds from a model request's arrival to its committed response (lease wait, queueing and generation). */
export const requestSeconds = Metric.histogram("relax_agentic_request_seconds", {
  description: "Wall time of a model request from arrival to its committed response",
  boundaries: secondsBoundaries
})

/** Response tokens the engine generated and the gateway committed. */
export const tokensGenerated = Metric.counter("relax_agentic_tokens_generated_total", {
  description: "Response tokens generated and committed",
  incremental: true
})

/** Engine aborts (a step boundary or weight update interrupting a generation) of committed responses. */
export const aborts = Metric.counter("relax_agentic_aborts_total", {
  description: "Generation aborts of committed responses (resumed attempts)",
  incremental: true
})

/** Tool calls the tool-call parser could not read (committed as text) or dropped (an unknown tool name). */
export const parserFailures = Metric.counter("relax_agentic_parser_failures_total", {
  description: "Tool calls the parser could not read or dropped",
  incremental: true
})

const requestSeries = new Map<string, Metric.Metric<number, unknown>>()

/** Count one answered model request (from a Node `finish` callback, so with an explicit context). */
export const countRequest = (protocol: string, status: number, context: Context.Context<never>): void => {
  const key = `${protocol} ${status}`
  let series = requestSeries.get(key)
  if (series === undefined) {
    series = Metric.withAttributes(requests, { protocol, status: String(status) })
    requestSeries.set(key, series)
  }
  series.updateUnsafe(1, context)
}
