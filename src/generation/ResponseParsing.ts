/**
 * A turn's text split by the reasoning and tool-call parsers, and the finish reason once the calls are known.
 */
import type * as ParserRegistry from "../parsers/ParserRegistry.ts"
import * as Canonical from "../protocol/Canonical.ts"
import * as Completion from "../protocol/Completion.ts"

/** The parsers of `--agentic-tool-call-parser` / `--agentic-reasoning-parser`; without one, nothing is split off. */
export interface ResponseParsers {
  readonly toolCallParser?: ParserRegistry.ToolCallParser | undefined
  readonly reasoningParser?: ParserRegistry.ReasoningParser | undefined
}

/** The generated text split by the parsers. */
export interface ParsedResponse {
  readonly content: string
  readonly reasoning: string
  readonly calls: ReadonlyArray<ParserRegistry.ToolCall>
  /** Tool-call blocks the parser could not read (their text stayed in `content`). */
  readonly malformed: number
  /** Calls to tools the request did not define, dropped. */
  readonly droppedUnknownTools: number
}

/** Reasoning first, then tool calls (only when the request defines tools); the rest is content. */
export const parseResponse = (
  text: string,
  parsers: ResponseParsers,
  tools: ReadonlyArray<Canonical.Tool>
): ParsedResponse => {
  const split = parsers.reasoningParser?.parse(text)
  const normal = split === undefined ? text : split.normalText
  const reasoning = split === undefined ? "" : split.reasoningText
  if (parsers.toolCallParser === undefined || tools.length === 0) {
    return { content: normal, reasoning, calls: [], malformed: 0, droppedUnknownTools: 0 }
  }
  const parsed = parsers.toolCallParser.parse(normal, tools)
  return {
    content: parsed.normalText,
    reasoning,
    calls: parsed.calls,
    malformed: parsed.malformed,
    droppedUnknownTools: parsed.droppedUnknownTools
  }
}

/** Whether the parsers left nothing to commit. */
export const isEmpty = (parsed: ParsedResponse): boolean =>
  parsed.content.length === 0 && parsed.reasoning.length === 0 && parsed.calls.length === 0

/** `tool_calls` when the turn ended with tool calls (unless it hit the length limit), else the engine's finish. */
export const finishOf = (engine: Completion.FinishReason, calls: number): Completion.FinishReason =>
  engine === "length" || calls === 0 ? engine : "tool_calls"
