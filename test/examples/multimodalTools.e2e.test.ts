import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Path from "node:path"
import sharp from "sharp"
import * as Colours from "../../examples/multimodal-tools/colours.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Cli from "../../src/cli.ts"
import { makeRollout, memorySink, Rollout, type RolloutOptionsInput } from "../../src/index.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const config = Cli.readConfigFile(Path.join(root, "examples", "multimodal-tools", "rollout.json"))
const PAD = 151655

/** Whether the PNG data URI shows a square of `colour` (some pixels near it). */
const shows = async (url: string, colour: Colours.ColourName): Promise<boolean> => {
  const { data } = await sharp(Buffer.from(url.slice(url.indexOf(",") + 1), "base64")).removeAlpha().raw()
    .toBuffer({ resolveWithObject: true })
  for (let i = 0; i < data.length; i += 3) {
    if (Colours.distance({ r: data[i]!, g: data[i + 1]!, b: data[i + 2]! }, Colours.palette[colour]) < 30 * 30) {
      return true
    }
  }
  return false
}

describe("the multimodal tool-use example (a zoom tool whose observations carry images)", () => {
  it.live(
    "trains on every image of the lineage, expanded and masked, and the model sees the zoomed views",
    () =>
      Effect.gen(function*() {
        assert.isTrue(Result.isSuccess(config))
        const tokenizer = yield* VisionTokenizer.directory()
        const step = yield* Effect.gen(function*() {
          const rollout = yield* Rollout
          return yield* rollout.runStep(0)
        }).pipe(Effect.provide(makeRollout(
          { ...(Result.isSuccess(config) ? config.success : {}), tokenizer } as RolloutOptionsInput,
          { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant }
        )))
        assert.lengthOf(step.samples, 4)
        // The default seed: one Session zooms into the wrong place and cannot name the colour.
        assert.deepStrictEqual(step.samples.map((s) => (s.reward as { readonly score: number }).score), [0, 1, 1, 1])
        for (const sample of step.samples) {
          assert.strictEqual(sample.status, "completed")
          // Two images along the lineage: the task's 640 x 480 (grid [1, 34, 46], 391 tokens under Qwen2.5-VL) in the
          // prompt, the tool's 224 x 224 zoom (grid [1, 16, 16], 64 tokens) in the continuation.
          assert.deepStrictEqual(sample.multimodal_train_inputs?.image_grid_thw, [[1, 34, 46], [1, 16, 16]])
          const images = sample.multimodal_inputs?.images ?? []
          assert.lengthOf(images, 2)
          // Each image's pixel_values (the default --multimodal-train-inputs pixels): one row per patch (the grid's
          // product), 3 * 2 * 14² columns, equal to a direct computation of the same image.
          const pixels = sample.multimodal_train_inputs?.pixel_values ?? []
          assert.lengthOf(pixels, 2)
          for (const [i, values] of pixels.entries()) {
            const [t, h, w] = sample.multimodal_train_inputs!.image_grid_thw[i]!
            assert.deepStrictEqual(values.shape, [t * h * w, 3 * 2 * 14 * 14])
            assert.isTrue("data" in values)
            const direct = yield* VisionTokenizer.directPixels(tokenizer, images[i]!)
            assert.deepStrictEqual("data" in values ? values.data : undefined, direct.data)
          }
          const zoom = yield* Effect.promise(() => sharp(Buffer.from(images[1]!.split(",")[1]!, "base64")).metadata())
          assert.deepStrictEqual([zoom.width, zoom.height], [224, 224])
          const promptLength = sample.tokens.length - sample.response_length
          const pads = sample.tokens.flatMap((id, i) => (id === PAD ? [i] : []))
          assert.strictEqual(pads.filter((i) => i < promptLength).length, 391)
          const observed = pads.filter((i) => i >= promptLength)
          assert.strictEqual(observed.length, 64)
          // The observation's image tokens are not trained on.
          for (const i of observed) assert.strictEqual(sample.loss_mask[i - promptLength], 0)
          assert.include(sample.loss_mask, 1)

          // The model answered from the zoomed view the tool observation carried: it names its size, and it names the
          // square's colour exactly when that view shows the square.
          const answer = sample.metadata["answer"] as Colours.ColourName
          const visible = yield* Effect.promise(() => shows(images[1]!, answer))
          assert.include(sample.response, "The zoomed view (224 x 224)")
          assert.strictEqual((sample.reward as { readonly score: number }).score, visible ? 1 : 0)
          assert.include(
            sample.response,
            visible ? `The square is ${answer}.` : "I do not see a coloured square there."
          )
        }
      }).pipe(Effect.scoped),
    { timeout: 120_000 }
  )
})
