/**
 * `qwen25` (alias `qwen`, `hermes`): `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, repeated.
 *
 * **Details**
 * The newline after `<tool_call>` is optional (Hermes writes none). Each block holds one JSON object with `name` and
 * `arguments` (or `parameters`); the arguments are kept as the model's exact JSON text.
 */
import * as Scan from "../scan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

const rules = [Scan.delimited("<tool_call>", "</tool_call>", (inner, raw) => Scan.jsonCall(inner.trim(), raw))]

export const format: ToolCallParser.Format = {
  scanner: () => ({ step: (text, final) => Scan.scanRules(text, final, rules) })
}
