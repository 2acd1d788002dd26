import { assert, describe, it } from "@effect/vitest"
import * as StateHash from "../../src/forest/StateHash.ts"
import * as PythonJson from "../../src/json/PythonJson.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

const seeded = SeededRandom.floats

// Golden values computed once with CPython 3 from the reference rule (docs/sessionforest.md "State hashes"):
// hashlib.sha256(json.dumps({"messages": M, "tools": T, "template_kwargs": K}, ensure_ascii=False,
//   separators=(",", ":"), sort_keys=True, default=str).encode("utf-8")).hexdigest()
const empty: Canonical.State = { messages: [], tools: [], chat_template_kwargs: {} }
const hi: Canonical.State = { messages: [{ role: "user", content: "Hi!" }], tools: [], chat_template_kwargs: {} }
const rich: Canonical.State = {
  messages: [
    { role: "system", content: "You are helpful.\n\nBe brief." },
    { role: "user", content: "Wetter in Zürich? 天气 😀 \"quoted\" \\ tab\t ctl\u0001" },
    {
      role: "assistant",
      content: "",
      reasoning_content: "need tool",
      tool_calls: [{
        id: "call_1",
        type: "function",
        function: { name: "get_weather", arguments: "{\"city\":\"Zürich\",\"days\":2}" }
      }]
    },
    { role: "tool", content: "22C", tool_call_id: "call_1" },
    {
      role: "user",
      content: [{ type: "text", text: "and this?" }, {
        type: "image_url",
        image_url: { url: "data:image/png;base64,AAAA" }
      }]
    }
  ],
  tools: [{
    type: "function",
    function: {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer", minimum: 1, maximum: 14 } },
        required: ["city"]
      },
      description: "Weather by city"
    }
  }],
  chat_template_kwargs: { enable_thinking: false, a: [1, 2.5, null, true] }
}
const golden = {
  empty: "26d60f342de6e843c9fd1759679a83d219fa4751ce1ccf5acd33d64de8db43db",
  hi: "1e967c0d48e96502fb0319371ba47262e76f5a9af1436e7b129a3d77675d1655",
  rich: "41483e87c6f2167761649abfeb9d13a19019c06fd307e69e1ad7fbea061e7ae2",
  richPrefixes: [
    "7651fa901a4275977d56ff8d23036498cc4f69022a1cc71a44a53c12b2f99689",
    "d0b2e8e42b773655e495132220a2d3c71e350cd5005868aec7ccdff731803d02",
    "3657c4bd47715ec7837edf3295867ee5e5b65163d6e1b50d0a07e3edaf11576b",
    "07c2fff99f9cc66601cb1769e9621c0e78c8be14c9a25148db4cfbc0b0126497",
    "41483e87c6f2167761649abfeb9d13a19019c06fd307e69e1ad7fbea061e7ae2"
  ]
}

/** Rebuild an object with its keys in reverse insertion order, recursively. */
const reverseKeys = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(reverseKeys)
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)]))
  }
  return value
}

describe("state hash (reference-identical)", () => {
  it("matches golden hashes computed with Python json.dumps + hashlib", () => {
    assert.strictEqual(StateHash.ofState(empty), golden.empty)
    assert.strictEqual(StateHash.ofState(hi), golden.hi)
    assert.strictEqual(StateHash.ofState(rich), golden.rich)
  })

  it("matches the golden hash of every prefix", () => {
    assert.deepStrictEqual(StateHash.prefixHashes(rich), golden.richPrefixes)
  })

  it("is independent of key insertion order", () => {
    assert.strictEqual(StateHash.ofState(reverseKeys(rich) as Canonical.State), golden.rich)
  })

  it("is stable across calls and changes with any field", () => {
    assert.strictEqual(StateHash.ofState(rich), StateHash.ofState(structuredClone(rich)))
    assert.notStrictEqual(StateHash.ofState({ ...rich, tools: [] }), golden.rich)
    assert.notStrictEqual(StateHash.ofState({ ...rich, chat_template_kwargs: {} }), golden.rich)
    assert.notStrictEqual(StateHash.ofState({ ...rich, messages: rich.messages.slice(1) }), golden.rich)
  })

  it("prefixHashes equals ofState on every prefix", () => {
    const states = [hi, rich, { ...rich, tools: [] }, { ...rich, chat_template_kwargs: { x: { b: 1, a: 2 } } }]
    for (const state of states) {
      const prefixes = StateHash.prefixHashes(state)
      assert.strictEqual(prefixes.length, state.messages.length)
      prefixes.forEach((h, i) =>
        assert.strictEqual(h, StateHash.ofState({ ...state, messages: state.messages.slice(0, i + 1) }))
      )
    }
  })

  it("the running hash (start/extend/finish) equals ofState, split anywhere", () => {
    for (let split = 0; split <= rich.messages.length; split++) {
      const head = StateHash.extend(StateHash.start(), rich.messages.slice(0, split))
      const whole = StateHash.extend(head, rich.messages.slice(split))
      assert.strictEqual(whole.count, rich.messages.length)
      assert.strictEqual(StateHash.finish(whole, rich.tools, rich.chat_template_kwargs), golden.rich)
      // extending copies: the head still finishes to its own prefix hash
      assert.strictEqual(
        StateHash.finish(head, rich.tools, rich.chat_template_kwargs),
        split === 0 ? StateHash.ofState({ ...rich, messages: [] }) : golden.richPrefixes[split - 1]
      )
    }
  })

  it("equalJson holds exactly when two values print the same Python JSON", () => {
    // Random JSON values from a tiny alphabet, so that equal, reordered and nearly equal pairs are common.
    const random = seeded(7)
    const scalars: ReadonlyArray<unknown> = [
      null,
      undefined,
      true,
      false,
      0,
      -0,
      1,
      1.5,
      2 ** 53 + 2,
      Number.NaN,
      "",
      "1",
      "a",
      "é😀"
    ]
    const value = (depth: number): unknown => {
      const roll = random() * (depth > 2 ? 1 : 1.6)
      if (roll < 1) return scalars[Math.floor(random() * scalars.length)]
      if (roll < 1.3) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1))
      const keys = ["a", "b", "é", "😀"].filter(() => random() < 0.5)
      return Object.fromEntries(keys.map((k) => [k, value(depth + 1)]))
    }
    /** The same value with every object's keys in reverse order (Python JSON sorts them). */
    const reordered = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reordered)
        : v !== null && typeof v === "object"
        ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reordered(x)]))
        : v
    let equalPairs = 0
    for (let i = 0; i < 4000; i++) {
      const a = value(0)
      const b = i % 3 === 0 ? reordered(a) : value(0)
      const same = PythonJson.dumpsJs(a) === PythonJson.dumpsJs(b)
      if (same) equalPairs++
      assert.strictEqual(StateHash.equalJson(a, b), same, `${PythonJson.dumpsJs(a)} vs ${PythonJson.dumpsJs(b)}`)
      assert.strictEqual(StateHash.equalJson(b, a), same)
    }
    assert.isAbove(equalPairs, 1000)
    assert.isTrue(StateHash.equalJson(rich.messages, rich.messages.map((m) => reordered(m))))
    assert.isFalse(StateHash.equalJson({ a: 1, b: undefined }, { a: 1, b: null }))
    assert.isTrue(StateHash.equalJson({ a: 1, b: undefined }, { a: 1 }))
    // Own keys only, as Object.keys and json.dumps see them; objects without a prototype compare like any other.
    const inherited: Record<string, unknown> = Object.create({ b: 2 })
    inherited["a"] = 1
    assert.isTrue(StateHash.equalJson(inherited, { a: 1 }))
    assert.isFalse(StateHash.equalJson(inherited, { a: 1, b: 2 }))
    assert.isFalse(StateHash.equalJson({ a: 1, b: 2 }, inherited))
    const bare: Record<string, unknown> = Object.create(null)
    bare["b"] = [1, { c: "é" }]
    bare["a"] = null
    assert.isTrue(StateHash.equalJson(bare, { b: [1, { c: "é" }], a: null }))
    assert.isFalse(StateHash.equalJson(bare, { a: undefined, b: [1, { c: "é" }] }))
    assert.isFalse(StateHash.equalJson(bare, { b: [1, { c: "e" }] }))
  })
})

describe("Python json.dumps semantics", () => {
  it("prints floats like Python repr", () => {
    // repr() values from CPython 3.
    const cases: ReadonlyArray<readonly [number, string]> = [
      [0.1, "0.1"],
      [1.5e-5, "1.5e-05"],
      [1e16, "1e+16"],
      [1e-4, "0.0001"],
      [123456789012345678.0, "1.2345678901234568e+17"],
      [2.5, "2.5"],
      [-0.0, "-0.0"],
      [1e300, "1e+300"],
      [5e-324, "5e-324"],
      [1.7976931348623157e308, "1.7976931348623157e+308"],
      [0.30000000000000004, "0.30000000000000004"],
      [1234567890123456.7, "1234567890123456.8"],
      [9007199254740993.0, "9007199254740992.0"],
      [1e15 + 0.5, "1000000000000000.5"],
      [100.0, "100.0"],
      [1e-7, "1e-07"]
    ]
    for (const [x, repr] of cases) assert.strictEqual(PythonJson.floatRepr(x), repr)
  })

  it("sorts keys by code point, not UTF-16 unit", () => {
    assert.strictEqual(
      StateHash.pythonJson({ "\ue000": 1, "😀": 2, z: 3, A: 4, "é": 5 }),
      "{\"A\":4,\"z\":3,\"é\":5,\"\ue000\":1,\"😀\":2}"
    )
  })

  it("escapes only quotes, backslashes and control characters", () => {
    assert.strictEqual(
      StateHash.pythonJson("a\"b\\c\n\t\u0001\u007f\u2028é"),
      "\"a\\\"b\\\\c\\n\\t\\u0001\u007f\u2028é\""
    )
  })

  it("prints integers exactly and JS integral numbers as ints", () => {
    assert.strictEqual(StateHash.pythonJson([1, -0, 2 ** 53 + 2, 1e21, 3.25]), "[1,0,9007199254740994,1e+21,3.25]")
  })
})
