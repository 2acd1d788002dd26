import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Images from "../../layers/generation/Images.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as VisionInputs from "../../layers/vision/VisionInputs.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"

const grid = VisionInputs.VisionInputs.defaultValue()

const PAD = 151655
const count = (ids: ReadonlyArray<number>, id: number) => ids.filter((x) => x === id).length

describe("an observation's training view", () => {
  it.effect("expands each image placeholder as the Qwen2.5-VL processor does (640x480: grid [1, 34, 46], 391 pads)", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.load(yield* VisionTokenizer.directory())
      assert.deepStrictEqual(tokenizer.vision?.imagePadId, PAD)
      const [wide, small] = [yield* VisionTokenizer.pngDataUri(640, 480), yield* VisionTokenizer.pngDataUri(20, 20)]
      const text = yield* tokenizer.render({
        messages: [{
          role: "user",
          content: [{ type: "image_url", image_url: { url: wide } }, { type: "text", text: "and" }, {
            type: "image_url",
            image_url: { url: small }
          }]
        }],
        tools: [],
        chatTemplateKwargs: {},
        addGenerationPrompt: true
      })
      const tokens = tokenizer.encode(text)
      assert.strictEqual(count(tokens, PAD), 2)
      const expanded = yield* Images.expandObservation(tokenizer, tokens, [wide, small], grid)
      assert.deepStrictEqual(expanded?.imageGrids, [[1, 34, 46], [1, 4, 4]])
      assert.strictEqual(count(expanded?.tokens ?? [], PAD), 391 + 4)
      assert.strictEqual(expanded?.tokens.length, tokens.length - 2 + 391 + 4)
      // Everything but the placeholders is unchanged, in order.
      assert.deepStrictEqual(expanded?.tokens.filter((id) => id !== PAD), tokens.filter((id) => id !== PAD))
    }).pipe(Effect.scoped))

  it.effect("keeps a text-only template's tokens as they are (the bundled Qwen3 tokenizer)", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.load()
      assert.isUndefined(tokenizer.vision)
      const image = yield* VisionTokenizer.pngDataUri(64, 64)
      assert.isUndefined(
        yield* Images.expandObservation(tokenizer, tokenizer.encode("<|im_start|>user\nhi"), [image], grid)
      )
    }))

  it.effect("refuses placeholders it cannot expand: no preprocessor_config.json, or an unreadable image", () =>
    Effect.gen(function*() {
      const bare = yield* Tokenizer.load(yield* VisionTokenizer.directory({ preprocessor: false }))
      const noProcessor = yield* Images.expandObservation(bare, [1, PAD, 2], ["data:image/png;base64,AAAA"], grid).pipe(
        Effect.flip
      )
      assert.include(noProcessor, "has no preprocessor_config.json")
      const vision = yield* Tokenizer.load(yield* VisionTokenizer.directory())
      const unreadable = yield* Images.expandObservation(vision, [1, PAD, 2], ["data:image/png;base64,AAAA"], grid)
        .pipe(
          Effect.flip
        )
      assert.include(unreadable, "cannot read image data:image/png;base64,AAAA")
    }).pipe(Effect.scoped))
})
