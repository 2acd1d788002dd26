/**
 * `replay --timed --sglang-url URL` (docs/debugging.md "Timed replay"): the recorded Sessions' requests sent to a
 * live SGLang engine through today's generation core, with the recorded gaps, for engine and routing A/B: the
 * latency of each request against the recorded one, and where the live answers' tokens drift from the recorded.
 *
 * **Details**
 * Every Session runs at once, starting at its recorded offset from the run's first request; before each request it
 * waits the gap the agent took after the previous answer (`at` − the previous `done_at`). Requests carry the recorded
 * histories (the agent's, not what the live engine answers), so each request's prompt is the recorded one: the live
 * response is compared with the recorded response of the same request, token by token. A live answer differs from a
 * recorded one whenever the engine does (another model, other kernels, other batch shapes), so drift is reported,
 * not failed.
 */
import { Clock, Duration, Effect, Exit, Layer } from "effect"
import * as ForestDump from "../../src/inspect/ForestDump.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as Compare from "../../src/replay/Compare.ts"
import * as Record from "../../src/replay/Record.ts"
import type * as Recorded from "../../src/replay/Recorded.ts"
import * as Statistics from "../../src/stats/Statistics.ts"
import * as Engine from "../engine/Engine.ts"
import * as SglangEngine from "../engine/sglang/SglangEngine.ts"
import * as Forests from "../generation/Forests.ts"
import * as Generation from "../generation/Generation.ts"
import * as Replay from "./Replay.ts"

export interface TimedOptions {
  readonly sessions?: ReadonlyArray<string> | undefined
  /** The tokenizer the engine serves (default: the recorded one). */
  readonly tokenizer?: string | undefined
  readonly sglangUrl: string
}

/** One request of a timed replay. */
export interface TimedRequest {
  readonly latencyMs: number
  readonly recordedMs: number
  /** The first token index where the live response differs from the recorded one; `undefined`: the same tokens. */
  readonly drift: number | undefined
  /** The tag of the error the request got instead of an answer. */
  readonly error?: string | undefined
}

export interface TimedSession {
  readonly sessionId: string
  readonly requests: ReadonlyArray<TimedRequest>
}

export interface TimedReport {
  readonly sessions: ReadonlyArray<TimedSession>
  readonly unreadable: ReadonlyArray<Recorded.Unreadable>
}

/** The recorded response ids of a request (its engine answers joined), as the forest committed them. */
const recordedIds = (request: Record.Request, forest: ForestDump.ForestDump): ReadonlyArray<number> =>
  Replay.recordedAnswers(request, forest).flatMap((answer) => answer.outputIds)

/** One Session's requests against the live engine, with the recorded gaps, from `offsetMs` after the start. */
const timedSession = (recorded: Recorded.Session, offsetMs: number) =>
  Effect.gen(function*() {
    const forests = yield* Forests.Forests
    const generation = yield* Generation.Generation
    const { record } = recorded
    const forest = yield* forests.create(recorded.sessionId, {
      chatTemplateKwargs: record.generation.apply_chat_template_kwargs
    })
    const entry = Replay.sessionEntry(recorded, () => 0)
    yield* Effect.sleep(Duration.millis(offsetMs))
    const out: Array<TimedRequest> = []
    let previous: Canonical.State | undefined
    for (let i = 0; i < record.requests.length; i++) {
      const request = record.requests[i]!
      const before = record.requests[i - 1]
      if (before !== undefined) yield* Effect.sleep(Duration.millis(Math.max(0, request.at - before.done_at)))
      const state = Record.stateOf(previous, request)
      previous = state
      const nodes = forest.nodes.size
      const start = yield* Clock.currentTimeMillis
      const exit = yield* Effect.exit(generation.generate(entry, Replay.canonicalOf(request, state)))
      const latencyMs = (yield* Clock.currentTimeMillis) - start
      const live = ForestDump.ofForest(forest).nodes.slice(nodes).find((n) => n.kind === "resp")
      out.push({
        latencyMs,
        recordedMs: request.done_at - request.at,
        drift: live === undefined
          ? 0
          : Compare.firstDifference(recordedIds(request, recorded.forest), live.tokens),
        ...(Exit.isFailure(exit) ? { error: Replay.errorTag(exit) } : {})
      })
    }
    yield* forests.remove(recorded.sessionId)
    return { sessionId: recorded.sessionId, requests: out } satisfies TimedSession
  })

/** Replay the recorded Sessions of `path` against the SGLang server at `options.sglangUrl`, with the recorded gaps. */
export const replayTimed = (path: string, options: TimedOptions) =>
  Effect.gen(function*() {
    const all = yield* Replay.read(path)
    const chosen = yield* Effect.fromResult(Replay.select(path, all, options.sessions))
    const first = chosen.sessions[0]
    if (first === undefined) return { sessions: [], unreadable: chosen.unreadable } satisfies TimedReport
    const settings = first.record.generation
    const generation = yield* Effect.fromResult(Replay.generationOptions(settings, {})).pipe(
      Effect.mapError((error) => new Replay.ReplayInputError({ reason: "settings", path, detail: error.message }))
    )
    const starts = chosen.sessions.map((s) => s.record.requests[0]?.at ?? s.record.started_at)
    const origin = Math.min(...starts)
    const sessions = yield* Effect.forEach(
      chosen.sessions,
      (session, i) => timedSession(session, starts[i]! - origin),
      { concurrency: "unbounded" }
    ).pipe(
      Effect.provide(
        Generation.Generation.layer(generation).pipe(
          Layer.provideMerge(Forests.Forests.layer),
          Layer.provideMerge(
            Layer.effect(
              Engine.Engine,
              SglangEngine.SglangEngine.make({ workerUrls: [options.sglangUrl] }).pipe(
                Effect.mapError((error) =>
                  new Replay.ReplayInputError({ reason: "settings", path, detail: `--sglang-url: ${error.message}` })
                )
              )
            )
          ),
          Layer.provideMerge(Replay.tokenizerLayer(path, options.tokenizer ?? settings.tokenizer))
        )
      )
    )
    return { sessions, unreadable: chosen.unreadable } satisfies TimedReport
  })

const ms = (value: number) => `${Math.round(value)} ms`

/** The lines `replay --timed` prints: one per Session, then the run's latency and drift. */
export const reportLines = (report: TimedReport): ReadonlyArray<string> => {
  const lines = report.sessions.map((session) => {
    const drifted = session.requests.map((r, i) => ({ r, i })).filter(({ r }) => r.drift !== undefined)
    const errors = session.requests.filter((r) => r.error !== undefined)
    return `${session.sessionId} timed: ${session.requests.length} request(s), latency ` +
      `${session.requests.map((r) => ms(r.latencyMs)).join(" / ")} (recorded ` +
      `${session.requests.map((r) => ms(r.recordedMs)).join(" / ")}), ` +
      (drifted.length === 0
        ? "tokens as recorded"
        : `tokens drift in ${drifted.length}: ${
          drifted.map(({ i, r }) => `request ${i + 1} at ${r.drift}`).join(", ")
        }`) +
      (errors.length === 0 ? "" : `, ${errors.length} error(s): ${errors.map((r) => r.error).join(", ")}`)
  })
  const requests = report.sessions.flatMap((s) => s.requests)
  const drifted = requests.filter((r) => r.drift !== undefined).length
  return [
    ...lines,
    ...report.unreadable.map((u) =>
      `${u.sessionId ?? "(unknown Session)"} not replayed: ${u.reason} (${u.file}:${u.line})`
    ),
    `replay --timed: ${report.sessions.length} Session(s), ${requests.length} request(s); latency p50 ` +
    `${ms(Statistics.percentile(requests.map((r) => r.latencyMs), 0.5))}, p90 ${
      ms(Statistics.percentile(requests.map((r) => r.latencyMs), 0.9))
    } ` +
    `(recorded p50 ${ms(Statistics.percentile(requests.map((r) => r.recordedMs), 0.5))}, p90 ` +
    `${
      ms(Statistics.percentile(requests.map((r) => r.recordedMs), 0.9))
    }); ${drifted} of ${requests.length} response(s) drifted`
  ]
}
