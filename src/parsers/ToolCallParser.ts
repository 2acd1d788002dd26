/**
 * Tool-call parsing: what a format module provides (a {@link Scanner}) and the shared machinery that turns scanner
 * events into a result, one-shot or streamed.
 *
 * **Details**
 * A format only segments text into events: plain text, a call (name + arguments), or a malformed call (its raw text).
 * Everything users rely on is decided here, once, for every format:
 * - a call to a tool the request did not define is dropped (as SGLang does) and counted in `droppedUnknownTools`;
 * - a call whose arguments are not a JSON object never throws: its raw text stays in `normalText`, counted in `malformed`;
 * - whitespace touching a call block belongs to the block: the text before a call loses its trailing whitespace, the
 *   text after it loses its leading whitespace, and when text remains on both sides they are joined by the whitespace
 *   that followed the call (or, if none, the whitespace that preceded it). Text with no call is returned unchanged.
 * - with no tools in the request nothing is parsed (SGLang returns the text as is).
 *
 * Streaming feeds chunks to the same scanner; a scanner only commits a prefix whose segmentation cannot change, so any
 * chunk split yields the same final result as one shot.
 */
import * as Json from "../json/Json.ts"
import type * as Canonical from "../protocol/Canonical.ts"

/** One parsed tool call (its type lives in the canonical model, which the completion builder shares). */
export type ToolCall = Canonical.ParsedToolCall

/** The outcome of parsing (one shot), or one increment of it (streaming). */
export interface ToolCallResult {
  readonly normalText: string
  readonly calls: ReadonlyArray<ToolCall>
  /** Calls to tools not defined in the request, dropped. */
  readonly droppedUnknownTools: number
  /** Call blocks that could not be parsed; their raw text stayed in `normalText`. */
  readonly malformed: number
}

/** Call arguments as the model wrote them (JSON text) or as a format built them from non-JSON syntax. */
export type Arguments =
  | { readonly _tag: "JsonText"; readonly text: string }
  | { readonly _tag: "Value"; readonly value: Record<string, unknown> }

export type Event =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Call"; readonly name: string; readonly arguments: Arguments; readonly raw: string }
  | { readonly _tag: "Malformed"; readonly raw: string }

export const text = (value: string): Event => ({ _tag: "Text", text: value })
export const call = (name: string, args: Arguments, raw: string): Event => ({
  _tag: "Call",
  name,
  arguments: args,
  raw
})
export const malformed = (raw: string): Event => ({ _tag: "Malformed", raw })
export const jsonText = (value: string): Arguments => ({ _tag: "JsonText", text: value })
export const value = (v: Record<string, unknown>): Arguments => ({ _tag: "Value", value: v })

/** The tools of a request, as the parsers need them. */
export interface ToolIndex {
  readonly names: ReadonlySet<string>
  /** JSON-schema `type` of a parameter, when the tool declares one. */
  readonly parameterType: (tool: string, parameter: string) => string | undefined
}

export const toolIndex = (tools: ReadonlyArray<Canonical.Tool>): ToolIndex => {
  const schemas = new Map<string, Record<string, unknown>>()
  for (const tool of tools) {
    const name = tool.function.name
    if (typeof name !== "string") continue
    const parameters = tool.function.parameters
    const properties = Json.isObject(parameters) ? parameters["properties"] : undefined
    schemas.set(name, Json.isObject(properties) ? properties : {})
  }
  return {
    names: new Set(schemas.keys()),
    parameterType: (tool, parameter) => {
      const schema = schemas.get(tool)?.[parameter]
      const type = Json.isObject(schema) ? schema["type"] : undefined
      return typeof type === "string" ? type : undefined
    }
  }
}

/**
 * Segments text into events. `step` sees the unconsumed text; unless `final`, it commits (reports `consumed` for)
 * only a prefix whose events cannot change whatever text follows. With `final` it must consume everything.
 */
export interface Scanner {
  readonly step: (text: string, final: boolean) => { readonly events: ReadonlyArray<Event>; readonly consumed: number }
}

/** A tool-call format: a fresh scanner per parse (scanners may keep state across steps). */
export interface Format {
  readonly scanner: (tools: ToolIndex) => Scanner
}

export interface ToolCallStream {
  /** Add generated text; returns what became certain (text delta, completed calls, counts). */
  readonly feed: (chunk: string) => ToolCallResult
  /** End of generation; returns the rest. */
  readonly finish: () => ToolCallResult
}

/** A tool-call parser selected by name (`--agentic-tool-call-parser`). */
export interface ToolCallParser {
  readonly name: string
  readonly parse: (text: string, tools: ReadonlyArray<Canonical.Tool>) => ToolCallResult
  readonly stream: (tools: ReadonlyArray<Canonical.Tool>) => ToolCallStream
}

export const empty: ToolCallResult = { normalText: "", calls: [], droppedUnknownTools: 0, malformed: 0 }

/** Concatenate increments (streaming) into one result. */
export const combine = (parts: ReadonlyArray<ToolCallResult>): ToolCallResult => ({
  normalText: parts.map((p) => p.normalText).join(""),
  calls: parts.flatMap((p) => p.calls),
  droppedUnknownTools: parts.reduce((n, p) => n + p.droppedUnknownTools, 0),
  malformed: parts.reduce((n, p) => n + p.malformed, 0)
})

/** Arguments as JSON object text, or `undefined` when they are not a JSON object. */
const argumentsText = (args: Arguments): string | undefined => {
  if (args._tag === "Value") return JSON.stringify(args.value)
  const trimmed = args.text.trim()
  if (trimmed === "") return "{}"
  const parsed = Json.readWhole(trimmed)
  if (parsed === undefined) return undefined
  if (Json.isObject(parsed.value)) return trimmed
  // Some models double-encode: `"arguments": "{\"city\": \"Paris\"}"`; the inner text is the model's JSON.
  if (typeof parsed.value === "string") {
    const inner = Json.readWhole(parsed.value)
    if (inner !== undefined && Json.isObject(inner.value)) return parsed.value.trim()
  }
  return undefined
}

const leadingWs = (s: string) => s.length - s.trimStart().length

const makeStream = (format: Format, tools: ReadonlyArray<Canonical.Tool>): ToolCallStream => {
  const passthrough = tools.length === 0
  const index = toolIndex(tools)
  const scanner = format.scanner(index)
  let buffer = ""
  let emittedText = false
  let held = ""
  let afterCall = false
  let beforeCallWs = ""

  const run = (final: boolean): ToolCallResult => {
    if (passthrough) {
      const out = buffer
      buffer = ""
      return { ...empty, normalText: out }
    }
    const { consumed, events } = scanner.step(buffer, final)
    buffer = buffer.slice(consumed)
    let out = ""
    const calls: Array<ToolCall> = []
    let dropped = 0
    let bad = 0
    const onText = (s: string) => {
      if (s === "") return
      if (s.trim() === "") {
        held += s
        return
      }
      const lead = leadingWs(s)
      const core = s.trim()
      const trail = s.slice(s.trimEnd().length)
      if (afterCall) {
        const separator = emittedText ? (held + s.slice(0, lead) || beforeCallWs) : ""
        out += separator + core
        afterCall = false
      } else {
        out += held + s.slice(0, lead) + core
      }
      emittedText = true
      held = trail
    }
    const onCallBlock = () => {
      if (!afterCall) beforeCallWs = held
      afterCall = true
      held = ""
    }
    for (const event of events) {
      switch (event._tag) {
        case "Text":
          onText(event.text)
          break
        case "Malformed":
          bad++
          onText(event.raw)
          break
        case "Call": {
          if (!index.names.has(event.name)) {
            dropped++
            onCallBlock()
            break
          }
          const args = argumentsText(event.arguments)
          if (args === undefined) {
            bad++
            onText(event.raw)
            break
          }
          calls.push({ name: event.name, arguments: args })
          onCallBlock()
          break
        }
      }
    }
    if (final) {
      if (!afterCall) out += held
      held = ""
    }
    return { normalText: out, calls, droppedUnknownTools: dropped, malformed: bad }
  }

  return {
    feed: (chunk) => {
      buffer += chunk
      return run(false)
    },
    finish: () => run(true)
  }
}

/** Build a named parser from a format. */
export const make = (name: string, format: Format): ToolCallParser => ({
  name,
  parse: (input, tools) => {
    const s = makeStream(format, tools)
    return combine([s.feed(input), s.finish()])
  },
  stream: (tools) => makeStream(format, tools)
})
