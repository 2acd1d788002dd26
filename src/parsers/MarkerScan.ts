/**
 * Shared scanning helpers for marker-delimited tool-call formats.
 *
 * **Details**
 * A format is a set of {@link Rule}s, each keyed by the marker that opens a block. {@link scanRules} emits the text
 * between blocks and asks the rule to read each block; when the text ends inside a block, or ends with the first
 * characters of a marker, it stops there (unless `final`) so the next chunk can complete it.
 */
import * as Json from "../json/Json.ts"
import * as ToolCallParser from "./ToolCallParser.ts"

/** A block read by a rule: its events and where it ends. */
export interface Block {
  readonly events: ReadonlyArray<ToolCallParser.Event>
  readonly end: number
}

export interface Rule {
  readonly start: string
  /** Read the block opening at `at`; `undefined` = needs more text (never returned when `final`). */
  readonly read: (text: string, at: number, final: boolean) => Block | undefined
}

/** Length of the longest suffix of `text` (from `from`) that is a proper prefix of one of `markers`. */
export const partialSuffix = (text: string, from: number, markers: ReadonlyArray<string>): number => {
  let best = 0
  for (const marker of markers) {
    const max = Math.min(marker.length - 1, text.length - from)
    for (let n = max; n > best; n--) {
      if (text.endsWith(marker.slice(0, n))) {
        best = n
        break
      }
    }
  }
  return best
}

/** Earliest occurrence at or after `from` of any of `markers`. */
export const earliest = (
  text: string,
  from: number,
  markers: ReadonlyArray<string>
): { readonly at: number; readonly marker: string } | undefined => {
  let found: { at: number; marker: string } | undefined
  for (const marker of markers) {
    const at = text.indexOf(marker, from)
    if (at >= 0 && (found === undefined || at < found.at)) found = { at, marker }
  }
  return found
}

/** Scan text into plain text and rule blocks. */
export const scanRules = (
  text: string,
  final: boolean,
  rules: ReadonlyArray<Rule>,
  from = 0
): { readonly events: ReadonlyArray<ToolCallParser.Event>; readonly consumed: number } => {
  const events: Array<ToolCallParser.Event> = []
  const starts = rules.map((r) => r.start)
  const push = (s: string) => {
    if (s !== "") events.push(ToolCallParser.text(s))
  }
  let i = from
  for (;;) {
    const next = earliest(text, i, starts)
    if (next === undefined) {
      const hold = final ? 0 : partialSuffix(text, i, starts)
      push(text.slice(i, text.length - hold))
      return { events, consumed: text.length - hold }
    }
    push(text.slice(i, next.at))
    const rule = rules.find((r) => r.start === next.marker)
    const block = rule?.read(text, next.at, final)
    if (block === undefined) return { events, consumed: next.at }
    events.push(...block.events)
    i = block.end
  }
}

/**
 * A `start … end` block whose body holds one call. When the text ends before `end` the body read so far is tried
 * (a model may stop right after the call); if that yields no call the block is malformed.
 */
export const delimited = (
  start: string,
  end: string,
  body: (inner: string, raw: string) => ToolCallParser.Event
): Rule => ({
  start,
  read: (text, at, final) => {
    const close = text.indexOf(end, at + start.length)
    if (close < 0) {
      if (!final) return undefined
      const raw = text.slice(at)
      const event = body(text.slice(at + start.length), raw)
      return { events: [event._tag === "Call" ? event : ToolCallParser.malformed(raw)], end: text.length }
    }
    const stop = close + end.length
    return { events: [body(text.slice(at + start.length, close), text.slice(at, stop))], end: stop }
  }
})

/** The tool-call format that scans with `rules` alone (no state between steps beyond what the rules read). */
export const format = (rules: ReadonlyArray<Rule>): ToolCallParser.Format => ({
  scanner: () => ({ step: (text, final) => scanRules(text, final, rules) })
})

/**
 * Formats with a section of calls (`<section-begin> <call-begin>…<call-end> … <section-end>`). A bare call outside a
 * section is accepted too. Text inside a section between calls is not content.
 */
export const sectioned = (markers: {
  readonly sectionBegin: string
  readonly sectionEnd: string
  readonly callBegin: string
  readonly callEnd: string
  readonly call: (inner: string, raw: string) => ToolCallParser.Event
}): ReadonlyArray<Rule> => {
  const callRule = delimited(markers.callBegin, markers.callEnd, markers.call)
  const section: Rule = {
    start: markers.sectionBegin,
    read: (text, at, final) => {
      const bodyStart = at + markers.sectionBegin.length
      const close = text.indexOf(markers.sectionEnd, bodyStart)
      if (close < 0 && !final) return undefined
      const bodyEnd = close < 0 ? text.length : close
      const end = close < 0 ? text.length : close + markers.sectionEnd.length
      const body = text.slice(0, bodyEnd)
      const events: Array<ToolCallParser.Event> = []
      let i = bodyStart
      for (;;) {
        const begin = body.indexOf(markers.callBegin, i)
        if (begin < 0) break
        const block = callRule.read(body, begin, true)
        if (block === undefined) break
        events.push(...block.events)
        i = block.end
      }
      if (events.length === 0) return { events: [ToolCallParser.malformed(text.slice(at, end))], end }
      return { events, end }
    }
  }
  return [section, callRule]
}

/** `{"name": ..., "arguments"|"parameters": {...}}` → a call with the arguments' exact text. */
export const jsonCall = (object: string | undefined, raw: string): ToolCallParser.Event => {
  if (object === undefined) return ToolCallParser.malformed(raw)
  const parsed = readObjectCall(object)
  return parsed === undefined ? ToolCallParser.malformed(raw) : ToolCallParser.call(parsed.name, parsed.arguments, raw)
}

/** Read a call object's name and arguments text, or `undefined` when it is not one. */
export const readObjectCall = (
  object: string
): { readonly name: string; readonly arguments: ToolCallParser.Arguments } | undefined => {
  const parsed = Json.readWhole(object)
  return parsed === undefined ? undefined : callFromSpanned(object, parsed)
}

export const callFromSpanned = (
  source: string,
  spanned: Json.Spanned
): { readonly name: string; readonly arguments: ToolCallParser.Arguments } | undefined => {
  const name = spanned.members.get("name")
  if (name === undefined || typeof name.value !== "string") return undefined
  const args = spanned.members.get("arguments") ?? spanned.members.get("parameters")
  return {
    name: name.value,
    arguments: args === undefined
      ? ToolCallParser.value({})
      : ToolCallParser.jsonText(source.slice(args.start, args.end))
  }
}
