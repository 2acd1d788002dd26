/**
 * `glm45` (alias `glm`): `<tool_call>NAME\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n…</tool_call>`.
 *
 * **Details**
 * A literal backslash-n (`\n` written as two characters) is accepted where a newline is expected, as SGLang does.
 * A value of a `string` parameter stays raw; other values are read as JSON (also after un-escaping `\"`), else kept
 * as a string.
 */
import * as Json from "../../json/Json.ts"
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

const pairPattern = /<arg_key>([\s\S]*?)<\/arg_key>\s*(?:\\n\s*)*<arg_value>([\s\S]*?)<\/arg_value>/g

const typed = (raw: string, type: string | undefined): unknown => {
  if (type === "string") return raw
  const direct = Json.readWhole(raw)
  if (direct !== undefined) return direct.value
  const unescaped = Json.readWhole(raw.replaceAll("\\\"", "\""))
  return unescaped === undefined ? raw : unescaped.value
}

const body = (tools: ToolCallParser.ToolIndex) => (inner: string, raw: string): ToolCallParser.Event => {
  const name = (inner.split(/\n|\\n|<arg_key>/)[0] ?? "").trim()
  if (name === "") return ToolCallParser.malformed(raw)
  const args: Record<string, unknown> = {}
  for (const m of inner.matchAll(pairPattern)) {
    const key = (m[1] ?? "").trim()
    Json.setOwn(args, key, typed(m[2] ?? "", tools.parameterType(name, key)))
  }
  return ToolCallParser.call(name, ToolCallParser.value(args), raw)
}

export const format: ToolCallParser.Format = {
  scanner: (tools) => {
    const rules = [MarkerScan.delimited("<tool_call>", "</tool_call>", body(tools))]
    return { step: (text, final) => MarkerScan.scanRules(text, final, rules) }
  }
}
