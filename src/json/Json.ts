/**
 * A strict JSON reader that reports where each value sits in the source text.
 *
 * **Details**
 * Tool-call parsers emit arguments as the exact JSON text the model produced, so they need the span of the
 * `arguments` value inside `{"name": ..., "arguments": {...}}`, not a re-serialization. The reader also tells a value
 * cut off by the end of the text (`Incomplete`: a stream should wait for more) from one that can never become valid
 * (`Invalid`), and rejects duplicate object keys, which the canonical model rejects later. With `python` it also
 * serves `json.loads` (src/json/PythonJson.ts): the span of a number is its exact text.
 */

/** A parsed value with its span `[start, end)`; objects also carry the span of each member value. */
export interface Spanned {
  readonly value: unknown
  readonly start: number
  readonly end: number
  readonly members: ReadonlyMap<string, Spanned>
  readonly elements: ReadonlyArray<Spanned>
}

/** Why a text can never become valid JSON; `NonFinite` (the literal's text) only when reading with `python`. */
export type Flaw =
  | { readonly _tag: "Syntax" }
  | { readonly _tag: "DuplicateKey"; readonly key: string }
  | { readonly _tag: "NonFinite"; readonly text: "NaN" | "Infinity" | "-Infinity" }

export type ReadResult =
  | { readonly _tag: "Ok"; readonly spanned: Spanned }
  | { readonly _tag: "Incomplete" }
  | { readonly _tag: "Invalid"; readonly at: number; readonly flaw: Flaw }

export interface ReadOptions {
  /** The text ends here: a number that reaches its end is whole, not `Incomplete`. */
  readonly complete?: boolean
  /**
   * Fail as Python's `json.loads(text, object_pairs_hook=reject_duplicates, parse_constant=reject)` does, so its
   * first error is the one reported: `NaN`, `Infinity` and `-Infinity` stop the reading as `NonFinite` where they
   * stand, and a duplicate key is reported when its object closes (a syntax error before that wins), not at the key.
   */
  readonly python?: boolean
}

class Stop {
  readonly incomplete: boolean
  readonly at: number
  readonly flaw: Flaw

  constructor(incomplete: boolean, at: number, flaw: Flaw) {
    this.incomplete = incomplete
    this.at = at
    this.flaw = flaw
  }
}

const syntax: Flaw = { _tag: "Syntax" }
/** Deeper nesting is `Invalid` rather than a JavaScript stack overflow (the reader recurses once per level). */
const MAX_DEPTH = 2000

const noMembers: ReadonlyMap<string, Spanned> = new Map()
const numberPattern = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y
const looseNumber = /[-+0-9.eE]+/y
const isWs = (c: string | undefined) => c === " " || c === "\n" || c === "\r" || c === "\t"

/**
 * Read one JSON value starting at `from` (leading whitespace skipped); the text after it is left alone. Unless
 * `complete`, a number that reaches the end of the text is `Incomplete` (more digits may follow).
 */
export const readValue = (text: string, from = 0, options: ReadOptions = {}): ReadResult => {
  const { complete = false, python = false } = options
  let i = from
  const fail = (incomplete: boolean, flaw: Flaw = syntax): never => {
    throw new Stop(incomplete, i, flaw)
  }
  const skipWs = () => {
    while (isWs(text[i])) i++
  }
  const need = () => {
    if (i >= text.length) fail(true)
  }
  const readString = (): string => {
    const start = i
    i++
    for (;;) {
      need()
      const c = text.charCodeAt(i)
      if (c === 0x22) break
      if (c < 0x20) fail(false)
      if (c === 0x5c) {
        i++
        need()
        if (text[i] === "u") {
          for (let k = 1; k <= 4; k++) {
            if (i + k >= text.length) {
              i += k
              fail(true)
            }
            if (!/[0-9a-fA-F]/.test(text[i + k] ?? "")) {
              i += k
              fail(false)
            }
          }
          i += 4
        } else if (!"\"\\/bfnrt".includes(text[i] ?? "")) fail(false)
      }
      i++
    }
    i++
    return JSON.parse(text.slice(start, i)) as string
  }
  const literal = <A>(word: string, value: A): A => {
    const rest = text.slice(i, i + word.length)
    if (rest === word) {
      i += word.length
      return value
    }
    if (word.startsWith(rest) && i + rest.length >= text.length) {
      i = text.length
      fail(true)
    }
    return fail(false)
  }
  /** Whether the next token is `close` (an empty object or array), consumed when it is. */
  const closesNext = (close: string): boolean => {
    skipWs()
    need()
    if (text[i] !== close) return false
    i++
    return true
  }
  /** After a member or element: `close` ends the container (true), a comma leads to the next (false). */
  const closesAfterItem = (close: string): boolean => {
    skipWs()
    need()
    if (text[i] === ",") {
      i++
      return false
    }
    if (text[i] !== close) fail(false)
    i++
    return true
  }
  const read = (depth: number): Spanned => {
    if (depth > MAX_DEPTH) fail(false)
    skipWs()
    need()
    const start = i
    const c = text[i]
    if (c === "{") {
      i++
      const members = new Map<string, Spanned>()
      const value: Record<string, unknown> = {}
      let duplicate: string | undefined
      if (closesNext("}")) return { value, start, end: i, members, elements: [] }
      for (;;) {
        skipWs()
        need()
        if (text[i] !== "\"") fail(false)
        const key = readString()
        if (members.has(key)) {
          if (!python) fail(false, { _tag: "DuplicateKey", key })
          duplicate ??= key
        }
        skipWs()
        need()
        if (text[i] !== ":") fail(false)
        i++
        const member = read(depth + 1)
        members.set(key, member)
        setOwn(value, key, member.value)
        if (!closesAfterItem("}")) continue
        if (duplicate !== undefined) fail(false, { _tag: "DuplicateKey", key: duplicate })
        return { value, start, end: i, members, elements: [] }
      }
    }
    if (c === "[") {
      i++
      const elements: Array<Spanned> = []
      if (closesNext("]")) return { value: [], start, end: i, members: noMembers, elements }
      for (;;) {
        elements.push(read(depth + 1))
        if (closesAfterItem("]")) {
          return { value: elements.map((e) => e.value), start, end: i, members: noMembers, elements }
        }
      }
    }
    if (c === "\"") return { value: readString(), start, end: i, members: noMembers, elements: [] }
    if (c === "t") return { value: literal("true", true), start, end: i, members: noMembers, elements: [] }
    if (c === "f") return { value: literal("false", false), start, end: i, members: noMembers, elements: [] }
    if (c === "n") return { value: literal("null", null), start, end: i, members: noMembers, elements: [] }
    if (python) {
      const constant = c === "N"
        ? "NaN"
        : c === "I"
        ? "Infinity"
        : c === "-" && text[i + 1] === "I"
        ? "-Infinity"
        : undefined
      if (constant !== undefined) fail(false, { _tag: "NonFinite", text: literal(constant, constant) })
    }
    looseNumber.lastIndex = i
    const loose = looseNumber.exec(text)?.[0] ?? ""
    if (!complete && loose !== "" && i + loose.length >= text.length) {
      i = text.length
      fail(true)
    }
    numberPattern.lastIndex = i
    const m = numberPattern.exec(text)
    if (m === null) {
      if (c === "-" && i + 1 >= text.length) fail(true)
      fail(false)
    }
    i += m?.[0].length ?? 0
    return { value: Number(m?.[0]), start, end: i, members: noMembers, elements: [] }
  }
  try {
    return { _tag: "Ok", spanned: read(0) }
  } catch (error) {
    if (error instanceof Stop) {
      return error.incomplete ? { _tag: "Incomplete" } : { _tag: "Invalid", at: error.at, flaw: error.flaw }
    }
    throw error
  }
}

/** The value when `text` is exactly one JSON value (surrounding whitespace allowed), else `undefined`. */
export const readWhole = (text: string): Spanned | undefined => {
  const r = readValue(text, 0, { complete: true })
  if (r._tag !== "Ok") return undefined
  return text.slice(r.spanned.end).trim() === "" ? r.spanned : undefined
}

/**
 * Set `record[key]` as an own, enumerable data property, also for the key `__proto__` (which plain assignment would
 * take as the prototype): how a parsed or copied object keeps every key its text had.
 */
export const setOwn = (record: Record<string, unknown>, key: string, value: unknown): void => {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true })
}

/** A JSON object (not null, not an array). The project's one plain-object guard. */
export const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/**
 * A deep copy of a JSON value: arrays and objects are copied, every other value is kept as it is. For JSON it gives
 * what `structuredClone` gives (an own `__proto__` key stays an own key) at a fraction of its cost on small values
 * (docs/performance.md, "Figures behind code comments"), so it is the copy to take on a per-request path.
 *
 * **Details**
 * An object is copied with a spread, then its nested values are replaced by their copies: the spread clones the
 * source's layout, so a copy takes no more room than what it copies (an object built key by key from `{}` reserves
 * room for four properties), and it is faster.
 */
export const copy = <A>(value: A): A => {
  if (value === null || typeof value !== "object") return value
  // The copy has the type of what it copies: only arrays and plain objects are rebuilt, key by key.
  if (Array.isArray(value)) return value.map(copy) as A
  const out: Record<string, unknown> = { ...(value as Readonly<Record<string, unknown>>) }
  for (const key of Object.keys(out)) {
    const item = out[key]
    if (item === null || typeof item !== "object") continue
    const copied = copy(item)
    if (key === "__proto__") {
      setOwn(out, key, copied)
    } else out[key] = copied
  }
  return out as A
}

interface Visit {
  readonly value: unknown
  readonly depth: number
  readonly parent: Visit | undefined
  readonly key: string | number | undefined
}

/**
 * Where a parsed JSON value nests deeper than `limit` levels (an object or array is one level): the path of the first
 * value found beyond the limit (keys and indices from the root), or `undefined` when it stays within. Iterative, so
 * any depth `JSON.parse` accepted is measured without recursion.
 */
export const pathBeyondDepth = (value: unknown, limit: number): ReadonlyArray<string | number> | undefined => {
  const stack: Array<Visit> = [{ value, depth: 0, parent: undefined, key: undefined }]
  while (stack.length > 0) {
    const visit = stack.pop()!
    if (visit.value === null || typeof visit.value !== "object") continue
    const depth = visit.depth + 1
    if (depth > limit) {
      const path: Array<string | number> = []
      for (let at: Visit | undefined = visit; at?.key !== undefined; at = at.parent) path.push(at.key)
      return path.reverse()
    }
    if (Array.isArray(visit.value)) {
      visit.value.forEach((item: unknown, key) => stack.push({ value: item, depth, parent: visit, key }))
    } else {
      for (const [key, item] of Object.entries(visit.value)) stack.push({ value: item, depth, parent: visit, key })
    }
  }
  return undefined
}
