/**
 * `qwen3_coder`: XML-style calls.
 *
 * ```
 * <tool_call>
 * <function=NAME>
 * <parameter=P>
 * VALUE
 * </parameter>
 * </function>
 * </tool_call>
 * ```
 *
 * **Details**
 * One leading and one trailing newline of a value are part of the syntax and removed. Values are typed by the tool's
 * JSON schema (as SGLang does): integer/number/boolean/object/array are read as JSON, `null` is null, anything else
 * (or a value that does not read) stays a string. A missing `</parameter>` is tolerated.
 */
import * as Json from "../../json/Json.ts"
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

/** Type a raw parameter value by its JSON-schema type. */
export const typedValue = (raw: string, type: string | undefined): unknown => {
  if (raw === "null") return null
  const t = type?.toLowerCase()
  if (t === "string" || t === "str" || t === "text" || t === "enum") return raw
  if (t === "integer" || t === "int") return /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw
  if (t === "number" || t === "float" || t === "double") {
    const n = Number(raw.trim())
    return raw.trim() !== "" && Number.isFinite(n) ? n : raw
  }
  if (t === "boolean" || t === "bool") {
    const v = raw.trim().toLowerCase()
    return v === "true" ? true : v === "false" ? false : raw
  }
  const parsed = Json.readWhole(raw)
  return parsed === undefined ? raw : parsed.value
}

const functionPattern = /^\s*<function=([^>\n]+)>([\s\S]*?)(?:<\/function>\s*)?$/
const parameterPattern = /<parameter=([^>\n]+)>([\s\S]*?)(?:<\/parameter>|(?=<parameter=)|(?=<\/function>)|$)/g

const body = (tools: ToolCallParser.ToolIndex) => (inner: string, raw: string): ToolCallParser.Event => {
  const fn = functionPattern.exec(inner)
  if (fn === null) return ToolCallParser.malformed(raw)
  const name = (fn[1] ?? "").trim()
  const args: Record<string, unknown> = {}
  for (const m of (fn[2] ?? "").matchAll(parameterPattern)) {
    const key = (m[1] ?? "").trim()
    const value = (m[2] ?? "").replace(/^\n/, "").replace(/\n$/, "")
    Json.setOwn(args, key, typedValue(value, tools.parameterType(name, key)))
  }
  return ToolCallParser.call(name, ToolCallParser.value(args), raw)
}

export const format: ToolCallParser.Format = {
  scanner: (tools) => {
    const rules = [MarkerScan.delimited("<tool_call>", "</tool_call>", body(tools))]
    return { step: (text, final) => MarkerScan.scanRules(text, final, rules) }
  }
}
