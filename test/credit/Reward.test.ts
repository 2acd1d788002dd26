import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as Reward from "../../src/credit/Reward.ts"

const failure = <A>(result: Result.Result<A, string>): string => {
  assert.isTrue(Result.isFailure(result), "expected a failure")
  return Result.isFailure(result) ? result.failure : ""
}

describe("primary reward value", () => {
  it("is the number itself for a numeric reward", () => {
    assert.deepStrictEqual(Reward.primaryValue(0.75, undefined), Result.succeed(0.75))
    assert.deepStrictEqual(Reward.primaryValue(1, "score"), Result.succeed(1))
  })

  it("is the --reward-key field of a reward object", () => {
    assert.deepStrictEqual(Reward.primaryValue({ score: 1, length: 120 }, "score"), Result.succeed(1))
  })

  it("names the missing key and the keys present", () => {
    const reason = failure(Reward.primaryValue({ acc: 1, length: 120 }, "score"))
    assert.include(reason, `--reward-key "score" is not in the reward object`)
    assert.include(reason, "keys present: acc, length")
  })

  it("asks for --reward-key when an object reward has none configured", () => {
    const reason = failure(Reward.primaryValue({ acc: 1 }, undefined))
    assert.include(reason, "reward is an object (keys present: acc)")
    assert.include(reason, "set --reward-key")
  })

  it("rejects a primary value that is not a finite number", () => {
    assert.include(failure(Reward.primaryValue({ score: "high" }, "score")), `reward["score"]`)
    assert.include(failure(Reward.primaryValue({ score: null }, "score")), "is null, not a finite number")
    assert.include(failure(Reward.primaryValue(Number.NaN, undefined)), "reward NaN is not a finite number")
    assert.include(failure(Reward.primaryValue(Number.POSITIVE_INFINITY, undefined)), "Infinity")
  })
})

describe("custom RM results", () => {
  it("accepts a finite number or an object of JSON values", () => {
    assert.deepStrictEqual(Reward.fromRm(0.5), Result.succeed(0.5))
    assert.deepStrictEqual(Reward.fromRm({ score: 1, notes: ["a"] }), Result.succeed({ score: 1, notes: ["a"] }))
  })

  it("rejects null, undefined, lists, strings and non-finite numbers", () => {
    assert.include(failure(Reward.fromRm(null)), "returned null")
    assert.include(failure(Reward.fromRm(undefined)), "returned undefined")
    assert.include(failure(Reward.fromRm([1])), "returned a list")
    assert.include(failure(Reward.fromRm("good")), `returned "good"`)
    assert.include(failure(Reward.fromRm(Number.NaN)), "returned NaN")
  })

  it("requires a Group RM to return one reward per row", () => {
    assert.deepStrictEqual(Reward.fromGroupRm([1, { score: 0 }], 2), Result.succeed([1, { score: 0 }]))
    assert.include(failure(Reward.fromGroupRm([1], 2)), "returned 1 rewards for 2 exported rows")
    assert.include(failure(Reward.fromGroupRm(1, 2)), "must return a list of 2 rewards")
    assert.include(failure(Reward.fromGroupRm([1, null], 2)), "row 1: the custom RM returned null")
  })
})
