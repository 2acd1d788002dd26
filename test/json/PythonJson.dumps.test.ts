/**
 * `PythonJson.dumpsJs` (one-pass writer) against the implementation it replaced (kept here as the reference: per-value
 * template strings, `map`/`join`, `Array.prototype.sort` and a regular-expression `replace` per string) on random and
 * adversarial values: escapes, control characters, surrogate pairs and lone surrogates, keys that sort differently by
 * code point and by UTF-16 unit, floats such as 1e21, -0, 1.0 and 5e-324, `undefined` members, odd values, nesting.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Json from "../../src/json/Json.ts"
import * as PythonJson from "../../src/json/PythonJson.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

// ---- the reference: the implementation before the one-pass writer, verbatim but for names ----------------------
const MAX_SAFE = 2 ** 53 - 1
const escapes: Record<string, string> = {
  "\"": "\\\"",
  "\\": "\\\\",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t"
}
const quoteReference = (s: string): string =>
  `"${s.replace(/[\u0000-\u001f"\\]/g, (c) => escapes[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}"`
const numberReference = (x: number): string =>
  Number.isInteger(x) && Math.abs(x) < 1e21
    ? Math.abs(x) <= MAX_SAFE ? String(x) : BigInt(x).toString()
    : PythonJson.floatRepr(x)
const dumpsJsReference = (value: unknown): string => {
  if (value === null || value === undefined) return "null"
  if (value === true) return "true"
  if (value === false) return "false"
  if (typeof value === "string") return quoteReference(value)
  if (typeof value === "number") return numberReference(value)
  if (Array.isArray(value)) return `[${value.map(dumpsJsReference).join(",")}]`
  if (Json.isObject(value)) {
    const record = value
    const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort(PythonJson.compareKeys)
    return `{${keys.map((k) => `${quoteReference(k)}:${dumpsJsReference(record[k])}`).join(",")}}`
  }
  return quoteReference(String(value))
}
// -------------------------------------------------------------------------------------------------------------------

const seeded = SeededRandom.floats

const numbers: ReadonlyArray<number> = [
  0,
  -0,
  1,
  -1,
  1.0,
  0.1,
  1.5,
  -2.5,
  1e21,
  -1e21,
  1e21 - 65536,
  1e16,
  1e15 + 0.5,
  1e-4,
  1e-5,
  1e-7,
  5e-324,
  1.7976931348623157e308,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53) - 2,
  123456789012345678,
  0.30000000000000004,
  Number.NaN,
  Infinity,
  -Infinity,
  100,
  1e300
]
/** Pieces strings are made of: plain text, every escaped character, non-ASCII, surrogate pairs and lone halves. */
const pieces: ReadonlyArray<string> = [
  "a",
  "role",
  "content",
  " ",
  "\"",
  "\\",
  "\n",
  "\r",
  "\t",
  "\b",
  "\f",
  "\u0000",
  "\u0001",
  "\u001f",
  "\u007f",
  "\u2028",
  "é",
  "Zürich",
  "天气",
  "😀",
  "\ud83d",
  "\ude00",
  "\ud800",
  "\udfff",
  "\ue000",
  "\uffff",
  "/",
  "</script>"
]

const randomString = (random: () => number): string => {
  let out = ""
  const n = Math.floor(random() * 6)
  for (let i = 0; i < n; i++) out += pieces[Math.floor(random() * pieces.length)] ?? ""
  return out
}

const randomValue = (random: () => number, depth: number): unknown => {
  const roll = random() * (depth > 3 ? 0.6 : 1)
  if (roll < 0.2) return randomString(random)
  if (roll < 0.35) return numbers[Math.floor(random() * numbers.length)]
  if (roll < 0.45) return [null, true, false, undefined][Math.floor(random() * 4)]
  if (roll < 0.5) return Math.floor(random() * 2 ** 31) * (random() < 0.5 ? -1 : 1)
  if (roll < 0.6) return random() * 10 ** Math.floor(random() * 40 - 20)
  if (roll < 0.8) return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1))
  const out: Record<string, unknown> = random() < 0.1 ? Object.create(null) : {}
  // Sometimes more than the insertion sort's 16 keys.
  const n = Math.floor(random() * (random() < 0.1 ? 24 : 5))
  for (let i = 0; i < n; i++) out[randomString(random)] = randomValue(random, depth + 1)
  return out
}

describe("PythonJson.dumpsJs against the implementation it replaced", () => {
  it("prints 20,000 random values exactly as the reference", () => {
    const random = seeded(13)
    for (let i = 0; i < 20_000; i++) {
      const value = randomValue(random, 0)
      assert.strictEqual(PythonJson.dumpsJs(value), dumpsJsReference(value))
    }
  })

  it("prints adversarial values exactly as the reference", () => {
    const odd = new Date(0)
    const values: ReadonlyArray<unknown> = [
      ...numbers,
      ...pieces,
      pieces.join(""),
      "x".repeat(10_000) + "\n" + "y".repeat(10_000),
      { "\ue000": 1, "😀": 2, z: 3, A: 4, "é": 5, "": 6, "\ud83d": 7, "\udfff": 8 },
      { b: undefined, a: [undefined, null], c: { d: undefined } },
      [[[[[]]]], {}, [{}], ""],
      {
        role: "assistant",
        content: "",
        reasoning_content: "r",
        tool_calls: [{ id: "c", function: { name: "f", arguments: "{}" } }]
      },
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${(i * 7919) % 97}`, i])),
      [odd, Symbol("s"), 12n, () => 1],
      { date: odd, big: 2n ** 70n }
    ]
    for (const value of values) assert.strictEqual(PythonJson.dumpsJs(value), dumpsJsReference(value))
    assert.strictEqual(PythonJson.dumpsJs(undefined), "null")
  })

  it("quotes every string as the reference", () => {
    const random = seeded(29)
    for (let i = 0; i < 20_000; i++) {
      const s = randomString(random) + randomString(random)
      assert.strictEqual(PythonJson.quote(s), quoteReference(s))
    }
    for (let c = 0; c < 0x10000; c++) {
      const s = `a${String.fromCharCode(c)}b`
      assert.strictEqual(PythonJson.quote(s), quoteReference(s))
    }
  })
})
