/**
 * Golden values: no Hugging Face processor can be downloaded here, so they were computed once by running the published
 * `smart_resize` algorithm (transformers' image_processing_qwen2_vl.py / qwen-vl-utils' vision_process.py) in Python 3
 * with the processor constants of the models' preprocessor_config.json — Qwen2.5-VL: patch 14, merge 2, min_pixels
 * 3136, max_pixels 12845056; Qwen3-VL: patch 16, merge 2, size.shortest_edge 65536, size.longest_edge 16777216. The
 * script and its printed output are test/fixtures/vision/smart_resize_golden.py (rerun it to check). Every grid here
 * was since checked against transformers 5.18.0's Qwen2VLImageProcessor (PIL backend) with those constants: identical.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as ImageGrid from "../../src/template/ImageGrid.ts"

const qwen25vl = Result.getOrThrow(ImageGrid.configFrom({
  min_pixels: 3136,
  max_pixels: 12845056,
  patch_size: 14,
  temporal_patch_size: 2,
  merge_size: 2,
  image_processor_type: "Qwen2VLImageProcessor"
}))

const qwen3vl = Result.getOrThrow(ImageGrid.configFrom({
  size: { longest_edge: 16777216, shortest_edge: 65536 },
  patch_size: 16,
  temporal_patch_size: 2,
  merge_size: 2,
  image_processor_type: "Qwen2VLImageProcessorFast"
}))

/** [width, height, grid_thw, image_pad tokens], as printed by smart_resize_golden.py. */
const golden: Record<string, ReadonlyArray<readonly [number, number, ImageGrid.Grid, number]>> = {
  "Qwen2.5-VL": [
    [640, 480, [1, 34, 46], 391],
    [1024, 768, [1, 54, 74], 999],
    // 42 / 28 = 1.5 and 70 / 28 = 2.5 round to even (2, 2) as Python's round does; Math.round would give 84 wide.
    [70, 42, [1, 4, 4], 4],
    [20, 20, [1, 4, 4], 4],
    [8000, 6000, [1, 220, 294], 16170],
    [3000, 100, [1, 8, 214], 428]
  ],
  "Qwen3-VL": [
    [640, 480, [1, 30, 40], 300],
    [1024, 768, [1, 48, 64], 768],
    [70, 42, [1, 14, 22], 77],
    [20, 20, [1, 16, 16], 64],
    [8000, 6000, [1, 220, 294], 16170],
    [3000, 100, [1, 6, 188], 282]
  ]
}

describe("the processor's image grid (smart_resize)", () => {
  for (const [model, config] of [["Qwen2.5-VL", qwen25vl], ["Qwen3-VL", qwen3vl]] as const) {
    it(`matches the pinned ${model} grids and placeholder counts`, () => {
      for (const [width, height, grid, tokens] of golden[model]!) {
        const computed = Result.getOrThrow(ImageGrid.gridOf(height, width, config))
        assert.deepStrictEqual(computed, grid, `${model} ${width}x${height}`)
        assert.strictEqual(ImageGrid.padCount(computed, config), tokens, `${model} ${width}x${height}`)
      }
    })
  }

  it("refuses an aspect ratio above 200, as the processor does", () => {
    const result = ImageGrid.gridOf(10, 2500, qwen25vl)
    assert.isTrue(Result.isFailure(result))
    assert.include(Result.isFailure(result) ? result.failure : "", "absolute aspect ratio must be smaller than 200")
  })
})

describe("preprocessor_config.json", () => {
  it("reads the Qwen2.5-VL and the Qwen3-VL spelling of the pixel bounds", () => {
    assert.deepStrictEqual(qwen25vl, {
      patchSize: 14,
      mergeSize: 2,
      temporalPatchSize: 2,
      minPixels: 3136,
      maxPixels: 12845056
    })
    assert.deepStrictEqual(qwen3vl, {
      patchSize: 16,
      mergeSize: 2,
      temporalPatchSize: 2,
      minPixels: 65536,
      maxPixels: 16777216
    })
  })

  it("reads the grid constants whatever the processor class (the class matters for pixel_values only)", () => {
    const result = ImageGrid.configFrom({
      patch_size: 14,
      merge_size: 2,
      min_pixels: 1,
      max_pixels: 2,
      image_processor_type: "SomeDerivedImageProcessor"
    })
    assert.deepStrictEqual(Result.getOrThrow(result), {
      patchSize: 14,
      mergeSize: 2,
      temporalPatchSize: 2,
      minPixels: 1,
      maxPixels: 2
    })
  })

  it("says which constant is missing", () => {
    const result = ImageGrid.configFrom({ patch_size: 14, min_pixels: 1, max_pixels: 2 })
    assert.include(Result.isFailure(result) ? result.failure : "", "needs numeric patch_size and merge_size")
  })
})

describe("placeholder expansion", () => {
  const pad = 151655
  it("expands the k-th <|image_pad|> into the k-th image's count and leaves other ids alone", () => {
    const ids = [1, 151652, pad, 151653, 2, 151652, pad, 151653, 3]
    const expanded = Result.getOrThrow(ImageGrid.expand(ids, pad, [3, 1]))
    assert.deepStrictEqual(expanded, [1, 151652, pad, pad, pad, 151653, 2, 151652, pad, 151653, 3])
  })

  it("fails when the template rendered another number of placeholders than there are images", () => {
    const result = ImageGrid.expand([1, 2, 3], pad, [4])
    assert.isTrue(Result.isFailure(result))
    assert.include(Result.isFailure(result) ? result.failure : "", "rendered 0 image placeholder(s) for 1 image(s)")
  })
})
