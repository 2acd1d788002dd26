import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { EmbeddedEngine } from "../../layers/engine/EmbeddedEngine.ts"
import type { SamplingParams } from "../../layers/engine/Engine.ts"
import { SglangEngine } from "../../layers/engine/sglang/SglangEngine.ts"
import { Tokenizer } from "../../layers/tokenizer/Tokenizer.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as Wire from "../../src/engine/Wire.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as Turn from "../../src/generation/Turn.ts"
import * as FakeSglang from "../support/FakeSglang.ts"

/** `rows` as SGLang's little-endian int32 base64. */
const base64 = (rows: ReadonlyArray<ReadonlyArray<number>>): string => Wire.encodeRoutedExperts(rows)

describe("Wire.decodeRoutedExperts", () => {
  it("keeps the rows of the forward steps that produced the output tokens", () => {
    // prompt 3 + output 2 − 1 = 4 positions, 2 layers × top-2 = 4 ids each.
    const rows = [[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, -1], [30, 31, 32, 33]]
    const decoded = Wire.decodeRoutedExperts(base64(rows), 3, 2)
    assert.deepStrictEqual(decoded, Result.succeed([[20, 21, 22, -1], [30, 31, 32, 33]]))
  })

  it("checks the text against the sequence length", () => {
    assert.isTrue(Result.isFailure(Wire.decodeRoutedExperts(base64([[1, 2, 3]]), 3, 2)))
    assert.isTrue(Result.isFailure(Wire.decodeRoutedExperts("not base64!", 1, 1)))
    assert.isTrue(Result.isFailure(Wire.decodeRoutedExperts(Buffer.from([1, 2, 3]).toString("base64"), 1, 1)))
    assert.deepStrictEqual(Wire.decodeRoutedExperts("", 5, 0), Result.succeed([]))
  })
})

describe("routed experts in the training sample", () => {
  const user = { role: "user", content: "q" } as const
  const attempt = (
    outputIds: ReadonlyArray<number>,
    routedExperts: ReadonlyArray<ReadonlyArray<number>>,
    abort: boolean
  ) => ({
    outputIds,
    logprobs: outputIds.map(() => -0.5),
    weightVersion: "v1",
    routedExperts,
    finishReason: abort ? { type: "abort" as const } : { type: "stop" as const }
  })

  it("joins a resumed response's attempts in order and gives observation tokens an empty entry", () => {
    const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
    const obs = ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [user],
      tokens: [1, 2],
      tools: [],
      chatTemplateKwargs: {},
      rolloutId: 0
    })
    const first = Turn.afterAttempt(Turn.noPending(0), attempt([3], [[7, 8]], true), 1, 16)
    assert.strictEqual(first._tag, "Resume")
    const done = Turn.afterAttempt(first.pending, attempt([4, 5], [[9, 10], [11, 12]], false), 1, 16)
    assert.strictEqual(done._tag, "Finished")
    const pending = done.pending
    const resp = ForestCommit.commitResponse(forest, {
      parent: obs,
      message: { role: "assistant", content: "a" },
      tokens: pending.outputIds,
      logprobs: pending.logprobs,
      weightVersions: pending.weightVersions,
      attemptLengths: pending.attemptLengths,
      ...(pending.routedExperts === undefined ? {} : { routedExperts: pending.routedExperts }),
      status: "completed",
      rolloutId: 0,
      requestId: "r0",
      abortCount: pending.abortCount,
      wallElapsedS: 1,
      generationElapsedS: 1
    })
    const tail = ForestCommit.commitObservation(forest, {
      parent: resp,
      messages: [{ role: "user", content: "q2" }],
      tokens: [6],
      tools: [],
      chatTemplateKwargs: {},
      rolloutId: 0
    })
    const sample = Sample.build(forest, tail, (ids) => ids.join(","), {
      rolloutId: 0,
      exportName: null,
      reward: null,
      metadata: {}
    })
    assert.deepStrictEqual(sample.routed_experts, [[7, 8], [9, 10], [11, 12], []])
    assert.strictEqual(sample.routed_experts?.length, sample.response_length)
  })

  it("leaves the field out without routing replay", () => {
    const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
    const obs = ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [user],
      tokens: [1],
      tools: [],
      chatTemplateKwargs: {},
      rolloutId: 0
    })
    const resp = ForestCommit.commitResponse(forest, {
      parent: obs,
      message: { role: "assistant", content: "a" },
      tokens: [2],
      logprobs: [0],
      weightVersions: ["v1"],
      status: "completed",
      rolloutId: 0,
      requestId: "r0",
      abortCount: 0,
      wallElapsedS: 1,
      generationElapsedS: 1
    })
    assert.isFalse("routedExperts" in Forest.node(forest, resp))
    const sample = Sample.build(forest, resp, (ids) => ids.join(","), {
      rolloutId: 0,
      exportName: null,
      reward: null,
      metadata: {}
    })
    assert.isFalse("routed_experts" in sample)
  })
})

describe("SglangEngine with --use-rollout-routing-replay", () => {
  const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]
  const sampling: SamplingParams = {
    maxNewTokens: 6,
    temperature: 1,
    topP: 1,
    topK: -1,
    stop: [],
    stopTokenIds: [],
    seed: 5
  }
  const fake = (options: FakeSglang.FakeSglangOptions) =>
    Effect.gen(function*() {
      const engine = yield* EmbeddedEngine.make(yield* Tokenizer, { ...EmbeddedEngine.instant, seed: 3 })
      return yield* FakeSglang.make({ engine, ...options })
    })

  it.live("asks for return_routed_experts and returns each output token's routing, across a resumed attempt", () =>
    Effect.gen(function*() {
      const server = yield* fake({ enableReturnRoutedExperts: true })
      const engine = yield* SglangEngine.make({ workerUrls: [server.url], retryBase: "1 millis", routedExperts: true })
      const first = yield* engine.generate({ inputIds: prompt, sampling, rid: "routed-1", returnLogprob: true })
      assert.isAbove(first.outputIds.length, 1)
      const sequence = [...prompt, ...first.outputIds]
      // Output token k was produced by the forward step at position prompt + k − 1.
      const expected = first.outputIds.map((_, k) =>
        FakeSglang.fakeRouting(sequence[prompt.length + k - 1]!, prompt.length + k - 1)
      )
      assert.deepStrictEqual(first.routedExperts, expected)
      const resumed = yield* engine.generate({
        inputIds: sequence,
        sampling: { ...sampling, maxNewTokens: 2 },
        rid: "routed-2",
        returnLogprob: true,
        resumedTokens: first.outputIds.length
      })
      const whole = [...sequence, ...resumed.outputIds]
      assert.deepStrictEqual(
        resumed.routedExperts,
        resumed.outputIds.map((_, k) =>
          FakeSglang.fakeRouting(whole[sequence.length + k - 1]!, sequence.length + k - 1)
        )
      )
      const bodies = server.requests.filter((r) => r.path === "/generate").map((r) => r.body as Record<string, unknown>)
      assert.deepStrictEqual(bodies.map((b) => b["return_routed_experts"]), [true, true])
    }).pipe(Effect.provide(Tokenizer.layer)))

  it.live("fails naming the server flag when the server does not return the routing", () =>
    Effect.gen(function*() {
      const server = yield* fake({})
      const engine = yield* SglangEngine.make({ workerUrls: [server.url], retryBase: "1 millis", routedExperts: true })
      const error = yield* Effect.flip(
        engine.generate({ inputIds: prompt, sampling, rid: "routed-3", returnLogprob: true })
      )
      assert.include(error.message, "--enable-return-routed-experts")
    }).pipe(Effect.provide(Tokenizer.layer)))

  it.effect("is a config error with the embedded engine", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Settings.resolve({ promptData: "train.jsonl", rolloutBatchSize: 4, useRolloutRoutingReplay: true })
      )
      assert.strictEqual(
        error.message,
        "--use-rollout-routing-replay: is only used with --engine sglang; add --engine sglang or remove it"
      )
    }))
})
