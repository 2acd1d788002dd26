import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as ImageGrid from "../../src/template/ImageGrid.ts"
import * as ImageProcessor from "../../src/vision/ImageProcessor.ts"

const processor = (json: Record<string, unknown>) =>
  ImageProcessor.fromJson(json, Result.getOrThrow(ImageGrid.configFrom(json)), "/models/vl")

const qwen25vl = {
  min_pixels: 3136,
  max_pixels: 12845056,
  patch_size: 14,
  temporal_patch_size: 2,
  merge_size: 2,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_std: [0.26862954, 0.26130258, 0.27577711],
  image_processor_type: "Qwen2VLImageProcessor",
  processor_class: "Qwen2_5_VLProcessor"
}

describe("the image processor of preprocessor_config.json", () => {
  it("takes the file's fields and the class's defaults for the rest", () => {
    const config = Result.getOrThrow(processor(qwen25vl))
    assert.strictEqual(config.processorClass, "Qwen2VLImageProcessor")
    assert.strictEqual(config.resample, 3)
    assert.isTrue(config.doResize && config.doRescale && config.doNormalize)
    assert.strictEqual(config.rescaleFactor, 1 / 255)
    assert.deepStrictEqual(config.imageStd, [0.26862954, 0.26130258, 0.27577711])
    const qwen3 = Result.getOrThrow(processor({
      size: { longest_edge: 16777216, shortest_edge: 65536 },
      patch_size: 16,
      temporal_patch_size: 2,
      merge_size: 2,
      image_mean: [0.5, 0.5, 0.5],
      image_std: [0.5, 0.5, 0.5],
      processor_class: "Qwen3VLProcessor",
      image_processor_type: "Qwen2VLImageProcessorFast"
    }))
    assert.deepStrictEqual(qwen3.imageMean, [0.5, 0.5, 0.5])
    assert.strictEqual(qwen3.minPixels, 65536)
  })

  it("refuses another processor class, naming it and the grid / none fallbacks", () => {
    const result = processor({ ...qwen25vl, image_processor_type: "Glm4vImageProcessor" })
    const message = Result.isFailure(result) ? result.failure : ""
    assert.include(message, `/models/vl/preprocessor_config.json names the image processor "Glm4vImageProcessor"`)
    assert.include(message, "--multimodal-train-inputs grid")
    assert.include(message, " or none ")
  })

  it("refuses a resample that is not one of Pillow's filters", () => {
    const result = processor({ ...qwen25vl, resample: 7 })
    assert.include(Result.isFailure(result) ? result.failure : "", "resample 7 is not one of Pillow's filters")
  })
})
