import { assert, describe, it } from "@effect/vitest"
import * as PythonJson from "../../src/json/PythonJson.ts"

const parsedDumps = (text: string): string => {
  const r = PythonJson.parse(text)
  assert.strictEqual(r._tag, "Parsed", text)
  return r._tag === "Parsed" ? PythonJson.dumps(r.value) : ""
}

describe("PythonJson.parse", () => {
  it("keeps integer text exactly and reads fractions and exponents as floats", () => {
    assert.strictEqual(
      parsedDumps(" {\"b\": [123456789012345678901234567890, -0, 1.50, 1E2, 1e400], \"a\": \"é\"} "),
      "{\"a\":\"é\",\"b\":[123456789012345678901234567890,0,1.5,100.0,Infinity]}"
    )
  })

  it("keeps member order and any key, including __proto__", () => {
    const r = PythonJson.parse("{\"z\":1,\"__proto__\":2}")
    const keys = r._tag === "Parsed" && r.value instanceof Map ? [...r.value.keys()] : []
    assert.deepStrictEqual(keys, ["z", "__proto__"])
  })

  it("reports errors in CPython's order", () => {
    assert.deepStrictEqual(PythonJson.parse("[{\"k\":1,\"k\":2}, NaN]"), { _tag: "DuplicateKey", key: "k" })
    assert.deepStrictEqual(PythonJson.parse("{\"k\":1,\"k\":-Infinity}"), { _tag: "NonFinite", text: "-Infinity" })
    assert.deepStrictEqual(PythonJson.parse("{\"k\":1,\"k\":2,}"), { _tag: "Invalid" })
    assert.deepStrictEqual(PythonJson.parse("{\"k\":1,\"k\":2} x"), { _tag: "DuplicateKey", key: "k" })
  })

  it("rejects trailing data, a BOM, a cut-off text and deep nesting as Invalid", () => {
    for (
      const text of ["{} x", "\uFEFF{}", "{}\uFEFF", "{}\u00a0", "", "[1", "12.", "[\"a\u0001\"]", "[".repeat(5000)]
    ) {
      assert.deepStrictEqual(PythonJson.parse(text), { _tag: "Invalid" }, JSON.stringify(text.slice(0, 20)))
    }
  })
})
