/**
 * Reasoning parsing: split generated text into `reasoningText` and `normalText`, one-shot or streamed.
 *
 * **Details** (the whitespace rule; docs/parsers.md explains why)
 * For `<think>…</think>` formats, a reasoning block is recognised only when the output opens with the start tag
 * (leading whitespace allowed) or, for forced formats, from the first character (an opening tag is then optional).
 * The reasoning is the text between the tags with surrounding newlines removed; the normal text is what follows the
 * end tag with leading newlines removed. These are exactly the parts the Qwen3 chat template re-renders as
 * `<think>\n{reasoning}\n</think>\n\n{content}`, so a parsed message renders back to the same text. Output without a
 * reasoning block is returned unchanged as normal text. No end tag means everything is reasoning (a truncated
 * output), unless the format names a tool-call marker that closes reasoning (Qwen3: `<tool_call>`), in which case the
 * normal text starts at that marker.
 */
import * as MarkerScan from "./MarkerScan.ts"

export interface ReasoningResult {
  readonly reasoningText: string
  readonly normalText: string
}

export interface ReasoningStream {
  /** Add generated text; returns the newly certain reasoning and normal text. */
  readonly feed: (chunk: string) => ReasoningResult
  /** End of generation; returns the rest. */
  readonly finish: () => ReasoningResult
}

/** A reasoning parser selected by name (`--agentic-reasoning-parser`). */
export interface ReasoningParser {
  readonly name: string
  readonly parse: (text: string) => ReasoningResult
  readonly stream: () => ReasoningStream
}

/** Concatenate increments (streaming) into one result. */
export const combine = (parts: ReadonlyArray<ReasoningResult>): ReasoningResult => ({
  reasoningText: parts.map((p) => p.reasoningText).join(""),
  normalText: parts.map((p) => p.normalText).join("")
})

/** Build a named parser from a stream factory; one-shot parsing is one feed and finish. */
export const fromStream = (name: string, stream: () => ReasoningStream): ReasoningParser => ({
  name,
  parse: (text) => {
    const s = stream()
    return combine([s.feed(text), s.finish()])
  },
  stream
})

export interface ThinkTags {
  readonly start: string
  readonly end: string
  /** Reasoning starts at the first character (the template put the start tag in the prompt). */
  readonly forced: boolean
  /** A marker that also ends reasoning and stays in the normal text. */
  readonly toolStart?: string
}

/**
 * A stream of text that drops its leading newlines: `text(s)` is what is kept of the next piece `s` (nothing until
 * other text begins); `begin()` keeps everything from now on.
 */
const leadingNewlinesDropped = () => {
  let started = false
  return {
    text: (s: string): string => {
      if (started) return s
      const t = s.replace(/^\n+/, "")
      started = t !== ""
      return t
    },
    begin: () => {
      started = true
    }
  }
}

/** Streaming splitter for `start … end` reasoning tags. */
export const thinkTagStream = (tags: ThinkTags): ReasoningStream => {
  type State = "opening" | "reasoning" | "content" | "plain"
  let state: State = "opening"
  let buffer = ""
  const reasoningLead = leadingNewlinesDropped()
  let pendingNewlines = ""
  const contentLead = leadingNewlinesDropped()
  const closers = tags.toolStart === undefined ? [tags.end] : [tags.end, tags.toolStart]

  const run = (final: boolean): ReasoningResult => {
    let reasoning = ""
    let normal = ""
    const addReasoning = (s: string) => {
      const t = reasoningLead.text(s)
      const trail = /\n*$/.exec(t)?.[0] ?? ""
      const body = t.slice(0, t.length - trail.length)
      if (body === "") {
        pendingNewlines += trail
        return
      }
      reasoning += pendingNewlines + body
      pendingNewlines = trail
    }
    const addContent = (s: string) => {
      normal += contentLead.text(s)
    }
    for (;;) {
      if (state === "opening") {
        const rest = buffer.trimStart()
        if (rest.startsWith(tags.start)) {
          buffer = rest.slice(tags.start.length)
          state = "reasoning"
          continue
        }
        if (!final && tags.start.startsWith(rest)) break
        state = tags.forced ? "reasoning" : "plain"
        continue
      }
      if (state === "reasoning") {
        const close = MarkerScan.earliest(buffer, 0, closers)
        if (close === undefined) {
          const hold = final ? 0 : MarkerScan.partialSuffix(buffer, 0, closers)
          addReasoning(buffer.slice(0, buffer.length - hold))
          buffer = buffer.slice(buffer.length - hold)
          break
        }
        addReasoning(buffer.slice(0, close.at))
        if (close.marker === tags.end) {
          buffer = buffer.slice(close.at + close.marker.length)
        } else {
          buffer = buffer.slice(close.at)
          contentLead.begin()
        }
        state = "content"
        continue
      }
      if (state === "content") addContent(buffer)
      else normal += buffer
      buffer = ""
      break
    }
    return { reasoningText: reasoning, normalText: normal }
  }
  return { feed: (chunk) => (buffer += chunk, run(false)), finish: () => run(true) }
}

/** A parser for `start … end` reasoning tags. */
export const thinkTags = (name: string, tags: ThinkTags): ReasoningParser =>
  fromStream(name, () => thinkTagStream(tags))
