/**
 * `deepseekv3`: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`.
 *
 * **Details**
 * The code fence is optional (some outputs omit it); the JSON inside is kept as the model wrote it.
 */
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

const fenced = /^\s*(?:function)?<｜tool▁sep｜>([^\n]*)\n\s*```(?:json)?[ \t]*\n?([\s\S]*?)```\s*$/
const bare = /^\s*(?:function)?<｜tool▁sep｜>([^\n]*)\n([\s\S]*)$/

/** DeepSeek's section and call markers (`deepseekv31` writes the same ones). */
export const markers = {
  sectionBegin: "<｜tool▁calls▁begin｜>",
  sectionEnd: "<｜tool▁calls▁end｜>",
  callBegin: "<｜tool▁call▁begin｜>",
  callEnd: "<｜tool▁call▁end｜>"
} as const

const rules = MarkerScan.sectioned({
  ...markers,
  call: (inner, raw) => {
    const m = fenced.exec(inner) ?? bare.exec(inner)
    if (m === null) return ToolCallParser.malformed(raw)
    return ToolCallParser.call((m[1] ?? "").trim(), ToolCallParser.jsonText(m[2] ?? ""), raw)
  }
})

export const format: ToolCallParser.Format = MarkerScan.format(rules)
