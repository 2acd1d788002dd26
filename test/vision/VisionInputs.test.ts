import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Images from "../../layers/generation/Images.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as VisionInputs from "../../layers/vision/VisionInputs.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"

const PAD = 151655

/** A vision tokenizer directory whose preprocessor_config.json names `processorClass`. */
const directoryWithClass = (processorClass: string) =>
  Effect.gen(function*() {
    const dir = yield* VisionTokenizer.directory()
    Fs.writeFileSync(
      Path.join(dir, "preprocessor_config.json"),
      JSON.stringify({ ...VisionTokenizer.qwen25VlPreprocessorConfig, image_processor_type: processorClass })
    )
    return dir
  })

const sample = (images: ReadonlyArray<string>): TrainingSample.TrainingSample => ({
  rollout_id: 0,
  group_index: 0,
  index: 3,
  session_id: "s",
  export_name: null,
  tokens: [1],
  response_length: 1,
  loss_mask: [1],
  rollout_log_probs: [0],
  turn_spans: [[0, 1]],
  prompt: "",
  response: "",
  reward: null,
  advantage: null,
  status: "completed",
  weight_versions: [],
  metadata: {},
  label: null,
  ...(images.length === 0 ? {} : {
    multimodal_inputs: { images },
    multimodal_train_inputs: { image_grid_thw: images.map(() => [1, 2, 2] as const) }
  })
})

describe("--multimodal-train-inputs", () => {
  it.effect("pixels: another processor class stops the startup, naming the class and the grid / none fallbacks", () =>
    Effect.gen(function*() {
      const dir = yield* directoryWithClass("Glm4vImageProcessor")
      const tokenizer = yield* Tokenizer.load(dir)
      const error = yield* VisionInputs.forTokenizer("pixels", tokenizer).pipe(Effect.flip)
      assert.strictEqual(error._tag, "RolloutConfigError")
      assert.include(
        error.message,
        `--multimodal-train-inputs: ${dir}/preprocessor_config.json names the image processor "Glm4vImageProcessor"`
      )
      assert.include(error.message, "Run with --multimodal-train-inputs grid")
      assert.include(error.message, " or none ")
      // The fallbacks start.
      assert.strictEqual((yield* VisionInputs.forTokenizer("grid", tokenizer)).mode, "grid")
      assert.strictEqual((yield* VisionInputs.forTokenizer("none", tokenizer)).mode, "none")
    }).pipe(Effect.scoped))

  it.effect("pixels: a rollout with another processor class fails at startup, before any agent starts", () =>
    Effect.gen(function*() {
      const dir = yield* directoryWithClass("Glm4vImageProcessor")
      const fixtures = Path.join(import.meta.dirname, "..", "fixtures", "rollout")
      const error = yield* Effect.gen(function*() {
        return yield* (yield* Rollout).runStep(0)
      }).pipe(
        Effect.provide(makeRollout({
          promptData: Path.join(fixtures, "train.jsonl"),
          agentCommand: "false",
          rolloutBatchSize: 1,
          tokenizer: dir
        }, { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant })),
        Effect.flip
      )
      assert.strictEqual(error._tag, "RolloutConfigError")
      assert.include(error.message, `names the image processor "Glm4vImageProcessor"`)
    }).pipe(Effect.scoped))

  it.effect("pixels: an image's values are computed once per digest, whatever URL carries its bytes", () =>
    Effect.gen(function*() {
      const dir = yield* VisionTokenizer.directory()
      const inputs = yield* VisionInputs.forTokenizer("pixels", yield* Tokenizer.load(dir))
      const uri = yield* VisionTokenizer.noisyPngDataUri(90, 60)
      const file = Path.join(dir, "image.png")
      Fs.writeFileSync(file, Buffer.from(uri.slice(uri.indexOf(",") + 1), "base64"))
      const fromUri = yield* inputs.pixelsOf(uri)
      const fromFile = yield* inputs.pixelsOf(file)
      assert.strictEqual(fromFile.data, fromUri.data)
      // 90 x 60 → 84 x 56 (Qwen2.5-VL: multiples of 28): grid [1, 4, 6], 24 rows of 3 * 2 * 14² values.
      assert.deepStrictEqual(fromUri.grid, [1, 4, 6])
      assert.deepStrictEqual(fromUri.shape, [24, 1176])
      assert.deepStrictEqual(fromUri.data, (yield* VisionTokenizer.directPixels(dir, uri)).data)
    }).pipe(Effect.scoped))

  it.effect("pixels: attach puts each image's array beside its grid and leaves text samples alone", () =>
    Effect.gen(function*() {
      const dir = yield* VisionTokenizer.directory()
      const inputs = yield* VisionInputs.forTokenizer("pixels", yield* Tokenizer.load(dir))
      const [a, b] = [
        yield* VisionTokenizer.noisyPngDataUri(56, 56, 1),
        yield* VisionTokenizer.noisyPngDataUri(56, 56, 2)
      ]
      const [withImages, text] = yield* inputs.attach([sample([a, b]), sample([])])
      const pixels = withImages?.multimodal_train_inputs?.pixel_values ?? []
      assert.lengthOf(pixels, 2)
      assert.deepStrictEqual(pixels.map((p) => p.shape), [[16, 1176], [16, 1176]])
      assert.notDeepEqual("data" in pixels[0]! ? pixels[0].data : 0, "data" in pixels[1]! ? pixels[1].data : 0)
      assert.deepStrictEqual(text, sample([]))
      const broken = yield* inputs.attach([sample([a, "data:image/png;base64,AAAA"])]).pipe(Effect.flip)
      assert.include(broken.message, "image 1 of sample 3")
    }).pipe(Effect.scoped))

  it.effect("none: observations train on their inference tokens, one placeholder per image", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.load(yield* VisionTokenizer.directory())
      const none = yield* VisionInputs.forTokenizer("none", tokenizer)
      const image = yield* VisionTokenizer.pngDataUri(64, 48)
      assert.isUndefined(yield* Images.expandObservation(tokenizer, [1, PAD, 2], [image], none))
    }).pipe(Effect.scoped))
})
