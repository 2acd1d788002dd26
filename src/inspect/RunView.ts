/**
 * What `inspect` shows, as pure data: a run read from its files as Steps → Groups → Sessions, with one summary row
 * per Session for the lists; a Session's detail (its SessionForest tree and the token view of each
 * exported sample), built on demand, is src/inspect/SessionTree.ts (docs/inspect.md).
 *
 * **Details**
 * A Session is identified by its step and `session_id`; its samples are its exported contexts. A debug record and a
 * training sample of the same (step, Session, export name) are one sample: the debug record brings the lineage, the
 * turns, the counters and the forest, the training sample the training view. Summaries are small and made for every
 * Session up front; details (trees and token rows, the bulk) only when a Session is opened, so a 10,000-Session run
 * opens at the cost of its summaries.
 */
import * as Drift from "../forest/Drift.ts"
import type * as TrainingSample from "../forest/TrainingSample.ts"
import type * as Canonical from "../protocol/Canonical.ts"
import * as Statistics from "../stats/Statistics.ts"
import type * as Dump from "./Dump.ts"
import type * as ForestDump from "./ForestDump.ts"

/** How summaries read rewards. */
export interface Options {
  /** The key of an object reward's primary value (`--reward-key`); without it, `score` when numeric. */
  readonly rewardKey?: string | undefined
}

/** One exported context: what the debug record and the training sample say about it, merged. */
export interface Sample {
  readonly step: string
  readonly sessionId: string
  readonly group: number
  readonly index: number
  readonly exportName: string | null
  readonly reward: TrainingSample.Reward
  readonly advantage: TrainingSample.Advantage
  readonly status: "completed" | "truncated"
  readonly tokens: ReadonlyArray<number>
  readonly responseLength: number
  readonly lossMask: ReadonlyArray<number> | undefined
  readonly logprobs: ReadonlyArray<number> | undefined
  readonly turnSpans: ReadonlyArray<readonly [number, number]> | undefined
  readonly weightVersions: ReadonlyArray<string>
  readonly prompt: string
  readonly response: string
  readonly debug: Dump.DebugRecord | undefined
}

/** One Session of a step: its exported samples and, from the debug dump, its forest. */
export interface Session {
  readonly key: string
  readonly step: string
  readonly sessionId: string
  readonly group: number
  readonly index: number
  readonly samples: ReadonlyArray<Sample>
  readonly forest: ForestDump.ForestDump | undefined
}

/** A Session's row in the lists. */
export interface SessionRow {
  readonly key: string
  readonly step: string
  readonly group: number
  readonly index: number
  readonly session_id: string
  /** Export names of its samples (null: implicit export). */
  readonly exports: ReadonlyArray<string | null>
  readonly reward: number | null
  /** The scalar advantage, or the mean of a per-token one; null in Eval. */
  readonly advantage: number | null
  readonly status: "completed" | "truncated" | "mixed"
  readonly turns: number
  readonly aborts: number
  readonly weight_versions: ReadonlyArray<string>
  readonly parser_failures: number
  /** Seconds its attempts waited for KV room (admission). */
  readonly admission_wait_s: number
  readonly requests: number
  readonly wall_s: number
  readonly generation_s: number
  readonly samples: number
  readonly has_forest: boolean
  /** States with two or more children. */
  readonly branches: number
  /** Drift points: observations that start with an assistant message differing from a committed response. */
  readonly drift: number
}

/** A Group's row: its Sessions' reward spread, and whether its advantages are all zero. */
export interface GroupRow {
  readonly step: string
  readonly group: number
  readonly sessions: number
  readonly reward_mean: number | null
  readonly reward_std: number | null
  /** Every Session's advantage is 0 (GRPO on equal rewards gives no signal). */
  readonly zero_advantage: boolean
}

/** A step's row. */
export interface StepRow {
  readonly step: string
  readonly eval: boolean
  readonly groups: number
  readonly sessions: number
  readonly samples: number
  readonly reward_mean: number | null
}

/** The whole run as the page's first load: steps, Groups and every Session's row. */
export interface Overview {
  readonly source: string
  readonly steps: ReadonlyArray<StepRow>
  readonly groups: ReadonlyArray<GroupRow>
  readonly sessions: ReadonlyArray<SessionRow>
  /** What the files lack (e.g. no debug dump: no forest trees). */
  readonly notes: ReadonlyArray<string>
}

/** A run read from its files. */
export interface Run {
  readonly source: string
  /**
   * Every Session, in list order, enough for its summary row and the search. A lazily read run (Inspector.load)
   * holds them without their token arrays: {@link Run.open} gives the whole Session.
   */
  readonly sessions: ReadonlyArray<Session>
  readonly byKey: ReadonlyMap<string, Session>
  readonly options: Options
  /**
   * The whole Session of a key (its token arrays decoded), for its detail; undefined when the run has no such
   * Session, a DumpLineError when its lines do not decode in full.
   */
  readonly open: (key: string) => Session | Dump.DumpLineError | undefined
}

const sampleKey = (step: string, sessionId: string, name: string | null) =>
  `${step}\u0000${sessionId}\u0000${name ?? "\u0001"}`

/** The key of a Session: its step and id. */
export const sessionKey = (step: string, sessionId: string): string => `${step}/${sessionId}`

const fromSample = (step: string, s: TrainingSample.TrainingSample, debug: Dump.DebugRecord | undefined): Sample => ({
  step,
  sessionId: s.session_id,
  group: s.group_index,
  index: s.index,
  exportName: s.export_name,
  reward: s.reward,
  advantage: s.advantage,
  status: s.status,
  tokens: s.tokens,
  responseLength: s.response_length,
  lossMask: s.loss_mask,
  logprobs: s.rollout_log_probs,
  turnSpans: s.turn_spans,
  weightVersions: s.weight_versions,
  prompt: s.prompt,
  response: s.response,
  debug
})

const fromDebug = (step: string, r: Dump.DebugRecord): Sample => ({
  step,
  sessionId: r.session_id,
  group: r.group_index,
  index: r.index,
  exportName: r.export_name,
  reward: r.reward,
  advantage: r.advantage,
  status: r.status ?? r.terminal_status,
  tokens: r.tokens,
  responseLength: r.response_length,
  lossMask: r.loss_mask,
  logprobs: r.rollout_log_probs,
  turnSpans: r.turn_spans,
  weightVersions: r.weight_versions,
  prompt: r.prompt,
  response: r.response,
  debug: r
})

/** Build a run from the lines of its files (in file order); `source` names what was read. */
export const fromLines = (source: string, lines: ReadonlyArray<Dump.Line>, options: Options = {}): Run => {
  const debug = new Map<string, Dump.DebugRecord>()
  const forests = new Map<string, ForestDump.ForestDump>()
  for (const line of lines) {
    if (line._tag !== "Debug") continue
    debug.set(sampleKey(line.step, line.record.session_id, line.record.export_name), line.record)
    if (line.record.forest !== undefined) forests.set(sessionKey(line.step, line.record.session_id), line.record.forest)
  }
  const samples: Array<Sample> = []
  const seen = new Set<string>()
  for (const line of lines) {
    if (line._tag !== "Sample") continue
    const key = sampleKey(line.step, line.sample.session_id, line.sample.export_name)
    if (seen.has(key)) continue
    seen.add(key)
    samples.push(fromSample(line.step, line.sample, debug.get(key)))
  }
  for (const line of lines) {
    if (line._tag !== "Debug") continue
    const key = sampleKey(line.step, line.record.session_id, line.record.export_name)
    if (seen.has(key)) continue
    seen.add(key)
    samples.push(fromDebug(line.step, line.record))
  }
  const drafts = new Map<
    string,
    { step: string; sessionId: string; group: number; index: number; samples: Array<Sample> }
  >()
  for (const s of samples) {
    const key = sessionKey(s.step, s.sessionId)
    const found = drafts.get(key)
    if (found === undefined) {
      drafts.set(key, { step: s.step, sessionId: s.sessionId, group: s.group, index: s.index, samples: [s] })
    } else found.samples.push(s)
  }
  const sessions: Array<Session> = [...drafts.entries()].map(([key, s]) => ({ key, ...s, forest: forests.get(key) }))
  sessions.sort((a, b) => compareSteps(a.step, b.step) || a.group - b.group || a.index - b.index)
  const byKey = new Map(sessions.map((s) => [s.key, s]))
  return { source, sessions, byKey, options, open: (key) => byKey.get(key) }
}

/** Training steps in order, then Eval runs in order. */
export const compareSteps = (a: string, b: string): number => {
  const na = Number(a)
  const nb = Number(b)
  const ea = Number.isNaN(na)
  const eb = Number.isNaN(nb)
  if (ea !== eb) return ea ? 1 : -1
  return ea ? a.localeCompare(b, undefined, { numeric: true }) : na - nb
}

/** A reward's primary number: the number itself, or the object's `rewardKey` (default `score`) when numeric. */
export const primaryReward = (reward: TrainingSample.Reward, rewardKey: string | undefined): number | null => {
  if (reward === null) return null
  if (typeof reward === "number") return Number.isFinite(reward) ? reward : null
  const value = reward[rewardKey ?? "score"]
  return typeof value === "number" && Number.isFinite(value) ? value : null
}

const scalarAdvantage = (advantage: TrainingSample.Advantage): number | null => {
  if (advantage === null) return null
  if (typeof advantage === "number") return advantage
  return advantage.length === 0 ? 0 : advantage.reduce((a, b) => a + b, 0) / advantage.length
}

/** The mean of `values`; null for none (nothing to show). */
const mean = (values: ReadonlyArray<number>): number | null => values.length === 0 ? null : Statistics.mean(values)

/** The committed responses under each state, and each state's children, of a forest dump. */
const childrenOf = (forest: ForestDump.ForestDump): Map<string, Array<ForestDump.DumpNode>> => {
  const out = new Map<string, Array<ForestDump.DumpNode>>()
  for (const n of forest.nodes) {
    if (n.parent === null) continue
    const list = out.get(n.parent)
    if (list === undefined) out.set(n.parent, [n])
    else list.push(n)
  }
  return out
}

/** The drift at every observation of a forest that has one, by observation hash. */
export const driftPoints = (forest: ForestDump.ForestDump): Map<string, Drift.Divergence> => {
  const children = childrenOf(forest)
  const out = new Map<string, Drift.Divergence>()
  for (const n of forest.nodes) {
    if (n.kind !== "obs" || n.parent === null) continue
    const committed = (children.get(n.parent) ?? [])
      .filter((c) => c.kind === "resp")
      .flatMap((c): ReadonlyArray<Canonical.Message> => c.messages)
    const d = Drift.atObservation(committed, n.messages)
    if (d !== undefined) out.set(n.hash, d)
  }
  return out
}

/** A Session's summary row. */
export const sessionRow = (session: Session, options: Options): SessionRow => {
  const first = session.samples[0]
  const statuses = new Set(session.samples.map((s) => s.status))
  const versions = new Set<string>()
  for (const s of session.samples) for (const v of s.weightVersions) versions.add(v)
  // Timing and turns count each committed response once, over the forest when there is one, else the lineages.
  const responses = new Map<string, { wall: number; gen: number }>()
  let aborts = 0
  if (session.forest !== undefined) {
    for (const n of session.forest.nodes) {
      if (n.kind !== "resp") continue
      responses.set(n.hash, { wall: n.wall_elapsed_s ?? 0, gen: n.generation_elapsed_s ?? 0 })
      aborts = Math.max(aborts, n.abort_count)
      for (const v of n.weight_versions ?? []) versions.add(v)
    }
  } else {
    for (const s of session.samples) {
      for (const t of s.debug?.turns ?? []) {
        responses.set(t.resp_state_hash, { wall: t.wall_elapsed_s, gen: t.generation_elapsed_s })
        aborts = Math.max(aborts, t.abort_count)
      }
    }
  }
  const turns = Math.max(0, ...session.samples.map((s) => s.debug?.turn_count ?? s.turnSpans?.length ?? 0))
  const branches = session.forest === undefined
    ? 0
    : [...childrenOf(session.forest).values()].filter((c) => c.length > 1).length
  return {
    key: session.key,
    step: session.step,
    group: session.group,
    index: session.index,
    session_id: session.sessionId,
    exports: session.samples.map((s) => s.exportName),
    reward: first === undefined ? null : primaryReward(first.reward, options.rewardKey),
    advantage: first === undefined ? null : scalarAdvantage(first.advantage),
    status: statuses.size === 1 ? (first?.status ?? "completed") : "mixed",
    turns,
    aborts: Math.max(aborts, ...session.samples.map((s) => s.debug?.abort_count ?? 0)),
    weight_versions: [...versions],
    parser_failures: Math.max(0, ...session.samples.map((s) => s.debug?.parser_failures ?? 0)),
    admission_wait_s: Math.max(0, ...session.samples.map((s) => s.debug?.admission_wait_s ?? 0)),
    requests: Math.max(0, ...session.samples.map((s) => s.debug?.request_count ?? 0)),
    wall_s: [...responses.values()].reduce((a, r) => a + r.wall, 0),
    generation_s: [...responses.values()].reduce((a, r) => a + r.gen, 0),
    samples: session.samples.length,
    has_forest: session.forest !== undefined,
    branches,
    drift: session.forest === undefined ? 0 : driftPoints(session.forest).size
  }
}

/** Steps, Groups and Session rows of a run. */
export const overview = (run: Run): Overview => {
  const rows = run.sessions.map((s) => sessionRow(s, run.options))
  const groups = new Map<string, Array<SessionRow>>()
  for (const row of rows) {
    const key = `${row.step}\u0000${row.group}`
    const list = groups.get(key)
    if (list === undefined) groups.set(key, [row])
    else list.push(row)
  }
  const groupRows: Array<GroupRow> = [...groups.values()].map((members) => {
    const rewards = members.map((m) => m.reward).filter((r): r is number => r !== null)
    const m = mean(rewards)
    const std = m === null ? null : Math.sqrt(rewards.reduce((a, r) => a + (r - m) ** 2, 0) / rewards.length)
    return {
      step: members[0]!.step,
      group: members[0]!.group,
      sessions: members.length,
      reward_mean: m,
      reward_std: std,
      zero_advantage: members.every((x) => x.advantage === 0)
    }
  })
  const steps = new Map<string, Array<SessionRow>>()
  for (const row of rows) {
    const list = steps.get(row.step)
    if (list === undefined) steps.set(row.step, [row])
    else list.push(row)
  }
  const stepRows: Array<StepRow> = [...steps.entries()].map(([step, members]) => ({
    step,
    eval: step.startsWith("eval_"),
    groups: new Set(members.map((m) => m.group)).size,
    sessions: members.length,
    samples: members.reduce((a, m) => a + m.samples, 0),
    reward_mean: mean(members.map((m) => m.reward).filter((r): r is number => r !== null))
  }))
  const notes: Array<string> = []
  if (rows.length > 0 && rows.every((r) => !r.has_forest)) {
    notes.push(
      "No SessionForest in these files: run the rollout with --save-debug-rollout-data to see every Session's tree " +
        "(trees below show only the exported lineages, or nothing for training samples alone)."
    )
  }
  return { source: run.source, steps: stepRows, groups: groupRows, sessions: rows, notes }
}
