/**
 * What `replay` compares (docs/debugging.md "Replay"): a replayed request's states, answer and samples against the
 * recording, down to the first difference: which request, which field, which token index, recorded vs now.
 *
 * **Details**
 * Pure functions over the debug dump's own shapes (a forest node as `ForestDump.DumpNode`, a sample as its debug
 * record), so the replayed side is dumped the way the rollout dumped the recorded side and both compare alike.
 */
import * as StateHash from "../forest/StateHash.ts"
import type * as Dump from "../inspect/Dump.ts"
import type * as ForestDump from "../inspect/ForestDump.ts"
import * as Received from "./Received.ts"

/** The first difference between a recording and its replay. */
export interface Divergence {
  /** 1-based request of the Session (undefined: its samples, after every request). */
  readonly request: number | undefined
  readonly field: string
  /** The token (or array element) index where the values first differ. */
  readonly index?: number | undefined
  readonly recorded: string
  readonly now: string
}

/** The first index where two arrays differ (a shorter one differs where it ends); `undefined` when equal. */
export const firstDifference = (a: ArrayLike<unknown>, b: ArrayLike<unknown>): number | undefined => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (!StateHash.equalJson(a[i], b[i])) return i
  return a.length === b.length ? undefined : n
}

const show = (value: unknown): string => value === undefined ? "(none)" : JSON.stringify(value)

/** An element of an array at `index`, or `(end)` past its end. */
const at = (array: ArrayLike<unknown>, index: number): string => index < array.length ? show(array[index]) : "(end)"

/** The first differing element of two arrays as a divergence of `field`. */
export const arrays = (
  request: number | undefined,
  field: string,
  recorded: ArrayLike<unknown>,
  now: ArrayLike<unknown>
): Divergence | undefined => {
  const index = firstDifference(recorded, now)
  return index === undefined ? undefined : { request, field, index, recorded: at(recorded, index), now: at(now, index) }
}

/** Two values as a divergence of `field` when their JSON differs. */
export const values = (
  request: number | undefined,
  field: string,
  recorded: unknown,
  now: unknown
): Divergence | undefined =>
  StateHash.equalJson(recorded, now) ? undefined : { request, field, recorded: show(recorded), now: show(now) }

/** The first of several checks that found a difference. */
export const first = (...checks: ReadonlyArray<() => Divergence | undefined>): Divergence | undefined => {
  for (const check of checks) {
    const found = check()
    if (found !== undefined) return found
  }
  return undefined
}

/** An observation state the request committed, against the recorded one of the same hash. */
export const observation = (
  request: number,
  recorded: ForestDump.DumpNode,
  now: ForestDump.DumpNode
): Divergence | undefined =>
  first(
    () => arrays(request, "observation tokens", recorded.tokens, now.tokens),
    () => arrays(request, "observation train_tokens", recorded.train_tokens ?? [], now.train_tokens ?? []),
    () => values(request, "observation rollout_id", recorded.rollout_id, now.rollout_id)
  )

const messageFields = ["role", "content", "reasoning_content", "tool_calls"] as const

/** The response state a request committed, against the recorded one. */
export const response = (
  request: number,
  recorded: ForestDump.DumpNode,
  now: ForestDump.DumpNode
): Divergence | undefined =>
  first(
    () => values(request, "response parent state_hash", recorded.parent, now.parent),
    () => arrays(request, "response tokens", recorded.tokens, now.tokens),
    () => arrays(request, "response logprobs", recorded.logprobs ?? [], now.logprobs ?? []),
    ...messageFields.map((key) => () =>
      values(request, `response message.${key}`, recorded.messages[0]?.[key], now.messages[0]?.[key])
    ),
    () => values(request, "response state_hash", recorded.hash, now.hash),
    () => values(request, "response weight_versions", recorded.weight_versions, now.weight_versions),
    () => values(request, "response status", recorded.status, now.status),
    () => values(request, "response rollout_id", recorded.rollout_id, now.rollout_id),
    () => values(request, "response abort_count", recorded.abort_count, now.abort_count)
  )

/**
 * The path and values where two JSON values first differ (depth first, keys in the recorded order); two texts also
 * give the index of their first different character.
 */
const firstPath = (
  recorded: Received.Json | undefined,
  now: Received.Json | undefined,
  path: string
):
  | { readonly path: string; readonly recorded: unknown; readonly now: unknown; readonly index?: number }
  | undefined =>
{
  if (StateHash.equalJson(recorded, now)) return undefined
  if (typeof recorded === "string" && typeof now === "string") {
    return { path, recorded, now, index: firstDifference(recorded, now)! }
  }
  if (Array.isArray(recorded) && Array.isArray(now)) {
    const index = firstDifference(recorded, now)!
    if (index >= recorded.length || index >= now.length) {
      return { path: `${path}[${index}]`, recorded: recorded[index], now: now[index] }
    }
    return firstPath(recorded[index], now[index], `${path}[${index}]`)
  }
  if (recorded !== undefined && now !== undefined && Received.isObject(recorded) && Received.isObject(now)) {
    const keys = [...Object.keys(recorded), ...Object.keys(now).filter((key) => !(key in recorded))]
    for (const key of keys) {
      const found = firstPath(recorded[key], now[key], path === "" ? key : `${path}.${key}`)
      if (found !== undefined) return found
    }
  }
  return { path, recorded, now }
}

/**
 * The answer the agent received, against the recorded one, per-run values masked (`Received.perRun`): the field is
 * `answer` and the JSON path of the first difference (`answer body.content[0].text`, `answer frames[2].data...`),
 * with the character index where two texts first differ.
 */
export const answer = (
  request: number,
  recorded: Received.Answer | undefined,
  now: Received.Answer | undefined
): Divergence | undefined => {
  const found = firstPath(
    recorded === undefined ? undefined : Received.perRun(recorded),
    now === undefined ? undefined : Received.perRun(now),
    ""
  )
  if (found === undefined) return undefined
  return {
    request,
    field: found.path === "" ? "answer" : `answer ${found.path}`,
    ...(found.index === undefined ? {} : { index: found.index }),
    recorded: show(found.recorded),
    now: show(found.now)
  }
}

/** The sample fields replay compares (the training view). */
export interface SampleView {
  readonly tokens: ReadonlyArray<number>
  readonly loss_mask: ReadonlyArray<number>
  readonly rollout_log_probs: ReadonlyArray<number>
  readonly turn_spans: ReadonlyArray<readonly [number, number]>
}

/** A sample built from the replayed forest, against its recorded debug record. */
export const sample = (recorded: Dump.DebugRecord, now: SampleView): Divergence | undefined => {
  const name = recorded.export_name ?? "(implicit)"
  return first(
    () => arrays(undefined, `sample ${name} tokens`, recorded.tokens, now.tokens),
    () => arrays(undefined, `sample ${name} loss_mask`, recorded.loss_mask ?? [], now.loss_mask),
    () =>
      arrays(undefined, `sample ${name} rollout_log_probs`, recorded.rollout_log_probs ?? [], now.rollout_log_probs),
    () => arrays(undefined, `sample ${name} turn_spans`, recorded.turn_spans ?? [], now.turn_spans)
  )
}

/** One Session's line: `identical`, or where it first diverged. */
export const line = (
  sessionId: string,
  requests: number,
  outcome: Divergence | undefined
): string => {
  if (outcome === undefined) return `${sessionId} identical (${requests} request${requests === 1 ? "" : "s"})`
  const where = outcome.request === undefined ? "samples" : `request ${outcome.request}/${requests}`
  const index = outcome.index === undefined ? "" : ` at index ${outcome.index}`
  return `${sessionId} diverged: ${where}, ${outcome.field}${index}: recorded ${outcome.recorded}, now ${outcome.now}`
}
