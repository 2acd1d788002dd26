/**
 * Differential tests of the two speed changes in canonicalization: the memo of canonical tool-call argument texts
 * (`canonicalArguments` against `canonicalArgumentsUncached`, the same string asked again and again, as echoed
 * histories do) and the copy of client JSON (`Json.copy` where `structuredClone` was).
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as BoundedMemo from "../../src/protocol/BoundedMemo.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

const random = SeededRandom.floats

const pieces = [
  "a",
  "key",
  "ü",
  "日本",
  "😀",
  "\\u00e9",
  "\\ud800",
  "\\udc00",
  "\\ud83d\\ude00",
  "\\n",
  "\\\"",
  "\\\\",
  "\\/",
  " ",
  "\t"
]
const numbers = [
  "0",
  "-0",
  "1",
  "1.0",
  "1e3",
  "1E+2",
  "-1.5e-3",
  "12345678901234567890",
  "9007199254740993",
  "1e400",
  "-1e400",
  "0.1",
  "3.0000"
]

const randomJson = (next: () => number, depth: number): string => {
  const r = next()
  if (depth > 3 || r < 0.3) {
    const k = next()
    if (k < 0.3) return numbers[Math.floor(next() * numbers.length)] ?? "0"
    if (k < 0.4) return ["true", "false", "null"][Math.floor(next() * 3)] ?? "null"
    return `"${
      Array.from({ length: Math.floor(next() * 4) }, () => pieces[Math.floor(next() * pieces.length)]).join("")
    }"`
  }
  if (r < 0.5) return `[${Array.from({ length: Math.floor(next() * 4) }, () => randomJson(next, depth + 1)).join(",")}]`
  const keys = Array.from(
    { length: Math.floor(next() * 4) },
    () => `"${pieces[Math.floor(next() * pieces.length)] ?? "k"}${Math.floor(next() * 3)}"`
  )
  return `{${keys.map((key) => `${key}:${randomJson(next, depth + 1)}`).join(next() < 0.5 ? "," : " , ")}}`
}

const adversarial: ReadonlyArray<string> = [
  "{}",
  "",
  " ",
  "[]",
  "null",
  "1",
  "\"x\"",
  "{\"a\":1,\"a\":2}",
  "{\"a\":NaN}",
  "{\"a\":Infinity}",
  "{\"a\":-Infinity}",
  "{\"a\":1} x",
  "{\"a\":1}\u00a0",
  "\ufeff{}",
  "{\"a\":\"\\ud800\"}",
  "{\"b\":1,\"a\":{\"d\":[1,2.0,{\"c\":null}]}}",
  "{\"__proto__\":{\"x\":1}}",
  "{\"a\":1e400}",
  "{\"a\":12345678901234567890}",
  "{\"a\":9007199254740993.0}",
  "{\"path\":\"/tmp/x.py\",\"content\":\"def f():\\n    return 1\\n\"}",
  "{'a':1}",
  "{\"a\":01}",
  "{\"a\":.5}",
  "{\"a\":1,}"
]

const same = (raw: string, label: string) => {
  const reference = Canonical.canonicalArgumentsUncached(raw, "f")
  for (let round = 0; round < 3; round++) {
    const memoized = Canonical.canonicalArguments(raw, "f")
    if (Result.isSuccess(reference)) {
      assert.isTrue(Result.isSuccess(memoized), `${label}: ${raw}`)
      if (Result.isSuccess(memoized)) assert.strictEqual(memoized.success, reference.success, `${label}: ${raw}`)
    } else {
      assert.isTrue(Result.isFailure(memoized), `${label}: ${raw}`)
      if (Result.isFailure(memoized)) assert.deepStrictEqual(memoized.failure, reference.failure, `${label}: ${raw}`)
    }
  }
}

describe("canonicalArguments memo", () => {
  it("gives what the uncached canonicalization gives, on first use and on repeats, for adversarial argument texts", () => {
    for (const raw of adversarial) same(raw, "adversarial")
  })

  it("gives what the uncached canonicalization gives for 3,000 random argument texts, each asked three times", () => {
    const next = random(42)
    for (let i = 0; i < 3000; i++) same(randomJson(next, 0), `random ${i}`)
  })

  it("an error still names the field it is asked for, even for a text that failed before under another field", () => {
    const first = Canonical.canonicalArguments("{\"a\":1,\"a\":2}", "messages[1].tool_calls[0].function.arguments")
    const second = Canonical.canonicalArguments("{\"a\":1,\"a\":2}", "messages[3].tool_calls[2].function.arguments")
    assert.isTrue(Result.isFailure(first) && first.failure.param === "messages[1].tool_calls[0].function.arguments")
    assert.isTrue(Result.isFailure(second) && second.failure.param === "messages[3].tool_calls[2].function.arguments")
  })
})

describe("TextMemo", () => {
  it("keeps at most two generations, moves a hit from the previous one forward, and skips oversized entries", () => {
    const memo = new BoundedMemo.TextMemo(40)
    memo.set("aaaa", "1111") // 8 chars
    memo.set("bbbb", "2222") // 16
    memo.set("cccc", "3333") // 24
    memo.set("dddd", "4444") // 32
    memo.set("eeee", "5555") // 40
    memo.set("ffff", "6666") // turnover: a–e become the previous generation
    assert.strictEqual(memo.get("aaaa"), "1111") // found in the previous generation, moved forward
    for (const key of ["gggg", "hhhh", "iiii"]) memo.set(key, "x".repeat(4))
    memo.set("jjjj", "7777") // turnover again: b–e are dropped, a (moved forward) survives
    assert.strictEqual(memo.get("bbbb"), undefined)
    assert.strictEqual(memo.get("aaaa"), "1111")
    assert.strictEqual(memo.get("jjjj"), "7777")
    memo.set("k".repeat(6), "v".repeat(6)) // 12 > 40 / 4: not kept
    assert.strictEqual(memo.get("k".repeat(6)), undefined)
  })
})

describe("canonicalization copies client JSON like structuredClone", () => {
  it("content parts, tool-call extras and tools: equal values, no shared objects, own __proto__ keys kept", () => {
    const proto = JSON.parse("{\"__proto__\":{\"polluted\":true},\"type\":\"text\",\"text\":\"hi\"}") as unknown
    const raw = [
      {
        role: "user",
        content: [proto, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } }]
      },
      {
        role: "assistant",
        content: "",
        tool_calls: [{
          id: "c1",
          type: "function",
          extra: { deep: [1, { two: [2] }] },
          function: { name: "f", arguments: "{}", strict: [true] }
        }]
      },
      { role: "tool", tool_call_id: "c1", content: [{ type: "text", text: "out", meta: { n: [1.5, null, "ü"] } }] }
    ]
    const snapshot = structuredClone(raw)
    const messages = Canonical.canonicalizeMessages(raw)
    assert.isTrue(Result.isSuccess(messages))
    if (Result.isFailure(messages)) return
    // The input is untouched, and the output shares no object with it.
    assert.deepStrictEqual(raw, snapshot)
    const user = messages.success[0]
    const parts = user?.content
    assert.isTrue(Array.isArray(parts))
    if (!Array.isArray(parts)) return
    assert.notStrictEqual(parts[0], proto)
    assert.deepStrictEqual(parts[0], structuredClone(proto))
    assert.isTrue(Object.prototype.hasOwnProperty.call(parts[0], "__proto__"))
    assert.strictEqual(Object.getPrototypeOf(parts[0]), Object.prototype)
    const call = messages.success[1]?.tool_calls?.[0]
    assert.deepStrictEqual(call, {
      id: "c1",
      type: "function",
      extra: { deep: [1, { two: [2] }] },
      function: { strict: [true], name: "f", arguments: "{}" }
    })
    const tools = Canonical.normalizeTools([{
      type: "function",
      function: { name: "f", parameters: JSON.parse("{\"__proto__\":{\"a\":1}}") as unknown }
    }])
    assert.isTrue(Result.isSuccess(tools))
    if (Result.isSuccess(tools)) {
      assert.deepStrictEqual(
        tools.success[0]?.function.parameters,
        structuredClone(JSON.parse("{\"__proto__\":{\"a\":1}}") as unknown)
      )
    }
  })
})
