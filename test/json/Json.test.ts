import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as Json from "../../src/json/Json.ts"

const python = { complete: true, python: true } as const

describe("Json.readValue", () => {
  it("reports the span of each value, member and element", () => {
    const text = " {\"a\": [1.50, true], \"b\": \"x\"} tail"
    const r = Json.readValue(text)
    assert.strictEqual(r._tag, "Ok")
    if (r._tag !== "Ok") return
    assert.strictEqual(text.slice(r.spanned.start, r.spanned.end), "{\"a\": [1.50, true], \"b\": \"x\"}")
    const a = r.spanned.members.get("a")
    assert.strictEqual(a && text.slice(a.start, a.end), "[1.50, true]")
    const first = a?.elements[0]
    assert.strictEqual(first && text.slice(first.start, first.end), "1.50")
    assert.deepStrictEqual(r.spanned.value, { a: [1.5, true], b: "x" })
  })

  it("tells text cut off from text that can never be valid", () => {
    assert.strictEqual(Json.readValue("{\"a\": [1, tr")._tag, "Incomplete")
    assert.strictEqual(Json.readValue("[12")._tag, "Incomplete")
    assert.strictEqual(Json.readValue("[12", 0, { complete: true })._tag, "Incomplete")
    assert.strictEqual(Json.readValue("12", 0, { complete: true })._tag, "Ok")
    assert.deepStrictEqual(Json.readValue("[1,]"), { _tag: "Invalid", at: 3, flaw: { _tag: "Syntax" } })
  })

  it("rejects a duplicate key at the key, so a stream stops waiting at once", () => {
    assert.deepStrictEqual(Json.readValue("{\"a\":1,\"a\":"), {
      _tag: "Invalid",
      at: 10,
      flaw: { _tag: "DuplicateKey", key: "a" }
    })
  })

  it("reads NaN and Infinity as syntax errors unless asked for Python's reading", () => {
    for (const text of ["NaN", "Infinity", "-Infinity", "[NaN]"]) {
      const r = Json.readValue(text, 0, { complete: true })
      assert.isTrue(r._tag === "Invalid" && r.flaw._tag === "Syntax", text)
    }
  })

  it("turns nesting deeper than 2000 levels into Invalid instead of overflowing the stack", () => {
    const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth)
    assert.strictEqual(Json.readValue(nested(2001))._tag, "Ok")
    assert.strictEqual(Json.readValue(nested(2002))._tag, "Invalid")
    assert.strictEqual(Json.readValue(nested(100_000))._tag, "Invalid")
  })
})

describe("Json.readValue with python", () => {
  it("stops at NaN, Infinity and -Infinity, naming the literal", () => {
    for (const literal of ["NaN", "Infinity", "-Infinity"] as const) {
      const r = Json.readValue(`{"a":[1,${literal}`, 0, python)
      assert.deepStrictEqual(r._tag === "Invalid" ? r.flaw : r, { _tag: "NonFinite", text: literal })
    }
  })

  it("keeps a cut-off literal Incomplete and a misspelt one a syntax error", () => {
    assert.strictEqual(Json.readValue("[Infin", 0, python)._tag, "Incomplete")
    const r = Json.readValue("[-Inf]", 0, python)
    assert.isTrue(r._tag === "Invalid" && r.flaw._tag === "Syntax")
  })

  it("reports a duplicate key when its object closes, as CPython's object_pairs_hook does", () => {
    assert.deepStrictEqual(Json.readValue("[{\"k\":1,\"k\":2,\"j\":3}, NaN]", 0, python), {
      _tag: "Invalid",
      at: 20,
      flaw: { _tag: "DuplicateKey", key: "k" }
    })
    assert.strictEqual(Json.readValue("{\"k\":1,\"k\":2,", 0, python)._tag, "Incomplete")
    const later = Json.readValue("{\"k\":1,\"k\":NaN}", 0, python)
    assert.isTrue(later._tag === "Invalid" && later.flaw._tag === "NonFinite")
    const broken = Json.readValue("{\"k\":1,\"k\":2,]", 0, python)
    assert.isTrue(broken._tag === "Invalid" && broken.flaw._tag === "Syntax")
  })
})

describe("Json.readWhole", () => {
  it("accepts exactly one value with surrounding whitespace", () => {
    assert.deepStrictEqual(Json.readWhole(" [1] \n")?.value, [1])
    assert.isUndefined(Json.readWhole("[1] x"))
    assert.isUndefined(Json.readWhole("[1"))
  })
})

describe("Json.copy", () => {
  it("copies arrays and objects deeply, as structuredClone does for JSON", () => {
    const value = JSON.parse(
      `{"role":"assistant","content":[{"type":"text","text":"hi"}],"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}],"n":-0,"x":null,"__proto__":{"own":true}}`
    )
    const copied = Json.copy(value)
    assert.deepStrictEqual(copied, structuredClone(value))
    assert.notStrictEqual(copied, value)
    assert.notStrictEqual(copied.content, value.content)
    assert.notStrictEqual(copied.tool_calls[0].function, value.tool_calls[0].function)
    assert.isTrue(Object.hasOwn(copied, "__proto__"))
    assert.strictEqual(Object.getPrototypeOf(copied), Object.prototype)
    value.content[0].text = "changed"
    assert.strictEqual(copied.content[0].text, "hi")
  })

  it("equals structuredClone on random JSON (keys in the same order, no object shared with the source)", () => {
    const shared = (a: unknown, b: unknown): boolean =>
      a !== null && typeof a === "object" &&
      (a === b || Object.keys(a).some((k) => shared(Reflect.get(a, k), Reflect.get(b as object, k))))
    const keyOrders = (v: unknown): unknown =>
      v === null || typeof v !== "object" ? null : Object.keys(v).map((k) => [k, keyOrders(Reflect.get(v, k))])
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.string(), (value, text) => {
        // Also an own `__proto__` key, as JSON.parse makes it.
        const parsed: unknown = JSON.parse(`{"__proto__":{"t":${JSON.stringify(text)}},"v":${JSON.stringify(value)}}`)
        for (const source of [value, parsed]) {
          const copied = Json.copy(source)
          assert.deepStrictEqual(copied, structuredClone(source))
          assert.deepStrictEqual(keyOrders(copied), keyOrders(source))
          assert.isFalse(shared(copied, source))
        }
      }),
      { numRuns: 300 }
    )
  })
})
