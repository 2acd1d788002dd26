/**
 * `deepseekv31`: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`
 * (no `function` type, no code fence). A bare call without the section markers is accepted too.
 */
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"
import * as DeepSeekV3 from "./DeepSeekV3.ts"

const rules = MarkerScan.sectioned({
  ...DeepSeekV3.markers,
  call: (inner, raw) => {
    const sep = inner.indexOf("<｜tool▁sep｜>")
    if (sep < 0) return ToolCallParser.malformed(raw)
    return ToolCallParser.call(
      inner.slice(0, sep).trim(),
      ToolCallParser.jsonText(inner.slice(sep + "<｜tool▁sep｜>".length)),
      raw
    )
  }
})

export const format: ToolCallParser.Format = MarkerScan.format(rules)
