/**
 * `gpt-oss` reasoning: Harmony analysis-channel messages are reasoning; final-channel messages are unwrapped to
 * their content; other messages (commentary, tool calls) stay in the normal text with their markers, so the
 * `gpt-oss` tool-call parser can read them afterwards. Several analysis messages are joined with a newline.
 */
import * as Harmony from "../Harmony.ts"
import * as ReasoningParser from "../ReasoningParser.ts"

const stream = (): ReasoningParser.ReasoningStream => {
  let buffer = ""
  let analysisCount = 0
  const run = (final: boolean): ReasoningParser.ReasoningResult => {
    const { consumed, items } = Harmony.scan(buffer, final)
    buffer = buffer.slice(consumed)
    let reasoning = ""
    let normal = ""
    for (const item of items) {
      if (item._tag === "Text") normal += item.text
      else if (item.channel === "analysis" && item.recipient === undefined) {
        reasoning += (analysisCount > 0 ? "\n" : "") + item.content
        analysisCount++
      } else if (item.channel === "final" && item.recipient === undefined) normal += item.content
      else normal += item.raw
    }
    return { reasoningText: reasoning, normalText: normal }
  }
  return { feed: (chunk) => (buffer += chunk, run(false)), finish: () => run(true) }
}

export const parser: ReasoningParser.ReasoningParser = ReasoningParser.fromStream("gpt-oss", stream)
