/**
 * `kimi_k2`: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>…<|tool_calls_section_end|>`.
 *
 * **Details**
 * The call id `functions.NAME:IDX` gives the name; the arguments text is passed through as written (as SGLang does).
 */
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

const argumentBegin = "<|tool_call_argument_begin|>"
const idPattern = /^\s*(?:functions\.)?([^\s:<]+?)(?::\d+)?\s*$/

const rules = MarkerScan.sectioned({
  sectionBegin: "<|tool_calls_section_begin|>",
  sectionEnd: "<|tool_calls_section_end|>",
  callBegin: "<|tool_call_begin|>",
  callEnd: "<|tool_call_end|>",
  call: (inner, raw) => {
    const sep = inner.indexOf(argumentBegin)
    const id = sep < 0 ? null : idPattern.exec(inner.slice(0, sep))
    if (id === null) return ToolCallParser.malformed(raw)
    return ToolCallParser.call(id[1] ?? "", ToolCallParser.jsonText(inner.slice(sep + argumentBegin.length)), raw)
  }
})

export const format: ToolCallParser.Format = MarkerScan.format(rules)
