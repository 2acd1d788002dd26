import { assert, describe, it } from "@effect/vitest"
import { Option, Result } from "effect"
import * as Rid from "../../src/engine/Rid.ts"
import * as Stop from "../../src/engine/Stop.ts"
import * as Wire from "../../src/engine/Wire.ts"

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
    assert.deepStrictEqual(Stop.truncate([1, 99, 3], criteria()), { ids: [1, 99], finishReason: { type: "stop", matched: 99 } })
  })

  it("stops on the token that completes a stop string spanning several tokens", () => {
    // a b c d → "abcd"; "bc" is complete after the third token
    assert.deepStrictEqual(Stop.truncate([0, 1, 2, 3], criteria({ stop: ["bc", ""] })), {
      ids: [0, 1, 2],
      finishReason: { type: "stop", matched: "bc" }
    })
    assert.deepStrictEqual(Stop.truncate([0, 1], criteria({ stop: ["zz"] })), { ids: [0, 1], finishReason: undefined })
  })
})

describe("Wire", () => {
  it("checks context length with SGLang's >= comparisons and wording", () => {
    const message = (inputTokens: number, maxNewTokens: number) =>
      Result.getFailure(Wire.checkContextLength(inputTokens, maxNewTokens, 20)).pipe(Option.getOrUndefined)
    assert.isTrue(Result.isSuccess(Wire.checkContextLength(10, 9, 20)))
    assert.include(message(10, 10) ?? "", "You requested a total of 20 tokens: 10 tokens from the input messages and 10 tokens")
    assert.strictEqual(message(20, 0), "The input (20 tokens) is longer than the model's context length (20 tokens).")
    assert.isTrue(Wire.isContextLengthMessage(message(10, 10) ?? ""))
    assert.isTrue(Wire.isContextLengthMessage("This model's maximum context length is 8 tokens."))
    assert.isFalse(Wire.isContextLengthMessage("top_p must be in (0, 1], got 0."))
  })

  it("maps finish reasons both ways", () => {
    for (const reason of [
      { type: "stop", matched: 151645 },
      { type: "stop", matched: "</answer>" },
      { type: "length", length: 128 },
      { type: "abort", message: "Aborted" }
    ] as const) {
      assert.deepStrictEqual(Wire.toFinishReason(Wire.fromFinishReason(reason)), reason)
    }
    assert.deepStrictEqual(Wire.toFinishReason({ type: "stop", matched: null }), { type: "stop" })
    assert.strictEqual(Wire.toFinishReason(null).type, "abort")
  })
})

describe("Rid", () => {
  it("makes fixed-length hex rids, so no rid is a prefix of another", () => {
    const rids = Array.from({ length: 200 }, (_, i) =>
      Rid.forAttempt({ sessionId: "s", parent: "p", turn: i % 100, attempt: i < 100 ? 0 : 1 }))
    assert.isTrue(rids.every((rid) => rid.length === Rid.length && Rid.isValid(rid)))
    assert.strictEqual(new Set(rids).size, rids.length)
  })
})
