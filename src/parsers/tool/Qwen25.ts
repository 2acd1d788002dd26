/**
 * `qwen25` (alias `qwen`, `hermes`): `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, repeated.
 *
 * **Details**
 * The newline after `<tool_call>` is optional (Hermes writes none). Each block holds one JSON object with `name` and
 * `arguments` (or `parameters`); the arguments are kept as the model's exact JSON text.
 */
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

const rules = [
  MarkerScan.delimited("<tool_call>", "</tool_call>", (inner, raw) => MarkerScan.jsonCall(inner.trim(), raw))
]

export const format: ToolCallParser.Format = MarkerScan.format(rules)
