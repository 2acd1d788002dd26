/**
 * Python `json` semantics in TypeScript: `json.loads` (number text kept exactly) and
 * `json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`.
 *
 * **Details**
 * State hashes and canonical tool-call arguments must be byte-identical to the Python reference, so numbers,
 * key order and string escapes follow CPython: integers keep every digit, floats print as `repr(float)`
 * (`1e+16`, `1.5e-05`, `0.1`), keys sort by code point, and only `"`, `\` and C0 controls are escaped.
 */

/** A Python number: an `int` (exact decimal text) or a `float`. */
export type PyNumber = { readonly _tag: "Int"; readonly text: string } | { readonly _tag: "Float"; readonly value: number }

/** A parsed Python JSON value; objects are `Map`s so key order and non-identifier keys survive. */
export type PyValue = null | boolean | string | PyNumber | ReadonlyArray<PyValue> | ReadonlyMap<string, PyValue>

const MAX_SAFE = 2 ** 53 - 1

/** The Python value of a JavaScript number (integral numbers below 1e21, which JS prints as digits, are ints). */
export const numberFromJs = (x: number): PyNumber =>
  Number.isInteger(x) && Math.abs(x) < 1e21
    ? { _tag: "Int", text: Math.abs(x) <= MAX_SAFE ? String(x) : BigInt(x).toString() }
    : { _tag: "Float", value: x }

/** Python's `repr(float)`: shortest round-trip digits, fixed for 1e-4 ≤ |x| < 1e16, else `d.ddde±XX`. */
export const floatRepr = (x: number): string => {
  if (Number.isNaN(x)) return "NaN"
  if (x === Infinity) return "Infinity"
  if (x === -Infinity) return "-Infinity"
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0"
  const sign = x < 0 ? "-" : ""
  const [mantissa = "", exponentText = "0"] = Math.abs(x).toExponential().split("e")
  const digits = mantissa.replace(".", "")
  const exponent = Number(exponentText)
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`
    const intLength = exponent + 1
    if (digits.length <= intLength) return `${sign}${digits}${"0".repeat(intLength - digits.length)}.0`
    return `${sign}${digits.slice(0, intLength)}.${digits.slice(intLength)}`
  }
  const exp = Math.abs(exponent) < 10 ? `0${Math.abs(exponent)}` : String(Math.abs(exponent))
  const head = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits
  return `${sign}${head}e${exponent < 0 ? "-" : "+"}${exp}`
}

const numberText = (n: PyNumber): string => (n._tag === "Int" ? n.text : floatRepr(n.value))

/** Compare two strings by Unicode code point, as Python's `sorted` does (UTF-16 order differs above U+D7FF). */
export const compareKeys = (a: string, b: string): number => {
  const length = Math.min(a.length, b.length)
  for (let i = 0; i < length; i++) {
    let x = a.charCodeAt(i)
    let y = b.charCodeAt(i)
    if (x !== y) {
      if (x >= 0xd800 && y >= 0xd800) {
        x = x >= 0xe000 ? x - 0x800 : x + 0x2000
        y = y >= 0xe000 ? y - 0x800 : y + 0x2000
      }
      return x - y
    }
  }
  return a.length - b.length
}

const escapes: Record<string, string> = { "\"": "\\\"", "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" }

/** A JSON string literal as Python writes it with `ensure_ascii=False` (lone surrogates are left raw). */
export const quote = (s: string): string =>
  `"${
    s.replace(/[\u0000-\u001f"\\]/g, (c) => escapes[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
  }"`

const isPyNumber = (value: object): value is PyNumber => "_tag" in value && !(value instanceof Map) && !Array.isArray(value)

/** `json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)` of a parsed Python value. */
export const dumps = (value: PyValue): string => {
  if (value === null) return "null"
  if (value === true) return "true"
  if (value === false) return "false"
  if (typeof value === "string") return quote(value)
  if (value instanceof Map) {
    const keys = [...value.keys()].sort(compareKeys)
    return `{${keys.map((k) => `${quote(k)}:${dumps(value.get(k) ?? null)}`).join(",")}}`
  }
  if (Array.isArray(value)) return `[${value.map(dumps).join(",")}]`
  if (isPyNumber(value)) return numberText(value)
  return "null"
}

/** A non-null, non-array object: a JSON object as JavaScript holds it. */
export const isRecord = (value: unknown): value is { readonly [key: string]: unknown } =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A JSON value as JavaScript holds it (what `JSON.parse` gives, or a Schema.Json). */
export type JsJson = null | boolean | number | string | ReadonlyArray<JsJson> | { readonly [key: string]: JsJson }

/** `json.dumps(..., ensure_ascii=False, separators=(",", ":"), sort_keys=True)` of a JavaScript JSON value. */
export const dumpsJs = (value: unknown): string => {
  if (value === null || value === undefined) return "null"
  if (value === true) return "true"
  if (value === false) return "false"
  if (typeof value === "string") return quote(value)
  if (typeof value === "number") return numberText(numberFromJs(value))
  if (Array.isArray(value)) return `[${value.map(dumpsJs).join(",")}]`
  if (isRecord(value)) {
    const record = value
    const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort(compareKeys)
    return `{${keys.map((k) => `${quote(k)}:${dumpsJs(record[k])}`).join(",")}}`
  }
  // Python's `default=str` for odd values.
  return quote(String(value))
}

/** Python's `type(value)` text of a parsed value. */
export const typeOf = (value: PyValue): string => {
  if (value === null) return "<class 'NoneType'>"
  if (typeof value === "boolean") return "<class 'bool'>"
  if (typeof value === "string") return "<class 'str'>"
  if (value instanceof Map) return "<class 'dict'>"
  if (Array.isArray(value)) return "<class 'list'>"
  return isPyNumber(value) && value._tag === "Int" ? "<class 'int'>" : "<class 'float'>"
}

/**
 * Integral floats with |x| ≤ 2^53−1 become ints; `undefined` when a float is not finite (`1e400`).
 * This is the reference's `_canonical_json_value` on parsed arguments.
 */
export const canonicalNumbers = (value: PyValue): PyValue | undefined => {
  if (value === null || typeof value === "boolean" || typeof value === "string") return value
  if (value instanceof Map) {
    const out = new Map<string, PyValue>()
    for (const [k, v] of value) {
      const c = canonicalNumbers(v)
      if (c === undefined) return undefined
      out.set(k, c)
    }
    return out
  }
  if (Array.isArray(value)) {
    const out: Array<PyValue> = []
    for (const v of value) {
      const c = canonicalNumbers(v)
      if (c === undefined) return undefined
      out.push(c)
    }
    return out
  }
  if (!isPyNumber(value) || value._tag === "Int") return value
  if (!Number.isFinite(value.value)) return undefined
  if (Number.isInteger(value.value) && Math.abs(value.value) <= MAX_SAFE) {
    return { _tag: "Int", text: String(value.value === 0 ? 0 : value.value) }
  }
  return value
}

export type ParseResult =
  | { readonly _tag: "Parsed"; readonly value: PyValue }
  | { readonly _tag: "Invalid" }
  | { readonly _tag: "DuplicateKey"; readonly key: string }
  | { readonly _tag: "NonFinite"; readonly text: string }

class Stop {
  constructor(readonly result: ParseResult) {}
}

const MAX_DEPTH = 5000

/**
 * `json.loads(text, object_pairs_hook=reject_duplicates, parse_constant=reject_non_finite)`.
 *
 * **Details**
 * Errors come in CPython's order: `NaN`/`Infinity` as soon as they are read, a duplicate key when its object
 * closes, anything else malformed (including trailing data, a BOM, raw control characters in strings) as `Invalid`.
 */
export const parse = (text: string): ParseResult => {
  let i = 0
  const invalid = (): never => {
    throw new Stop({ _tag: "Invalid" })
  }
  const ws = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i)
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++
      else break
    }
  }
  const constant = (name: string) => {
    throw new Stop({ _tag: "NonFinite", text: name })
  }
  const readString = (): string => {
    i++ // opening quote
    let out = ""
    let start = i
    for (;;) {
      if (i >= text.length) return invalid()
      const c = text.charCodeAt(i)
      if (c === 0x22) {
        out += text.slice(start, i)
        i++
        return out
      }
      if (c < 0x20) return invalid()
      if (c === 0x5c) {
        out += text.slice(start, i)
        const e = text[i + 1]
        switch (e) {
          case "\"":
            out += "\""
            break
          case "\\":
            out += "\\"
            break
          case "/":
            out += "/"
            break
          case "b":
            out += "\b"
            break
          case "f":
            out += "\f"
            break
          case "n":
            out += "\n"
            break
          case "r":
            out += "\r"
            break
          case "t":
            out += "\t"
            break
          case "u": {
            const hex = text.slice(i + 2, i + 6)
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) return invalid()
            out += String.fromCharCode(parseInt(hex, 16))
            i += 4
            break
          }
          default:
            return invalid()
        }
        i += 2
        start = i
        continue
      }
      i++
    }
  }
  const numberPattern = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/y
  const value = (depth: number): PyValue => {
    if (depth > MAX_DEPTH) return invalid()
    ws()
    const c = text[i]
    switch (c) {
      case "{": {
        i++
        const map = new Map<string, PyValue>()
        let duplicate: string | undefined
        ws()
        if (text[i] === "}") {
          i++
          return map
        }
        for (;;) {
          ws()
          if (text[i] !== "\"") return invalid()
          const key = readString()
          ws()
          if (text[i] !== ":") return invalid()
          i++
          const v = value(depth + 1)
          if (map.has(key) && duplicate === undefined) duplicate = key
          if (!map.has(key)) map.set(key, v)
          ws()
          if (text[i] === ",") {
            i++
            continue
          }
          if (text[i] === "}") {
            i++
            break
          }
          return invalid()
        }
        if (duplicate !== undefined) throw new Stop({ _tag: "DuplicateKey", key: duplicate })
        return map
      }
      case "[": {
        i++
        const list: Array<PyValue> = []
        ws()
        if (text[i] === "]") {
          i++
          return list
        }
        for (;;) {
          list.push(value(depth + 1))
          ws()
          if (text[i] === ",") {
            i++
            continue
          }
          if (text[i] === "]") {
            i++
            return list
          }
          return invalid()
        }
      }
      case "\"":
        return readString()
      case "n":
        if (text.startsWith("null", i)) {
          i += 4
          return null
        }
        return invalid()
      case "t":
        if (text.startsWith("true", i)) {
          i += 4
          return true
        }
        return invalid()
      case "f":
        if (text.startsWith("false", i)) {
          i += 5
          return false
        }
        return invalid()
      case "N":
        return text.startsWith("NaN", i) ? constant("NaN") : invalid()
      case "I":
        return text.startsWith("Infinity", i) ? constant("Infinity") : invalid()
      default: {
        if (c === "-" && text.startsWith("-Infinity", i)) return constant("-Infinity")
        numberPattern.lastIndex = i
        const m = numberPattern.exec(text)
        if (m === null) return invalid()
        i += m[0].length
        if (m[1] === undefined && m[2] === undefined) return { _tag: "Int", text: m[0] === "-0" ? "0" : m[0] }
        return { _tag: "Float", value: Number(m[0]) }
      }
    }
  }
  try {
    const v = value(0)
    ws()
    if (i !== text.length) return { _tag: "Invalid" }
    return { _tag: "Parsed", value: v }
  } catch (error) {
    if (error instanceof Stop) return error.result
    throw error
  }
}
