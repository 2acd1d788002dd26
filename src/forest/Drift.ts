/**
 * Drift: where an agent's echoed history diverged from a response the gateway committed, told from the SessionForest
 * alone (docs/inspect.md "Branch points and drift").
 *
 * **Details**
 * The gateway commits response R under state P and hands it to the agent. When the agent's next request repeats P's
 * messages but then sends an assistant message that is not R's message (edited, trimmed, re-serialized), matching
 * stops at P and the request's messages after P become a new observation O under P, beside R: the forest branches
 * at P. So a drift point is an observation whose first message is an assistant message, under a state that has a
 * committed response child. Its cause is read off the two messages: reasoning dropped or changed, tool-call
 * arguments re-serialized (equal as JSON, different as text), tool calls changed, text changed, messages
 * reordered (R's message appears later in O), or other (e.g. a tool call's fields beside its name and arguments).
 * Messages are compared canonical (src/protocol/Canonical.ts): arguments are compact key-sorted JSON there, so a
 * client that only re-serializes them (spacing, key order) still matches and is no drift at all.
 */
import type * as Canonical from "../protocol/Canonical.ts"
import * as Forest from "./Forest.ts"
import * as StateHash from "./StateHash.ts"

/** Every cause, in the order metrics list them. */
export const causes = [
  "reasoning-dropped",
  "reasoning-changed",
  "tool-arguments-reserialized",
  "tool-calls-changed",
  "text-changed",
  "messages-reordered",
  "other"
] as const

/** Why an echoed assistant message differs from the committed response. */
export type Cause = typeof causes[number]

/** What differs between a committed response and what the agent echoed in its place. */
export interface Divergence {
  readonly cause: Cause
  /** A short human-readable account (the first differing field, with the two values shortened). */
  readonly detail: string
}

const short = (text: string, limit = 80): string => (text.length <= limit ? text : `${text.slice(0, limit - 1)}…`)

const textOf = (m: Canonical.Message): string =>
  typeof m.content === "string"
    ? m.content
    : m.content.map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join("")

const parsedArguments = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Where two strings first differ, as `…before|committed → echoed`. */
const firstDifference = (committed: string, echoed: string): string => {
  let i = 0
  while (i < committed.length && i < echoed.length && committed[i] === echoed[i]) i++
  const from = Math.max(0, i - 20)
  return `at character ${i}: ${JSON.stringify(short(committed.slice(from), 60))} → ${
    JSON.stringify(short(echoed.slice(from), 60))
  }`
}

/** The difference between a committed response message and the assistant message the agent echoed instead. */
export const diverge = (committed: Canonical.Message, echoed: Canonical.Message): Divergence => {
  if (StateHash.equalJson(committed, echoed)) return { cause: "other", detail: "equal messages (strict matching)" }
  const sameText = textOf(committed) === textOf(echoed)
  const committedCalls = committed.tool_calls ?? []
  const echoedCalls = echoed.tool_calls ?? []
  const sameCalls = StateHash.equalJson(committedCalls, echoedCalls)
  if (sameText && sameCalls) {
    if (echoed.reasoning_content === undefined && committed.reasoning_content !== undefined) {
      return { cause: "reasoning-dropped", detail: "the echoed message has no reasoning_content" }
    }
    if (echoed.reasoning_content !== committed.reasoning_content) {
      return {
        cause: "reasoning-changed",
        detail: `reasoning_content ${
          firstDifference(committed.reasoning_content ?? "", echoed.reasoning_content ?? "")
        }`
      }
    }
    return { cause: "other", detail: "role or tool_call_id differ" }
  }
  if (sameText && committedCalls.length === echoedCalls.length) {
    const reserialized = committedCalls.every((call, i) => {
      const other = echoedCalls[i]
      if (other === undefined || call.function.name !== other.function.name) return false
      const a = parsedArguments(call.function.arguments)
      return a !== undefined && StateHash.equalJson(a, parsedArguments(other.function.arguments))
    })
    const i = committedCalls.findIndex((call, k) => call.function.arguments !== echoedCalls[k]?.function.arguments)
    if (reserialized && i >= 0) {
      const a = committedCalls[i]?.function.arguments ?? ""
      const b = echoedCalls[i]?.function.arguments ?? ""
      return {
        cause: "tool-arguments-reserialized",
        detail: `tool call ${i}: ${JSON.stringify(short(a))} → ${JSON.stringify(short(b))}`
      }
    }
    if (reserialized) {
      // Same names and argument texts: a field beside them differs (a client adding `index`, dropping `type`).
      const k = committedCalls.findIndex((call, n) => !StateHash.equalJson(call, echoedCalls[n]))
      return {
        cause: "other",
        detail: `tool call ${k} differs beside its name and arguments: ${
          JSON.stringify(short(JSON.stringify(committedCalls[k])))
        } → ${JSON.stringify(short(JSON.stringify(echoedCalls[k])))}`
      }
    }
  }
  if (sameText) {
    return {
      cause: "tool-calls-changed",
      detail: `committed ${committedCalls.map((c) => c.function.name ?? "?").join(", ") || "no tool calls"}; ` +
        `echoed ${echoedCalls.map((c) => c.function.name ?? "?").join(", ") || "no tool calls"}`
    }
  }
  return { cause: "text-changed", detail: `content ${firstDifference(textOf(committed), textOf(echoed))}` }
}

/**
 * The drift at an observation: given the committed response children of its parent and the observation's messages,
 * the divergence from the closest committed response, or undefined when the observation does not start with an
 * assistant message (a normal turn) or its parent has no committed response.
 */
export const atObservation = (
  committed: ReadonlyArray<Canonical.Message>,
  messages: ReadonlyArray<Canonical.Message>
): Divergence | undefined => {
  const first = messages[0]
  if (first === undefined || first.role !== "assistant" || committed.length === 0) return undefined
  const reordered = committed.find((r) => messages.slice(1).some((m) => StateHash.equalJson(m, r)))
  if (reordered !== undefined) {
    return { cause: "messages-reordered", detail: "the committed response appears later in the echoed history" }
  }
  const rank: Record<Cause, number> = {
    "reasoning-dropped": 0,
    "tool-arguments-reserialized": 1,
    "reasoning-changed": 2,
    "tool-calls-changed": 3,
    "text-changed": 4,
    "messages-reordered": 5,
    other: 6
  }
  let best: Divergence | undefined
  for (const r of committed) {
    const d = diverge(r, first)
    if (best === undefined || rank[d.cause] < rank[best.cause]) best = d
  }
  return best
}

/**
 * The drift of a live model request (what the rollout counts as `rollout/drift/...`): its messages after the matched
 * state `parent` against the responses committed under `parent`. Undefined for a normal turn, without looking at the
 * forest: only a suffix that starts with an assistant message can be drift.
 */
export const ofRequest = (
  forest: Forest.Forest,
  parent: string,
  suffix: ReadonlyArray<Canonical.Message>
): Divergence | undefined => {
  if (suffix[0]?.role !== "assistant") return undefined
  const committed: Array<Canonical.Message> = []
  for (const n of forest.nodes.values()) if (n.kind === "resp" && n.parent === parent) committed.push(n.message)
  return atObservation(committed, suffix)
}

/** Counts by cause read back from JSON (a runner's report); keys that are not causes are left out. */
export const countsOf = (record: Readonly<Record<string, number>>): ReadonlyMap<Cause, number> =>
  new Map(causes.flatMap((cause) => (record[cause] === undefined ? [] : [[cause, record[cause]] as const])))
