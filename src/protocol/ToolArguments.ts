/**
 * The canonical text of tool-call arguments (docs/requests.md "Canonical messages"): compact, key-sorted JSON as
 * Python's `json.dumps` writes it, from a JSON string or an object.
 *
 * **Details**
 * The text is part of a conversation state's identity (src/protocol/Canonical.ts canonicalizes every assistant tool
 * call with it), so a replay from Python or JavaScript lands on the same state. Recent texts are memoized by their
 * argument string (docs/performance.md lists the cache).
 */
import { Result } from "effect"
import * as PyJson from "../json/PythonJson.ts"
import * as BoundedMemo from "./BoundedMemo.ts"
import * as CanonicalCheck from "./CanonicalCheck.ts"

const checkJsonValue = (value: unknown, field: string): CanonicalCheck.Checked<PyJson.PyValue> => {
  if (value === null) return Result.succeed(null)
  if (typeof value === "string" || typeof value === "boolean") return Result.succeed(value)
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return CanonicalCheck.fail(`${field} numbers must be finite`, field)
    return Result.succeed(PyJson.numberFromJs(value))
  }
  if (Array.isArray(value)) return CanonicalCheck.traverse(value, (item) => checkJsonValue(item, field))
  if (CanonicalCheck.isDict(value)) {
    const entries = new Map<string, PyJson.PyValue>()
    for (const key of Object.keys(value)) {
      const checked = checkJsonValue(value[key], field)
      if (Result.isFailure(checked)) return Result.fail(checked.failure)
      entries.set(key, checked.success)
    }
    return Result.succeed(entries)
  }
  return CanonicalCheck.fail(
    `${field} must contain JSON-compatible values, got ${CanonicalCheck.pythonType(value)}`,
    field
  )
}

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * The canonical texts of argument strings seen recently: an agent echoes its whole history on every request, so
 * each earlier tool call's `arguments` would otherwise be parsed and re-serialized again on every turn. Only
 * successes are kept (an error names its field); the text depends on the argument string alone.
 */
const argumentTexts = new BoundedMemo.TextMemo(2 * 1024 * 1024)

/**
 * Canonical text of tool-call arguments: compact, key-sorted JSON with non-ASCII kept.
 *
 * **Details**
 * A string is parsed as Python's `json.loads` would (number text kept exactly, duplicate keys and
 * NaN/Infinity rejected); a JSON object may also be given directly. Integral floats with |x| ≤ 2^53−1 become ints,
 * matching JavaScript's `JSON.stringify`, so a replay from either language keeps one state identity.
 * `field` names the argument in error messages (e.g. `messages[1].tool_calls[0].function.arguments`).
 */
export const canonicalArguments = (raw: unknown, field: string): Result.Result<string, CanonicalCheck.CanonicalError> =>
  argumentsText(raw, () => field)

/** {@link canonicalArguments} naming its field only when it is needed (a memo hit builds no path text). */
export const argumentsText = (
  raw: unknown,
  field: () => string
): Result.Result<string, CanonicalCheck.CanonicalError> => {
  if (typeof raw !== "string") return canonicalArgumentsUncached(raw, field())
  const cached = argumentTexts.get(raw)
  if (cached !== undefined) return Result.succeed(cached)
  const text = canonicalArgumentsUncached(raw, field())
  if (Result.isSuccess(text)) argumentTexts.set(raw, text.success)
  return text
}

/** {@link canonicalArguments} without its memo (the reference the memo is tested against). */
export const canonicalArgumentsUncached = (
  raw: unknown,
  field: string
): Result.Result<string, CanonicalCheck.CanonicalError> => {
  let value: PyJson.PyValue
  if (typeof raw === "string") {
    const parsed = PyJson.parse(raw)
    switch (parsed._tag) {
      case "Invalid":
        return CanonicalCheck.fail(`${field} must be valid JSON`, field)
      case "DuplicateKey":
        return CanonicalCheck.fail(`${field} contains duplicate key: ${parsed.key}`, field)
      case "NonFinite":
        return CanonicalCheck.fail(`${field} contains non-finite number: ${parsed.text}`, field)
    }
    if (!(parsed.value instanceof Map)) {
      return CanonicalCheck.fail(
        `${field} must be a JSON object or a JSON string encoding an object, got ${PyJson.typeOf(parsed.value)}`,
        field
      )
    }
    const canonical = PyJson.canonicalNumbers(parsed.value)
    if (canonical === undefined) return CanonicalCheck.fail(`${field} numbers must be finite`, field)
    value = canonical
  } else {
    if (!CanonicalCheck.isDict(raw)) {
      return CanonicalCheck.fail(
        `${field} must be a JSON object or a JSON string encoding an object, got ${CanonicalCheck.pythonType(raw)}`,
        field
      )
    }
    const checked = checkJsonValue(raw, field)
    if (Result.isFailure(checked)) return Result.fail(checked.failure)
    value = checked.success
  }
  const text = PyJson.dumps(value)
  if (loneSurrogate.test(text)) return CanonicalCheck.fail(`${field} must be valid UTF-8`, field)
  return Result.succeed(text)
}
