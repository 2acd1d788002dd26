import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as PendingOutput from "../../src/generation/PendingOutput.ts"
import * as FakeSglang from "../support/FakeSglang.ts"

/** `rows` as SGLang's little-endian int32 base64. */
const base64 = (rows: ReadonlyArray<ReadonlyArray<number>>): string => SglangWire.encodeRoutedExperts(rows)

describe("Wire.decodeRoutedExperts", () => {
  it("gives one row per sequence position the request went through (prompt + output − 1)", () => {
    // prompt 3 + output 2 − 1 = 4 positions, 2 layers × top-2 = 4 ids each.
    const rows = [[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, -1], [30, 31, 32, 33]]
    assert.deepStrictEqual(SglangWire.decodeRoutedExperts(base64(rows), 3, 2), Result.succeed(rows))
  })

  it("checks the text against the sequence length", () => {
    assert.isTrue(Result.isFailure(SglangWire.decodeRoutedExperts(base64([[1, 2, 3]]), 3, 2)))
    assert.isTrue(Result.isFailure(SglangWire.decodeRoutedExperts("not base64!", 1, 1)))
    assert.isTrue(Result.isFailure(SglangWire.decodeRoutedExperts(Buffer.from([1, 2, 3]).toString("base64"), 1, 1)))
    assert.deepStrictEqual(SglangWire.decodeRoutedExperts("", 1, 0), Result.succeed([]))
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

  it("one row per position of the whole sequence but the last: the prompt's, each response's and the observations' between (Relax's rollout_routed_experts)", () => {
    const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
    const obs = ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [user],
      tokens: [1, 2],
      tools: [],
      chatTemplateKwargs: {},
      rolloutId: 0
    })
    // Sequence [1, 2 | 3 | 4, 5]: the first attempt went through positions 0..1 (prompt) and produced 3; the resumed
    // one, from [1, 2, 3], went through 0..3 and produced 4, 5. Row p: [10 p, 10 p + 1].
    const row = (p: number) => [10 * p, 10 * p + 1]
    const first = PendingOutput.afterAttempt(PendingOutput.noPending(0), attempt([3], [row(0), row(1)], true), 1, 16)
    assert.strictEqual(first._tag, "Resume")
    const done = PendingOutput.afterAttempt(first.pending, attempt([4, 5], [0, 1, 2, 3].map(row), false), 1, 16)
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
      tokens: [6, 7],
      tools: [],
      chatTemplateKwargs: {},
      rolloutId: 0
    })
    // The second turn's request, from [1 .. 7], went through positions 0..6 and produced 8: it keeps rows 4..6 (the
    // first response's last token and the observation, as inputs), whatever it says of 0..3.
    const second = ForestCommit.commitResponse(forest, {
      parent: tail,
      message: { role: "assistant", content: "b" },
      tokens: [8],
      logprobs: [0],
      weightVersions: ["v1"],
      routedExperts: [[-1, -1], [-1, -1], [-1, -1], [-1, -1], ...[4, 5, 6].map(row)],
      status: "completed",
      rolloutId: 0,
      requestId: "r1",
      abortCount: 0,
      wallElapsedS: 1,
      generationElapsedS: 1
    })
    const sample = Sample.build(forest, second, (ids) => ids.join(","), {
      rolloutId: 0,
      exportName: null,
      reward: null,
      metadata: {}
    })
    assert.deepStrictEqual(sample.tokens, [1, 2, 3, 4, 5, 6, 7, 8])
    assert.deepStrictEqual(sample.rollout_routed_experts, [0, 1, 2, 3, 4, 5, 6].map(row))
    assert.strictEqual(sample.rollout_routed_experts?.length, sample.tokens.length - 1)
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
    assert.isFalse("rollout_routed_experts" in sample)
  })
})

describe("SglangEngine with --use-rollout-routing-replay", () => {
  const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]
  const sampling: Engine.SamplingParams = {
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
      const engine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
        ...EmbeddedEngine.EmbeddedEngine.instant,
        seed: 3
      })
      return yield* FakeSglang.make({ engine, ...options })
    })

  it.live("asks for return_routed_experts and returns every position's routing, across a resumed attempt", () =>
    Effect.gen(function*() {
      const server = yield* fake({ enableReturnRoutedExperts: true })
      const engine = yield* SglangEngine.SglangEngine.make({
        workerUrls: [server.url],
        retryBase: "1 millis",
        routedExperts: true
      })
      const first = yield* engine.generate({ inputIds: prompt, sampling, rid: "routed-1", returnLogprob: true })
      assert.isAbove(first.outputIds.length, 1)
      const sequence = [...prompt, ...first.outputIds]
      // Row p: the forward step that processed token p (output token k came from the step at prompt + k − 1).
      const rowsOf = (ids: ReadonlyArray<number>) =>
        ids.slice(0, -1).map((token, position) => FakeSglang.fakeRouting(token, position))
      assert.deepStrictEqual(first.routedExperts, rowsOf(sequence))
      const resumed = yield* engine.generate({
        inputIds: sequence,
        sampling: { ...sampling, maxNewTokens: 2 },
        rid: "routed-2",
        returnLogprob: true,
        resumedTokens: first.outputIds.length
      })
      assert.deepStrictEqual(resumed.routedExperts, rowsOf([...sequence, ...resumed.outputIds]))
      const bodies = server.requests.filter((r) => r.path === "/generate").map((r) => r.body as Record<string, unknown>)
      assert.deepStrictEqual(bodies.map((b) => b["return_routed_experts"]), [true, true])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("fails naming the server flag when the server does not return the routing", () =>
    Effect.gen(function*() {
      const server = yield* fake({})
      const engine = yield* SglangEngine.SglangEngine.make({
        workerUrls: [server.url],
        retryBase: "1 millis",
        routedExperts: true
      })
      const error = yield* Effect.flip(
        engine.generate({ inputIds: prompt, sampling, rid: "routed-3", returnLogprob: true })
      )
      assert.include(error.message, "--enable-return-routed-experts")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

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
