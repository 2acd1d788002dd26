/**
 * The generation core with a vision tokenizer (test/support/VisionTokenizer.ts: Qwen2-VL's chat template and the
 * Qwen2.5-VL processor constants) and with --rollout-skip-special-tokens, against an engine that records what it got
 * and answers fixed ids.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Images from "../../layers/generation/Images.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as VisionInputs from "../../layers/vision/VisionInputs.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Requests from "../support/requests.ts"
import * as ScriptedEngine from "../support/scriptedEngine.ts"
import * as Sessions from "../support/sessions.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"

const PAD = 151655

/** An engine answering `answer` ids to every request, recording the requests. */
const engineAnswering = (calls: Array<Engine.GenerateRequest>, answer: ReadonlyArray<number>) =>
  ScriptedEngine.scriptedEngine(calls, () => ({
    outputIds: answer,
    logprobs: answer.map(() => -0.5),
    finishReason: { type: "stop" },
    weightVersion: "v0"
  }))

const stackFor = (
  tokenizer: Layer.Layer<Tokenizer.Tokenizer>,
  calls: Array<Engine.GenerateRequest>,
  answer: ReadonlyArray<number>,
  options: Generation.GenerationOptions = {}
) =>
  Generation.Generation.layer(options).pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(engineAnswering(calls, answer)),
    Layer.provideMerge(tokenizer)
  )

const request = (messages: ReadonlyArray<unknown>) => Requests.canonicalRequest({ messages })

const withImage = (url: string) => [{
  role: "user",
  content: [{ type: "image_url", image_url: { url } }, { type: "text", text: "What colour is it?" }]
}]

describe("a vision model's observations", () => {
  it.effect("send one placeholder per image to the engine and train on the processor-expanded tokens", () =>
    Effect.gen(function*() {
      const dir = yield* VisionTokenizer.directory()
      const image = yield* VisionTokenizer.pngDataUri(640, 480)
      const calls: Array<Engine.GenerateRequest> = []
      const tokenizer = yield* Tokenizer.load(dir)
      const answer = [...tokenizer.encode("Red."), tokenizer.eosTokenId]
      yield* Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const entry = yield* Sessions.sessionWithForest()
        const completion = yield* generation.generate(entry, request(withImage(image)))
        assert.strictEqual(completion.content, "Red.")
        // Inference: one <|image_pad|>, the image as image_data.
        const sent = calls[0]!
        assert.strictEqual(sent.inputIds.filter((id) => id === PAD).length, 1)
        assert.deepStrictEqual(sent.imageData, [image])
        // Training: 391 pads for a 640 x 480 image (grid [1, 34, 46]), everything else as sent.
        const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
        const leaf = Forest.leaves(forest)[0]!
        const sample = Sample.build(forest, leaf, (ids) => tokenizer.decode(ids), {
          rolloutId: 0,
          exportName: null,
          reward: 1,
          metadata: {}
        })
        assert.strictEqual(sample.tokens.filter((id) => id === PAD).length, 391)
        assert.strictEqual(sample.tokens.length, sent.inputIds.length - 1 + 391 + answer.length)
        assert.deepStrictEqual(sample.multimodal_inputs, { images: [image] })
        assert.deepStrictEqual(sample.multimodal_train_inputs, { image_grid_thw: [[1, 34, 46]] })
        assert.strictEqual(Forest.trainTokenCount(forest, leaf), sample.tokens.length)
      }).pipe(Effect.provide(stackFor(Layer.succeed(Tokenizer.Tokenizer, tokenizer), calls, answer)))
    }).pipe(Effect.scoped))

  it.effect("count the expanded length against --rollout-max-context-len (a 400, nothing committed)", () =>
    Effect.gen(function*() {
      const dir = yield* VisionTokenizer.directory()
      const image = yield* VisionTokenizer.pngDataUri(640, 480)
      const calls: Array<Engine.GenerateRequest> = []
      const tokenizer = yield* Tokenizer.load(dir)
      yield* Effect.gen(function*() {
        const generation = yield* Generation.Generation
        // The prompt the engine would see is ~30 tokens; with the image expanded it is ~420.
        const entry = yield* Sessions.sessionWithForest({ maxContextLen: 200 })
        const error = yield* generation.generate(entry, request(withImage(image))).pipe(Effect.flip)
        assert.strictEqual(error._tag, "ContextLengthError")
        assert.strictEqual(ProtocolError.GatewayError.fromGeneration(error).status, 400)
        assert.lengthOf(calls, 0)
        const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
        assert.strictEqual(forest.nodes.size, 1)
      }).pipe(Effect.provide(stackFor(Layer.succeed(Tokenizer.Tokenizer, tokenizer), calls, [tokenizer.eosTokenId])))
    }).pipe(Effect.scoped))

  it.effect("refuse an image that cannot be read with a 400 naming it", () =>
    Effect.gen(function*() {
      const dir = yield* VisionTokenizer.directory()
      const calls: Array<Engine.GenerateRequest> = []
      const tokenizer = yield* Tokenizer.load(dir)
      yield* Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const entry = yield* Sessions.sessionWithForest()
        const error = yield* generation.generate(entry, request(withImage("data:image/png;base64,AAAA"))).pipe(
          Effect.flip
        )
        assert.strictEqual(error._tag, "ImageRejectedError")
        const http = ProtocolError.GatewayError.fromGeneration(error)
        assert.strictEqual(http.status, 400)
        assert.include(http.message, "cannot read image data:image/png;base64,AAAA")
        assert.lengthOf(calls, 0)
      }).pipe(Effect.provide(stackFor(Layer.succeed(Tokenizer.Tokenizer, tokenizer), calls, [tokenizer.eosTokenId])))
    }).pipe(Effect.scoped))
})

describe("a vision model's observations with --multimodal-train-inputs pixels", () => {
  it.effect("refuse a corrupt image (its header reads, its pixels do not) with a 400 naming its index", () =>
    Effect.gen(function*() {
      const dir = yield* VisionTokenizer.directory()
      const calls: Array<Engine.GenerateRequest> = []
      const tokenizer = yield* Tokenizer.load(dir)
      const pixels = yield* VisionInputs.forTokenizer("pixels", tokenizer)
      const good = yield* VisionTokenizer.pngDataUri(64, 48)
      const corrupt = yield* VisionTokenizer.truncatedPngDataUri(640, 480)
      // Only the header is read for a grid: the same image passes with `grid`.
      const gridOnly = yield* Images.expandObservation(
        tokenizer,
        [1, PAD, 2],
        [corrupt],
        VisionInputs.VisionInputs.defaultValue()
      )
      assert.deepStrictEqual(gridOnly?.imageGrids, [[1, 34, 46]])
      yield* Effect.gen(function*() {
        const generation = yield* Generation.Generation
        const entry = yield* Sessions.sessionWithForest()
        const messages = [{
          role: "user",
          content: [
            { type: "image_url", image_url: { url: good } },
            { type: "image_url", image_url: { url: corrupt } },
            { type: "text", text: "Which is brighter?" }
          ]
        }]
        const error = yield* generation.generate(entry, request(messages)).pipe(Effect.flip)
        assert.strictEqual(error._tag, "ImageRejectedError")
        const http = ProtocolError.GatewayError.fromGeneration(error)
        assert.strictEqual(http.status, 400)
        assert.include(http.message, "image 1 of the request (0-based, in message order")
        assert.include(http.message, "cannot decode it")
        assert.lengthOf(calls, 0)
        const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
        assert.strictEqual(forest.nodes.size, 1)
      }).pipe(
        Effect.provide(stackFor(Layer.succeed(Tokenizer.Tokenizer, tokenizer), calls, [tokenizer.eosTokenId])),
        Effect.provideService(VisionInputs.VisionInputs, pixels)
      )
    }).pipe(Effect.scoped))
})

describe("--rollout-skip-special-tokens", () => {
  it.effect("drops special tokens from the response text; the committed ids keep them", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.load()
      const endOfText = tokenizer.tokenToId("<|endoftext|>")!
      const imEnd = tokenizer.tokenToId("<|im_end|>")!
      const answer = [...tokenizer.encode("A"), endOfText, ...tokenizer.encode("B"), imEnd]
      const run = (options: Generation.GenerationOptions) =>
        Effect.gen(function*() {
          const generation = yield* Generation.Generation
          const entry = yield* Sessions.sessionWithForest()
          const completion = yield* generation.generate(entry, request([{ role: "user", content: "q" }]))
          const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
          const leaf = Forest.node(forest, Forest.leaves(forest)[0]!)
          return { content: completion.content, committed: [...Forest.unpackTokens(leaf)] }
        }).pipe(Effect.provide(stackFor(Layer.succeed(Tokenizer.Tokenizer, tokenizer), [], answer, options)))
      const kept = yield* run({})
      const skipped = yield* run({ skipSpecialTokens: true })
      assert.strictEqual(kept.content, "A<|endoftext|>B")
      assert.strictEqual(skipped.content, "AB")
      assert.deepStrictEqual(skipped.committed, answer)
    }))
})
