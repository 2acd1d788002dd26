/**
 * Where a Session's time went (docs/debugging.md "Where the time went"), read off its replay record: agent start,
 * lease and admission wait, model time, parked time, agent time between an answer and the next request, its Group's
 * reward; as phases, per-Session totals, step metrics (`perf/...` mean and p90) and a Chrome trace (the trace-event
 * format Perfetto and chrome://tracing load).
 *
 * **Details**
 * A request's wait runs from its arrival to its first engine attempt (the Group's Runtime lease, KV admission and the
 * generation gate), its model time is each attempt's time in the engine, and the time between an attempt the engine
 * aborted and the next is parked (a step's close, a weight update). The agent's time is from an answer to the next
 * request (tool calls, its own work); its start from the Session's registration to its first request; the reward is
 * its Group's Reward (rewards and credit of the whole Group, after its last Session). Overlapping
 * requests (an agent that sends several at once) give overlapping phases; totals add them as they are.
 */
import * as RunView from "../inspect/RunView.ts"
import * as Statistics from "../stats/Statistics.ts"
import type * as Record from "./Record.ts"
import type * as Recorded from "./Recorded.ts"

/** The phases of a Session's time. */
export const phases = ["agent_start", "wait", "model", "parked", "agent", "reward"] as const
export type Phase = (typeof phases)[number]

/** One span of a Session's time (Unix milliseconds). */
export interface Span {
  readonly phase: Phase
  readonly start: number
  readonly end: number
  /** The 1-based request it belongs to (none for the agent's start). */
  readonly request?: number | undefined
}

/** The spans of a Session's record, in time order per request. */
export const spans = (record: Record.SessionRecord): ReadonlyArray<Span> => {
  const out: Array<Span> = []
  const first = record.requests[0]
  if (first !== undefined) out.push({ phase: "agent_start", start: record.started_at, end: first.at })
  record.requests.forEach((request, i) => {
    const number = i + 1
    const previous = record.requests[i - 1]
    if (previous !== undefined && request.at > previous.done_at) {
      out.push({ phase: "agent", start: previous.done_at, end: request.at, request: number })
    }
    const attempts = request.attempts
    const firstAttempt = attempts[0]
    out.push({ phase: "wait", start: request.at, end: firstAttempt?.at ?? request.done_at, request: number })
    attempts.forEach((attempt, j) => {
      const before = attempts[j - 1]
      if (before !== undefined) out.push({ phase: "parked", start: before.done_at, end: attempt.at, request: number })
      out.push({ phase: "model", start: attempt.at, end: attempt.done_at, request: number })
    })
  })
  if (record.reward !== undefined) out.push({ phase: "reward", start: record.reward.at, end: record.reward.done_at })
  return out
}

/** Seconds per phase of a Session (every phase present). */
export const totals = (record: Record.SessionRecord): Readonly<Record<Phase, number>> => {
  const sum = Object.fromEntries(phases.map((p) => [p, 0])) as { [K in Phase]: number }
  for (const span of spans(record)) sum[span.phase] += Math.max(0, span.end - span.start) / 1000
  return sum
}

/** `perf/session/<phase>_s/{mean,p90}` over the Sessions' totals (empty for no Session). */
export const stepMetrics = (records: ReadonlyArray<Record.SessionRecord>): Record<string, number> => {
  if (records.length === 0) return {}
  const all = records.map(totals)
  const out: Record<string, number> = {}
  for (const phase of phases) {
    const values = all.map((t) => t[phase])
    out[`perf/session/${phase}_s/mean`] = Statistics.mean(values)
    out[`perf/session/${phase}_s/p90`] = Statistics.percentile(values, 0.9)
  }
  return out
}

/** A Session placed in a trace: its step, Group and record. */
export interface TracedSession {
  readonly step: string
  readonly groupIndex: number
  readonly sessionId: string
  readonly record: Record.SessionRecord
}

/** A recorded Session placed by the step and Group its first dump record names. */
export const traced = (session: Recorded.Session): TracedSession => ({
  step: String(session.samples[0]?.rollout_id ?? ""),
  groupIndex: session.samples[0]?.group_index ?? 0,
  sessionId: session.sessionId,
  record: session.record
})

/** A Session's row of the inspector's timeline: its key (`RunView.sessionKey`) and spans in ms from its step's start. */
export interface ViewSession {
  readonly key: string
  readonly session_id: string
  readonly spans: ReadonlyArray<Span>
}

/** A step of the inspector's timeline: its Groups' Sessions on one time axis of `duration_ms` from its first start. */
export interface ViewStep {
  readonly step: string
  readonly duration_ms: number
  readonly groups: ReadonlyArray<{ readonly group: number; readonly sessions: ReadonlyArray<ViewSession> }>
}

/** The inspector's timeline (docs/inspect.md "Timeline"): per step, its Groups and Sessions and their spans. */
export interface View {
  readonly phases: ReadonlyArray<Phase>
  readonly steps: ReadonlyArray<ViewStep>
}

/** The timeline view of Sessions, steps and Groups in the order first met. */
export const view = (sessions: ReadonlyArray<TracedSession>): View => {
  const steps = new Map<string, Map<number, Array<TracedSession>>>()
  for (const session of sessions) {
    const groups = steps.get(session.step) ?? new Map<number, Array<TracedSession>>()
    steps.set(session.step, groups)
    const list = groups.get(session.groupIndex) ?? []
    groups.set(session.groupIndex, list)
    list.push(session)
  }
  return {
    phases,
    steps: [...steps.entries()].map(([step, groups]) => {
      const all = [...groups.values()].flat()
      const origin = Math.min(...all.map((s) => s.record.started_at))
      let end = origin
      const groupRows = [...groups.entries()].map(([group, members]) => ({
        group,
        sessions: members.map((s) => {
          const own = spans(s.record).map((span) => {
            end = Math.max(end, span.end)
            return { ...span, start: span.start - origin, end: span.end - origin }
          })
          return { key: RunView.sessionKey(step, s.sessionId), session_id: s.sessionId, spans: own }
        })
      }))
      return { step, duration_ms: end - origin, groups: groupRows }
    })
  }
}

/** One event of the trace-event format (complete `X` events and `M` metadata). */
export type TraceEvent =
  | {
    readonly name: string
    readonly cat: string
    readonly ph: "X"
    readonly ts: number
    readonly dur: number
    readonly pid: number
    readonly tid: number
    readonly args: { readonly session_id: string; readonly request?: number | undefined }
  }
  | {
    readonly name: "process_name" | "thread_name"
    readonly ph: "M"
    readonly pid: number
    readonly tid?: number | undefined
    readonly args: { readonly name: string }
  }

/**
 * The Chrome trace of Sessions: one process per Group (`step <s> · Group <g>`), one thread per Session (its id),
 * each phase a complete event, in microseconds from the first Session's start.
 */
export const chromeTrace = (
  sessions: ReadonlyArray<TracedSession>
): { readonly traceEvents: ReadonlyArray<TraceEvent>; readonly displayTimeUnit: "ms" } => {
  const origin = Math.min(...sessions.map((s) => s.record.started_at))
  const groups = new Map<string, number>()
  const events: Array<TraceEvent> = []
  const threads = new Map<number, number>()
  for (const session of sessions) {
    const key = `${session.step}\u0000${session.groupIndex}`
    let pid = groups.get(key)
    if (pid === undefined) {
      pid = groups.size + 1
      groups.set(key, pid)
      events.push({
        name: "process_name",
        ph: "M",
        pid,
        args: { name: `step ${session.step} · Group ${session.groupIndex}` }
      })
    }
    const tid = (threads.get(pid) ?? 0) + 1
    threads.set(pid, tid)
    events.push({ name: "thread_name", ph: "M", pid, tid, args: { name: session.sessionId } })
    for (const span of spans(session.record)) {
      events.push({
        name: span.phase,
        cat: "session",
        ph: "X",
        ts: Math.round((span.start - origin) * 1000),
        dur: Math.max(0, Math.round((span.end - span.start) * 1000)),
        pid,
        tid,
        args: { session_id: session.sessionId, ...(span.request === undefined ? {} : { request: span.request }) }
      })
    }
  }
  return { traceEvents: events, displayTimeUnit: "ms" }
}
