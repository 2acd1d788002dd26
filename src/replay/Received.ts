/**
 * What the gateway exchanged with the agent for one model request, as the replay record keeps it (docs/debugging.md
 * "The replay record"): the request body as it arrived (in a delta form against the Session's previous body) and the
 * answer as the agent received it (its status and JSON body, or its Buffered-SSE frames).
 *
 * **Details**
 * A body is kept as parsed JSON. An agent resends its whole history every turn, so a body keeps only the top-level
 * fields that changed from the previous body, and of an array field that grew (`messages`, `input`) only its items
 * after the ones it shares with the previous body's (`keep`). An SSE answer keeps its terminal frames: the connection
 * frame and the heartbeats depend on timing only. Comparing answers leaves out what is per run: the completion's random
 * id (32 hex digits, inside `chatcmpl_…`, `resp_…`, `msg_…`, `rs_…`, `fc_…_i` and an error stream's id) and the
 * `created` / `created_at` times ({@link perRun}).
 */
import { Schema } from "effect"
import * as StateHash from "../forest/StateHash.ts"
import type * as Sse from "../protocol/Sse.ts"

/** A request body in delta form against the Session's previous request body. */
export const Body = Schema.Struct({
  /** The body's top-level keys, in order. */
  keys: Schema.Array(Schema.String),
  /** The keys whose values differ from the previous body's (an array in `keep`: its items after the kept ones). */
  fields: Schema.Record(Schema.String, Schema.Json),
  /** Per array field: how many of the previous body's items it starts with. */
  keep: Schema.optionalKey(Schema.Record(Schema.String, Schema.Int))
})
export type Body = typeof Body.Type

export type Json = Schema.Json
export type JsonObject = { readonly [key: string]: Schema.Json }

/** Whether a JSON value is an object (a request body is one). */
export const isObject = (value: Json): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A body in delta form against `previous` (the Session's previous body, `undefined` for its first). */
export const bodyDelta = (previous: JsonObject | undefined, body: JsonObject): Body => {
  const fields: Record<string, Schema.Json> = {}
  const keep: Record<string, number> = {}
  for (const [key, value] of Object.entries(body)) {
    const before = previous?.[key]
    if (before !== undefined && StateHash.equalJson(before, value)) continue
    if (Array.isArray(before) && Array.isArray(value)) {
      let kept = 0
      while (kept < before.length && kept < value.length && StateHash.equalJson(before[kept], value[kept])) kept++
      if (kept > 0) {
        keep[key] = kept
        fields[key] = value.slice(kept)
        continue
      }
    }
    fields[key] = value
  }
  return { keys: Object.keys(body), fields, ...(Object.keys(keep).length > 0 ? { keep } : {}) }
}

/** The body a delta stands for, given the previous body (the inverse of {@link bodyDelta}). */
export const bodyOf = (previous: JsonObject | undefined, delta: Body): JsonObject => {
  const body: Record<string, Schema.Json> = {}
  for (const key of delta.keys) {
    const kept = delta.keep?.[key]
    const field = delta.fields[key]
    if (kept !== undefined) {
      const before = previous?.[key]
      body[key] = [...(Array.isArray(before) ? before.slice(0, kept) : []), ...(Array.isArray(field) ? field : [])]
    } else if (field !== undefined) body[key] = field
    else if (previous?.[key] !== undefined) body[key] = previous[key]
  }
  return body
}

/** One SSE frame of an answer: its event name and its data (parsed JSON, or the text when it is not JSON). */
export const Frame = Schema.Struct({ event: Schema.optionalKey(Schema.String), data: Schema.Json })
export type Frame = typeof Frame.Type

/** The answer an agent received: the HTTP status and the JSON body, or the terminal SSE frames. */
export const Answer = Schema.Struct({
  status: Schema.Int,
  body: Schema.optionalKey(Schema.Json),
  frames: Schema.optionalKey(Schema.Array(Frame))
})
export type Answer = typeof Answer.Type

const parsed = (text: string): Schema.Json => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** A JSON answer as sent (its body's text). */
export const ofJson = (status: number, text: string): Answer => ({ status, body: parsed(text) })

/** A Buffered-SSE answer as sent: its terminal frames (comments left out). */
export const ofFrames = (status: number, frames: ReadonlyArray<Sse.SseFrame>): Answer => ({
  status,
  frames: frames.flatMap((frame) =>
    frame._tag === "Comment"
      ? []
      : [{ ...(frame.event === undefined ? {} : { event: frame.event }), data: parsed(frame.data) }]
  )
})

/** The frames of an SSE stream's text (comments left out; `skip`: whole frames to drop, e.g. a heartbeat). */
export const framesOfText = (text: string, skip: ReadonlyArray<string>): ReadonlyArray<Frame> =>
  text.split(/\r?\n\r?\n/).flatMap((block) => {
    if (block.trim() === "" || skip.includes(`${block}\n\n`)) return []
    let event: string | undefined
    const data: Array<string> = []
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue
      if (line.startsWith("event:")) event = line.slice(6).trimStart()
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""))
    }
    return data.length === 0 ? [] : [{ ...(event === undefined ? {} : { event }), data: parsed(data.join("\n")) }]
  })

const randomId = /^([A-Za-z]+_)?[0-9a-f]{32}(_\d+)?$/

/** An answer with its per-run values masked: the completion's random id (`*`) and `created` / `created_at` (0). */
export const perRun = (value: Schema.Json, key?: string): Schema.Json => {
  if (typeof value === "string") return randomId.test(value) ? value.replace(/[0-9a-f]{32}/, "*") : value
  if (typeof value === "number") return key === "created" || key === "created_at" ? 0 : value
  if (Array.isArray(value)) return value.map((item) => perRun(item))
  if (value !== null && typeof value === "object") {
    const out: Record<string, Schema.Json> = {}
    for (const [k, v] of Object.entries(value)) out[k] = perRun(v, k)
    return out
  }
  return value
}
