/**
 * Python `json` semantics in TypeScript: `json.loads` (number text kept exactly) and
 * `json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`.
 *
 * **Details**
 * State hashes and canonical tool-call arguments must be byte-identical to the Python reference, so numbers,
 * key order and string escapes follow CPython: integers keep every digit, floats print as `repr(float)`
 * (`1e+16`, `1.5e-05`, `0.1`), keys sort by code point, and only `"`, `\` and C0 controls are escaped.
 */
import * as Json from "./Json.ts"

/** A Python number: an `int` (exact decimal text) or a `float`. */
export type PyNumber = { readonly _tag: "Int"; readonly text: string } | {
  readonly _tag: "Float"
  readonly value: number
}

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

/** A JSON string literal as Python writes it with `ensure_ascii=False` (lone surrogates are left raw). */
export const quote = (s: string): string => writeString("", s)

const isPyNumber = (value: object): value is PyNumber =>
  "_tag" in value && !(value instanceof Map) && !Array.isArray(value)

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

/** A JSON value as JavaScript holds it (what `JSON.parse` gives, or a Schema.Json). */
export type JsJson = null | boolean | number | string | ReadonlyArray<JsJson> | { readonly [key: string]: JsJson }

/**
 * `json.dumps(..., ensure_ascii=False, separators=(",", ":"), sort_keys=True)` of a JavaScript JSON value.
 *
 * **Details**
 * Written in one pass into one string: no array of member texts per object, no `join`, no template string per
 * member, and a string without a character to escape is copied as it is. `undefined` prints as `null` (and object
 * members whose value is `undefined` are left out); other odd values print as Python's `default=str` would.
 */
export const dumpsJs = (value: unknown): string => writeJs("", value)

const writeJs = (out: string, value: unknown): string => {
  if (typeof value === "string") return writeString(out, value)
  if (typeof value === "object") {
    if (value === null) return `${out}null`
    if (Array.isArray(value)) {
      const n = value.length
      if (n === 0) return `${out}[]`
      out = writeJs(`${out}[`, value[0])
      for (let i = 1; i < n; i++) out = writeJs(`${out},`, value[i])
      return `${out}]`
    }
    return writeObject(out, value as Readonly<Record<string, unknown>>)
  }
  if (typeof value === "number") return out + numberJs(value)
  if (value === undefined) return `${out}null`
  if (value === true) return `${out}true`
  if (value === false) return `${out}false`
  // Python's `default=str` for odd values.
  return writeString(out, String(value))
}

const writeObject = (out: string, record: Readonly<Record<string, unknown>>): string => {
  const keys = Object.keys(record)
  let n = 0
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    if (record[key] !== undefined) keys[n++] = key
  }
  keys.length = n
  sortKeys(keys)
  out += "{"
  for (let i = 0; i < n; i++) {
    const key = keys[i]!
    out = writeJs(`${writeString(i === 0 ? out : `${out},`, key)}:`, record[key])
  }
  return `${out}}`
}

/** Sort keys by code point ({@link compareKeys}): an insertion sort for the few keys most objects have. */
const sortKeys = (keys: Array<string>): void => {
  const n = keys.length
  if (n > 16) {
    keys.sort(compareKeys)
    return
  }
  for (let i = 1; i < n; i++) {
    const key = keys[i]!
    let j = i - 1
    while (j >= 0 && compareKeys(keys[j]!, key) > 0) {
      keys[j + 1] = keys[j]!
      j--
    }
    keys[j + 1] = key
  }
}

/** The text of a JavaScript number: an int's digits (integral and below 1e21) or `repr(float)`. */
const numberJs = (x: number): string =>
  Number.isInteger(x) && Math.abs(x) < 1e21
    ? Math.abs(x) <= MAX_SAFE ? String(x) : BigInt(x).toString()
    : floatRepr(x)

/** Characters {@link quote} escapes. */
const toEscape = /[\u0000-\u001f"\\]/

/** `out` followed by {@link quote} of `s`, escaping piece by piece only when there is something to escape. */
const writeString = (out: string, s: string): string => {
  if (!toEscape.test(s)) return `${out}"${s}"`
  out += "\""
  let from = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue
    if (i > from) out += s.slice(from, i)
    out += escapeOf(c)
    from = i + 1
  }
  if (from < s.length) out += s.slice(from)
  return `${out}"`
}

const escapeOf = (c: number): string => {
  switch (c) {
    case 0x22:
      return "\\\""
    case 0x5c:
      return "\\\\"
    case 0x08:
      return "\\b"
    case 0x0c:
      return "\\f"
    case 0x0a:
      return "\\n"
    case 0x0d:
      return "\\r"
    case 0x09:
      return "\\t"
    default:
      return `\\u${c.toString(16).padStart(4, "0")}`
  }
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

/** A number's exact text as Python reads it: an `int` unless it has a fraction or an exponent. */
const numberFromText = (text: string): PyNumber =>
  /[.eE]/.test(text) ? { _tag: "Float", value: Number(text) } : { _tag: "Int", text: text === "-0" ? "0" : text }

const fromSpanned = (text: string, spanned: Json.Spanned): PyValue => {
  const value = spanned.value
  if (value === null || typeof value === "boolean" || typeof value === "string") return value
  if (typeof value === "number") return numberFromText(text.slice(spanned.start, spanned.end))
  if (Array.isArray(value)) {
    const list: Array<PyValue> = []
    for (const element of spanned.elements) list.push(fromSpanned(text, element))
    return list
  }
  const map = new Map<string, PyValue>()
  for (const [key, member] of spanned.members) map.set(key, fromSpanned(text, member))
  return map
}

/**
 * `json.loads(text, object_pairs_hook=reject_duplicates, parse_constant=reject_non_finite)`.
 *
 * **Details**
 * Errors come in CPython's order (see `Json.ReadOptions.python`): `NaN`/`Infinity` as soon as they are read, a
 * duplicate key when its object closes, anything else malformed (including trailing data, a BOM, raw control
 * characters in strings) as `Invalid`.
 */
export const parse = (text: string): ParseResult => {
  const read = Json.readValue(text, 0, { complete: true, python: true })
  if (read._tag === "Incomplete") return { _tag: "Invalid" }
  if (read._tag === "Invalid") return read.flaw._tag === "Syntax" ? { _tag: "Invalid" } : read.flaw
  // Only JSON whitespace may follow; `String.trim` would also drop a BOM or U+00A0, which Python rejects.
  if (!/^[ \t\n\r]*$/.test(text.slice(read.spanned.end))) return { _tag: "Invalid" }
  return { _tag: "Parsed", value: fromSpanned(text, read.spanned) }
}
