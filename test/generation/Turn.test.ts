import { assert, describe, it } from "@effect/vitest"
import * as EndOfTurn from "../../src/generation/EndOfTurn.ts"
import * as PendingOutput from "../../src/generation/PendingOutput.ts"
import * as ResponseParsing from "../../src/generation/ResponseParsing.ts"
import * as TurnCompletion from "../../src/generation/TurnCompletion.ts"
import * as TurnSampling from "../../src/generation/TurnSampling.ts"

const output = (
  ids: ReadonlyArray<number>,
  type: "stop" | "length" | "abort",
  weightVersion = "v1"
): PendingOutput.AttemptOutput => ({
  outputIds: ids,
  logprobs: ids.map(() => -0.5),
  weightVersion,
  finishReason: { type }
})

describe("Turn: engine attempts", () => {
  it("a finish ends the request with every attempt's ids, logprobs, weight versions and lengths", () => {
    const aborted = PendingOutput.afterAttempt(PendingOutput.noPending(2), output([1, 2], "abort", "v1"), 10, 8)
    assert.strictEqual(aborted._tag, "Resume")
    assert.deepStrictEqual(aborted.pending.outputIds, [1, 2])
    assert.strictEqual(PendingOutput.remainingTokens(8, aborted.pending), 6)
    const done = PendingOutput.afterAttempt(aborted.pending, output([3], "stop", "v2"), 5, 8)
    assert(done._tag === "Finished")
    assert.deepStrictEqual(done.finishReason, { type: "stop" })
    assert.deepStrictEqual(done.pending, {
      outputIds: [1, 2, 3],
      logprobs: [-0.5, -0.5, -0.5],
      weightVersions: ["v1", "v2"],
      attemptLengths: [2, 1],
      abortCount: 3,
      emptyAborts: 0,
      generationMs: 15
    })
  })

  it("an abort at a step boundary parks the request: it resumes and never counts toward giving up", () => {
    let pending = PendingOutput.noPending(0)
    for (let i = 0; i < 5; i++) {
      const outcome = PendingOutput.parked(PendingOutput.afterAttempt(pending, output([], "abort"), 0, 8))
      assert.strictEqual(outcome._tag, "Resume")
      pending = outcome.pending
    }
    assert.strictEqual(pending.abortCount, 5)
    assert.strictEqual(pending.emptyAborts, 0)
    const done = PendingOutput.afterAttempt(pending, output([1], "stop"), 0, 8)
    assert.strictEqual(PendingOutput.parked(done), done)
  })

  it("an abort that fills the budget finishes as length", () => {
    const done = PendingOutput.afterAttempt(PendingOutput.noPending(0), output([1, 2, 3], "abort"), 0, 3)
    assert(done._tag === "Finished")
    assert.deepStrictEqual(done.finishReason, { type: "length", length: 3 })
  })

  it("gives up after MAX_EMPTY_ABORTS aborts in a row without a token; a token resets the count", () => {
    let pending = PendingOutput.noPending(0)
    for (let i = 1; i < PendingOutput.MAX_EMPTY_ABORTS; i++) {
      const outcome = PendingOutput.afterAttempt(pending, output([], "abort"), 0, 8)
      assert.strictEqual(outcome._tag, "Resume")
      pending = outcome.pending
    }
    assert.strictEqual(
      PendingOutput.afterAttempt(
        PendingOutput.afterAttempt(pending, output([4], "abort"), 0, 8).pending,
        output([], "abort"),
        0,
        8
      )._tag,
      "Resume"
    )
    assert.strictEqual(PendingOutput.afterAttempt(pending, output([], "abort"), 0, 8)._tag, "GiveUp")
  })
})

describe("Turn: sampling and parsing", () => {
  it("caps the requested tokens by the configured length and merges stop strings", () => {
    assert.strictEqual(TurnSampling.requestedTokens(256, undefined), 256)
    assert.strictEqual(TurnSampling.requestedTokens(256, 1000), 256)
    assert.strictEqual(TurnSampling.requestedTokens(256, 3), 3)
    const base: TurnSampling.TurnSampling & { readonly topP: number } = { maxNewTokens: 256, stop: ["a"], topP: 1 }
    const sampling = TurnSampling.turnSampling(base, { stop: ["b", "a"], seed: 9 }, 40)
    assert.deepStrictEqual(sampling, { maxNewTokens: 40, stop: ["a", "b"], topP: 1, seed: 9 })
  })

  it("splits a trailing end-of-turn or stop token id off the visible text", () => {
    const endOfTurn = new Set([99])
    assert.deepStrictEqual(EndOfTurn.splitEndOfTurn([1, 2, 99], endOfTurn, []), { textIds: [1, 2], endedTurn: true })
    assert.deepStrictEqual(EndOfTurn.splitEndOfTurn([1, 2, 5], endOfTurn, [5]), { textIds: [1, 2], endedTurn: true })
    assert.deepStrictEqual(EndOfTurn.splitEndOfTurn([1, 2], endOfTurn, []), { textIds: [1, 2], endedTurn: false })
    assert.strictEqual(EndOfTurn.engineFinish({ textIds: [], endedTurn: true }, { type: "length" }), "stop")
    assert.strictEqual(ResponseParsing.finishOf("stop", 1), "tool_calls")
    assert.strictEqual(ResponseParsing.finishOf("length", 1), "length")
    assert.strictEqual(EndOfTurn.stopSequence({ type: "stop", matched: "END" }), "END")
    assert.strictEqual(EndOfTurn.stopSequence({ type: "stop", matched: 5 }), undefined)
  })

  it("builds the committed message and the completion with the minted tool-call ids", () => {
    const parsed: ResponseParsing.ParsedResponse = {
      content: "",
      reasoning: "think",
      calls: [{ name: "calc", arguments: "{\"b\": 1, \"a\": 2}" }],
      malformed: 0,
      droppedUnknownTools: 0
    }
    const toolCalls = TurnCompletion.identifyToolCalls(parsed.calls, {
      prefix: "toolu_",
      sessionId: "s",
      responseKey: "k"
    })
    assert.match(toolCalls[0]?.id ?? "", /^toolu_[0-9a-f]{24}$/)
    const message = TurnCompletion.assistantMessage(parsed, toolCalls)
    assert(message._tag === "Success")
    const completion = TurnCompletion.completion("ab", 2500, {
      message: message.success,
      toolCalls,
      finish: "tool_calls",
      stopSequence: undefined,
      usage: { promptTokens: 3, completionTokens: 4, cachedTokens: 0 },
      logprobs: undefined
    })
    assert.deepStrictEqual(completion, {
      id: "ab",
      created: 2,
      reasoning: "think",
      content: "",
      toolCalls: [{
        id: toolCalls[0]?.id ?? "",
        name: "calc",
        arguments: message.success.tool_calls?.[0]?.function.arguments ?? ""
      }],
      finish: "tool_calls",
      usage: { promptTokens: 3, completionTokens: 4, cachedTokens: 0 }
    })
  })
})
