import { assert, describe, it } from "@effect/vitest"
import { Option, Result } from "effect"
import * as Rid from "../../src/engine/Rid.ts"
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import * as Stop from "../../src/engine/Stop.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

const letters = (ids: ReadonlyArray<number>) => ids.map((id) => String.fromCharCode(97 + (id % 26))).join("")
const criteria = (overrides: Partial<Stop.Criteria> = {}): Stop.Criteria => ({
  maxNewTokens: 10,
  stopTokenIds: new Set([99]),
  stop: [],
  decode: letters,
  ...overrides
})

describe("Stop", () => {
  it("prefers length over a stop token on the last allowed position, as SGLang does", () => {
    assert.deepStrictEqual(Stop.truncate([1, 2, 99], criteria({ maxNewTokens: 3 })), {
      ids: [1, 2, 99],
      finishReason: { type: "length", length: 3 }
    })
    assert.deepStrictEqual(Stop.truncate([1, 99, 3], criteria()), {
      ids: [1, 99],
      finishReason: { type: "stop", matched: 99 }
    })
  })

  it("stops on the token that completes a stop string spanning several tokens", () => {
    // a b c d → "abcd"; "bc" is complete after the third token
    assert.deepStrictEqual(Stop.truncate([0, 1, 2, 3], criteria({ stop: ["bc", ""] })), {
      ids: [0, 1, 2],
      finishReason: { type: "stop", matched: "bc" }
    })
    assert.deepStrictEqual(Stop.truncate([0, 1], criteria({ stop: ["zz"] })), { ids: [0, 1], finishReason: undefined })
  })

  it("truncates as checking every prefix afresh does, on random ids, stop strings, stop ids and limits", () => {
    // The reference: a fresh copy of each prefix, checked in turn.
    const reference = (ids: ReadonlyArray<number>, c: Stop.Criteria): ReturnType<typeof Stop.truncate> => {
      const check = Stop.checker(c)
      if (c.maxNewTokens <= 0) return { ids: [], finishReason: { type: "length", length: c.maxNewTokens } }
      for (let n = 1; n <= ids.length; n++) {
        const reason = check(ids.slice(0, n))
        if (reason !== undefined) return { ids: ids.slice(0, n), finishReason: reason }
      }
      return { ids, finishReason: undefined }
    }
    const random = SeededRandom.ints(12345)
    for (let round = 0; round < 500; round++) {
      const ids = Array.from({ length: random(40) }, () => random(30) === 0 ? 99 : random(26))
      const c = criteria({
        maxNewTokens: random(45) - 2,
        stopTokenIds: new Set(random(3) === 0 ? [random(26)] : [99]),
        stop: Array.from({ length: random(3) }, () => letters(Array.from({ length: 1 + random(3) }, () => random(26))))
      })
      assert.deepStrictEqual(Stop.truncate(ids, c), reference(ids, c), `round ${round}`)
    }
  })
})

describe("Wire", () => {
  it("checks context length with SGLang's >= comparisons and wording", () => {
    const message = (inputTokens: number, maxNewTokens: number) =>
      Result.getFailure(SglangWire.checkContextLength(inputTokens, maxNewTokens, 20)).pipe(Option.getOrUndefined)
    assert.isTrue(Result.isSuccess(SglangWire.checkContextLength(10, 9, 20)))
    assert.include(
      message(10, 10) ?? "",
      "You requested a total of 20 tokens: 10 tokens from the input messages and 10 tokens"
    )
    assert.strictEqual(message(20, 0), "The input (20 tokens) is longer than the model's context length (20 tokens).")
    assert.isTrue(SglangWire.isContextLengthMessage(message(10, 10) ?? ""))
    assert.isTrue(SglangWire.isContextLengthMessage("This model's maximum context length is 8 tokens."))
    assert.isFalse(SglangWire.isContextLengthMessage("top_p must be in (0, 1], got 0."))
  })

  it("maps finish reasons both ways", () => {
    for (
      const reason of [
        { type: "stop", matched: 151645 },
        { type: "stop", matched: "</answer>" },
        { type: "length", length: 128 },
        { type: "abort", message: "Aborted" }
      ] as const
    ) {
      assert.deepStrictEqual(SglangWire.toFinishReason(SglangWire.fromFinishReason(reason)), reason)
    }
    assert.deepStrictEqual(SglangWire.toFinishReason({ type: "stop", matched: null }), { type: "stop" })
    assert.strictEqual(SglangWire.toFinishReason(null).type, "abort")
  })
})

describe("Rid", () => {
  it("makes fixed-length hex rids, so no rid is a prefix of another", () => {
    const rids = Array.from(
      { length: 200 },
      (_, i) => Rid.forAttempt({ sessionId: "s", parent: "p", turn: i % 100, attempt: i < 100 ? 0 : 1 })
    )
    assert.isTrue(rids.every((rid) => rid.length === Rid.length && Rid.isValid(rid)))
    assert.strictEqual(new Set(rids).size, rids.length)
  })
})
