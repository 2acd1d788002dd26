/**
 * The operational metrics relax-agentic records with Effect's `Metric` (docs/observability.md), served as Prometheus
 * text at `/metrics` and exported over OTLP.
 *
 * **Details**
 * Each metric is defined once here, through one helper per kind ({@link counter}, {@link gauge}, {@link seconds});
 * the concern that observes the event updates it (the model route counts requests, the generation core tokens,
 * latencies, lease waits, aborts, parser failures and drift, the engine its errors, the Sessions registry, the
 * generation gate and the Session runner their gauges). Names follow Prometheus conventions (`relax_agentic_` prefix,
 * `_total` counters, `_seconds` histograms); attributes become labels, and a labelled metric's series are made once
 * per label set ({@link labelled}).
 */
import { type Context, Effect, Metric, type Scope } from "effect"

const prefix = "relax_agentic_"

/** Seconds, from 10 ms to about 20 minutes (generations of long agent turns wait behind whole Groups). */
const secondsBoundaries = Metric.exponentialBoundaries({ start: 0.01, factor: 2, count: 18 })

/** A counter `relax_agentic_<name>_total`. */
const counter = (name: string, description: string) =>
  Metric.counter(`${prefix}${name}_total`, { description, incremental: true })

/** A gauge `relax_agentic_<name>` (moved by deltas with {@link move}). */
const gauge = (name: string, description: string) => Metric.gauge(`${prefix}${name}`, { description })

/** A latency histogram `relax_agentic_<name>_seconds` over {@link secondsBoundaries}. */
const seconds = (name: string, description: string) =>
  Metric.histogram(`${prefix}${name}_seconds`, { description, boundaries: secondsBoundaries })

/**
 * The series of `metric` for one set of label values, each made once: labelled metrics here have few label sets
 * (protocols × statuses, error reasons, drift causes, agent phases).
 */
const labelled = <const Label extends string, Input, State>(
  metric: Metric.Metric<Input, State>,
  labels: ReadonlyArray<Label>
) => {
  const series = new Map<string, Metric.Metric<Input, State>>()
  return (values: Readonly<Record<Label, string>>): Metric.Metric<Input, State> => {
    const key = labels.map((label) => values[label]).join("\u0000")
    let found = series.get(key)
    if (found === undefined) {
      found = Metric.withAttributes(metric, Object.fromEntries(labels.map((label) => [label, values[label]])))
      series.set(key, found)
    }
    return found
  }
}

/** Model requests answered, by `protocol` (`chat`, `responses`, `messages`) and HTTP `status`. */
export const requests = labelled(
  counter("requests", "Model requests answered by the gateway, by protocol and HTTP status"),
  ["protocol", "status"]
)

/** Seconds the engine spent generating one committed response (every attempt of a resumed request together). */
export const generationSeconds = seconds(
  "generation",
  "Engine generation time of one committed response, all attempts together"
)

/** Seconds from a model request's arrival to its committed response (lease wait, queueing and generation). */
export const requestSeconds = seconds("request", "Wall time of a model request from arrival to its committed response")

/** Seconds an engine attempt waited for its Group's Runtime lease (first-request barrier, resident capacity). */
export const leaseWaitSeconds = seconds(
  "lease_wait",
  "Time an engine attempt waited for its Group's Runtime lease (first-request barrier, resident capacity)"
)

/**
 * Seconds of each phase of a finished Session's time (`agent_start`, `wait`, `model`, `parked`, `agent`), by `phase`,
 * read off its replay record: with debug dumps only (docs/debugging.md "Where the time went").
 */
export const sessionPhaseSeconds = labelled(
  seconds("session_phase", "Time of each phase of a finished Session (with debug dumps), by phase"),
  ["phase"]
)

/** Response tokens the engine generated and the gateway committed. */
export const tokensGenerated = counter("tokens_generated", "Response tokens generated and committed")

/** Engine aborts of generation attempts (a step boundary, weight update or abort interrupting a generation). */
export const aborts = counter("aborts", "Engine aborts of generation attempts (the request resumes or gives up)")

/** Tool calls the tool-call parser could not read (committed as text) or dropped (an unknown tool name). */
export const parserFailures = counter("parser_failures", "Tool calls the parser could not read or dropped")

/** Engine operations that failed, by `reason` (EngineError's kind) and `operation` (`generate`, `health`, ...). */
export const engineErrors = labelled(
  counter("engine_errors", "Engine operations that failed, by reason and operation"),
  ["reason", "operation"]
)

/** Model requests whose echoed history diverged from a committed response, by `cause` (src/forest/Drift.ts). */
export const drift = labelled(
  counter("drift", "Model requests whose echoed history diverged from a committed response, by cause"),
  ["cause"]
)

/** Sessions registered with the gateway and not yet finished. */
export const sessionsActive = gauge("sessions_active", "Sessions registered and not yet finished")

/** Training Sessions retained across a step boundary, their requests parked until the next step. */
export const sessionsParked = gauge(
  "sessions_parked",
  "Training Sessions retained across a step boundary (partial rollout, fully async), parked until the next step"
)

/**
 * Engine attempts held while generation is paused for a trainer's weight push (`pauseGeneration`, until the resume):
 * both engines hold them before they reach a server or the model.
 */
export const generationsHeld = gauge(
  "generations_held",
  "Engine attempts held while generation is paused for a weight push, until the resume"
)

/** Agents by `state`: `starting` (launched, no model request yet) and `running` (sent their first request). */
export const agents = labelled(
  gauge("agent_processes", "Agents by state: starting (launched, no model request yet) or running"),
  ["state"]
)

/** Add `delta` to a gauge. */
export const move = (metric: Metric.Metric<number, unknown>, delta: number): Effect.Effect<void> =>
  Metric.modify(metric, delta)

/** `effect`, counted in the gauge `metric` while it runs. */
export const countedWhile = <A, E, R>(
  metric: Metric.Metric<number, unknown>,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => Effect.acquireUseRelease(move(metric, 1), () => effect, () => move(metric, -1))

/** Count one answered model request (from a Node `finish` callback, so with an explicit context). */
export const countRequest = (protocol: string, status: number, context: Context.Context<never>): void =>
  requests({ protocol, status: String(status) }).updateUnsafe(1, context)

/**
 * Count one agent in {@link agents} while the scope lives: `starting` until `firstRequest` completes (its first model
 * request), then `running`. The switch is one synchronous step, so the gauges never count it twice.
 */
export const trackAgent = (firstRequest: Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function*() {
    const starting = agents({ state: "starting" })
    const running = agents({ state: "running" })
    let current = starting
    yield* Effect.acquireRelease(move(starting, 1), () => Effect.suspend(() => move(current, -1)))
    yield* Effect.forkScoped(Effect.andThen(
      firstRequest,
      Effect.contextWith((context: Context.Context<never>) => {
        current = running
        starting.modifyUnsafe(-1, context)
        running.modifyUnsafe(1, context)
        return Effect.void
      })
    ))
  })
