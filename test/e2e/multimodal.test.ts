import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import sharp from "sharp"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as TempDir from "../support/TempDir.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")
const PAD = 151655

describe("a multimodal rollout with a vision tokenizer (real agent processes, embedded engine)", () => {
  it.live(
    "writes samples whose tokens hold the processor-expanded image and whose grids are pinned",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* VisionTokenizer.directory()
        const dir = yield* TempDir.scoped("relax-mm-")
        const image = join(dir, "photo.png")
        yield* Effect.promise(() =>
          sharp({ create: { width: 640, height: 480, channels: 3, background: { r: 0, g: 90, b: 200 } } }).png().toFile(
            image
          )
        )
        const data = join(dir, "train.jsonl")
        writeFileSync(
          data,
          JSON.stringify({ input: "<image>What is 2 + 3?", images: [image], metadata: { answer: 5 } }) + "\n"
        )
        const step = yield* Effect.gen(function*() {
          const rollout = yield* Rollout
          return yield* rollout.runStep(0)
        }).pipe(Effect.provide(makeRollout({
          promptData: data,
          multimodalKeys: { image: "images" },
          agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
          agentCwd: fixtures,
          agentTimeout: 60,
          embeddedPolicy: join(fixtures, "policy.mjs"),
          tokenizer,
          nSamplesPerPrompt: 2,
          rolloutBatchSize: 1,
          rolloutMaxResponseLen: 32
        }, { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant })))
        assert.lengthOf(step.samples, 2)
        for (const sample of step.samples) {
          // 640 x 480 under Qwen2.5-VL: resized 644 x 476, grid [1, 34, 46], 391 image tokens (ImageGrid.test.ts).
          assert.deepStrictEqual(sample.multimodal_train_inputs?.image_grid_thw, [[1, 34, 46]])
          assert.deepStrictEqual(sample.multimodal_train_inputs?.pixel_values?.[0]?.shape, [34 * 46, 3 * 2 * 14 * 14])
          assert.lengthOf(sample.multimodal_inputs?.images ?? [], 1)
          assert.match(sample.multimodal_inputs?.images[0] ?? "", /^data:image\/png;base64,/)
          assert.strictEqual(sample.tokens.filter((id) => id === PAD).length, 391)
          assert.strictEqual(sample.loss_mask.length, sample.response_length)
        }
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
