import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as Dataset from "../../src/schedule/Dataset.ts"

const rowsOf = (text: string) => {
  const parsed = Dataset.parse(text, "data.jsonl")
  if (Result.isFailure(parsed)) throw new Error(parsed.failure.message)
  return parsed.success
}

describe("dataset files", () => {
  it("reads JSONL, skipping blank lines", () => {
    assert.deepStrictEqual(rowsOf("{\"input\":\"a\"}\n\n{\"input\":\"b\"}\n"), [{ input: "a" }, { input: "b" }])
  })

  it("reads a JSON array of objects", () => {
    assert.deepStrictEqual(rowsOf(" [{\"input\":\"a\"},{\"input\":\"b\",\"metadata\":{\"k\":1}}]"), [
      { input: "a" },
      { input: "b", metadata: { k: 1 } }
    ])
  })

  it("names the file and line of a broken row", () => {
    const parsed = Dataset.parse("{\"input\":\"a\"}\n[1]\n", "data.jsonl")
    assert.isTrue(Result.isFailure(parsed))
    if (Result.isFailure(parsed)) {
      assert.strictEqual(parsed.failure.message, "dataset data.jsonl:2: each JSONL line must be a JSON object")
    }
    const bad = Dataset.parse("{\"input\":\n", "x.jsonl")
    assert.isTrue(Result.isFailure(bad) && bad.failure.message.startsWith("dataset x.jsonl:1: not valid JSON"))
  })

  it("rejects an empty dataset", () => {
    const parsed = Dataset.parse("\n", "empty.jsonl")
    assert.isTrue(Result.isFailure(parsed) && parsed.failure.message.includes("has no rows"))
  })
})

describe("sampling", () => {
  it("walks rows in order without shuffling and wraps into the next epoch", () => {
    const [draws, cursor] = Dataset.take(Dataset.cursor(3, { shuffle: false, seed: 1 }), 7)
    assert.deepStrictEqual(draws.map((d) => d.row), [0, 1, 2, 0, 1, 2, 0])
    assert.deepStrictEqual(draws.map((d) => d.epoch), [0, 0, 0, 1, 1, 1, 2])
    assert.strictEqual(cursor.epoch, 2)
  })

  it("shuffles each epoch with seed + epoch: a permutation, reproducible, different across epochs", () => {
    const a = Dataset.epochOrder(20, true, 42, 0)
    assert.deepStrictEqual([...a].sort((x, y) => x - y), Array.from({ length: 20 }, (_, i) => i))
    assert.deepStrictEqual(Dataset.epochOrder(20, true, 42, 0), a)
    assert.notDeepEqual(Dataset.epochOrder(20, true, 42, 1), a)
    const [draws] = Dataset.take(Dataset.cursor(20, { shuffle: true, seed: 42 }), 40)
    assert.deepStrictEqual(draws.slice(0, 20).map((d) => d.row), [...a])
    assert.deepStrictEqual(draws.slice(20).map((d) => d.row), [...Dataset.epochOrder(20, true, 42, 1)])
  })

  it("takes in pieces exactly as in one go", () => {
    const start = Dataset.cursor(5, { shuffle: true, seed: 7 })
    const [all] = Dataset.take(start, 12)
    let cursor = start
    const pieces: Array<number> = []
    for (const n of [1, 4, 2, 5]) {
      const [draws, next] = Dataset.take(cursor, n)
      pieces.push(...draws.map((d) => d.row))
      cursor = next
    }
    assert.deepStrictEqual(pieces, all.map((d) => d.row))
  })
})

describe("Groups", () => {
  it("names Groups as the reference does", () => {
    assert.strictEqual(Dataset.groupId(Dataset.trainScope, 3), "train:prepare_group_3")
    assert.strictEqual(Dataset.groupId(Dataset.evalScope("gsm8k", 2), 0), "eval:gsm8k:2:prepare_group_0")
    const rows = rowsOf("{\"input\":\"a\"}\n{\"input\":\"b\"}")
    assert.deepStrictEqual(Dataset.group(Dataset.trainScope, 5, rows, 1, 4), {
      groupId: "train:prepare_group_5",
      seq: 5,
      row: 1,
      data: { input: "b" },
      size: 4
    })
  })
})
