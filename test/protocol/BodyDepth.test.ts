/**
 * Differential test of the body nesting check: `BodyDepth.pathBeyondDepth` (walk without allocation, exact path only
 * for bodies beyond the limit) against `Json.pathBeyondDepth` (the reference) on random parsed JSON around the limit
 * and on adversarial values.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Json from "../../src/json/Json.ts"
import * as BodyDepth from "../../src/protocol/BodyDepth.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

const random = SeededRandom.floats

const keys = ["a", "b", "__proto__", "constructor", "0", "1", "toString", "ü", ""]

const randomJson = (next: () => number, depth: number, maxDepth: number): string => {
  const r = next()
  if (depth >= maxDepth || r < 0.25) {
    const k = next()
    if (k < 0.3) return String(Math.floor(next() * 100))
    if (k < 0.5) return ["true", "false", "null"][Math.floor(next() * 3)] ?? "null"
    return `"${"x".repeat(Math.floor(next() * 3))}"`
  }
  const count = Math.floor(next() * 4)
  if (r < 0.6) return `[${Array.from({ length: count }, () => randomJson(next, depth + 1, maxDepth)).join(",")}]`
  const used = new Set<string>()
  const members: Array<string> = []
  for (let i = 0; i < count; i++) {
    const key = keys[Math.floor(next() * keys.length)] ?? "k"
    if (used.has(key)) continue
    used.add(key)
    members.push(`${JSON.stringify(key)}:${randomJson(next, depth + 1, maxDepth)}`)
  }
  return `{${members.join(",")}}`
}

const same = (value: unknown, limit: number, label: string) =>
  assert.deepStrictEqual(BodyDepth.pathBeyondDepth(value, limit), Json.pathBeyondDepth(value, limit), label)

const nested = (depth: number, open: string, close: string, leaf = "1") =>
  `${open.repeat(depth)}${leaf}${close.repeat(depth)}`

describe("BodyDepth.pathBeyondDepth", () => {
  it("gives what Json.pathBeyondDepth gives on random parsed JSON, at limits around its depth", () => {
    const next = random(13)
    for (let i = 0; i < 3000; i++) {
      const text = randomJson(next, 0, 1 + Math.floor(next() * 9))
      const value: unknown = JSON.parse(text)
      for (let limit = 0; limit <= 10; limit++) same(value, limit, `${text} at ${limit}`)
    }
  })

  it("gives what Json.pathBeyondDepth gives on adversarial values", () => {
    const texts = [
      "null",
      "1",
      "\"x\"",
      "{}",
      "[]",
      "[[]]",
      "{\"a\":{}}",
      "{\"__proto__\":{\"__proto__\":[]}}",
      "{\"constructor\":{\"prototype\":{}}}",
      nested(511, "[", "]"),
      nested(512, "[", "]"),
      nested(513, "[", "]"),
      nested(512, "[", "]", "[]"),
      nested(10_000, "[", "]"),
      nested(600, "{\"k\":", "}"),
      `{"messages":[${
        Array.from({ length: 40 }, (_, i) => `{"role":"user","content":[{"type":"text","text":"${i}"}]}`).join(",")
      }]}`,
      `[${Array.from({ length: 2000 }, () => "[[]]").join(",")}]`
    ]
    for (const text of texts) {
      const value: unknown = JSON.parse(text)
      for (const limit of [0, 1, 2, 3, 4, 511, 512, 513, 100_000]) {
        same(value, limit, `${text.slice(0, 60)} at ${limit}`)
      }
    }
    // Inherited enumerable keys (not from JSON.parse): the reference reads own keys only, and so does the answer.
    const inherited: unknown = Object.create({ deep: [[[[]]]] })
    for (const limit of [0, 1, 2, 5]) same(inherited, limit, `inherited at ${limit}`)
    const sparse: Array<unknown> = []
    sparse[3] = [[]]
    for (const limit of [0, 1, 2, 3]) same(sparse, limit, `sparse at ${limit}`)
  })

  it("starts every call from empty stacks, also after a walk that stopped beyond the limit", () => {
    // The first walk stops with siblings still pending; left on the stacks they would be walked by the next call.
    const stopped: unknown = JSON.parse(`[${Array.from({ length: 50 }, () => "[[[[1]]]]").join(",")},[[]]]`)
    assert.deepStrictEqual(BodyDepth.pathBeyondDepth(stopped, 2), [50, 0])
    assert.strictEqual(BodyDepth.pathBeyondDepth([1], 1), undefined)
    assert.deepStrictEqual(BodyDepth.pathBeyondDepth({}, 0), [])
  })
})
