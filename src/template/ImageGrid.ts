/**
 * Processor-expanded image tokens for Qwen2-VL-family models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): the image grid the Hugging
 * Face processor computes from an image's size, and the expansion of each `<|image_pad|>` placeholder into the number of
 * tokens the vision encoder produces for it.
 *
 * **Details**
 * The chat template renders one `<|vision_start|><|image_pad|><|vision_end|>` per image. SGLang takes those ids with
 * the image (`image_data`) and expands the placeholder itself, so inference keeps one pad per image. Training needs
 * what the processor produces: the image is resized by {@link smartResize} to multiples of `patch_size * merge_size`
 * within `[min_pixels, max_pixels]`, cut into `patch_size` patches (`image_grid_thw = [1, h / patch, w / patch]`; one
 * image is one temporal patch), and the pad becomes `t * h * w / merge_size²` pads.
 *
 * `smartResize` follows the algorithm transformers (`image_processing_qwen2_vl.py`) and qwen-vl-utils
 * (`vision_process.py`) publish, including Python's round-half-to-even; images smaller than the factor are scaled up
 * as qwen-vl-utils does. The constants come from the model's `preprocessor_config.json`.
 */
import { Result, Schema } from "effect"

/** The processor constants one model uses. */
export interface VisionConfig {
  readonly patchSize: number
  readonly mergeSize: number
  readonly temporalPatchSize: number
  readonly minPixels: number
  readonly maxPixels: number
}

/** The image grid of one image, `[t, h, w]` in patches (`image_grid_thw`). */
export type Grid = readonly [number, number, number]

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))

/**
 * The fields of `preprocessor_config.json` this module reads: Qwen2-VL / Qwen2.5-VL write `min_pixels` / `max_pixels`,
 * newer processors (Qwen3-VL) `size.shortest_edge` / `size.longest_edge` (both in pixels).
 */
export const PreprocessorConfig = Schema.Struct({
  image_processor_type: Schema.optional(Schema.String),
  patch_size: PositiveInt,
  merge_size: PositiveInt,
  temporal_patch_size: Schema.optional(PositiveInt),
  min_pixels: Schema.optional(PositiveInt),
  max_pixels: Schema.optional(PositiveInt),
  size: Schema.optional(Schema.Struct({
    shortest_edge: Schema.optional(PositiveInt),
    longest_edge: Schema.optional(PositiveInt)
  }))
})
export type PreprocessorConfig = typeof PreprocessorConfig.Type

const decodeConfig = Schema.decodeUnknownResult(PreprocessorConfig)

/**
 * The vision constants of a `preprocessor_config.json` object; the failure says what is missing. The processor class
 * is not judged here: the grid needs only these constants, and which classes get `pixel_values` is
 * src/vision/ImageProcessor.ts's to say.
 */
export const configFrom = (json: unknown): Result.Result<VisionConfig, string> => {
  const decoded = decodeConfig(json)
  if (Result.isFailure(decoded)) {
    return Result.fail(`preprocessor_config.json needs numeric patch_size and merge_size: ${decoded.failure.message}`)
  }
  const c = decoded.success
  const minPixels = c.min_pixels ?? c.size?.shortest_edge
  const maxPixels = c.max_pixels ?? c.size?.longest_edge
  if (minPixels === undefined || maxPixels === undefined) {
    return Result.fail(
      "preprocessor_config.json needs min_pixels and max_pixels (or size.shortest_edge and size.longest_edge)"
    )
  }
  return Result.succeed({
    patchSize: c.patch_size,
    mergeSize: c.merge_size,
    temporalPatchSize: c.temporal_patch_size ?? 2,
    minPixels,
    maxPixels
  })
}

/** Python's `round`: halves go to the even neighbour. */
const roundHalfEven = (x: number): number => {
  const floor = Math.floor(x)
  const diff = x - floor
  if (diff > 0.5) return floor + 1
  if (diff < 0.5) return floor
  return floor % 2 === 0 ? floor : floor + 1
}

/** The size the processor resizes an image to (`smart_resize`); fails on an aspect ratio above 200, as it does. */
export const smartResize = (
  height: number,
  width: number,
  config: VisionConfig
): Result.Result<{ readonly height: number; readonly width: number }, string> => {
  if (height < 1 || width < 1) return Result.fail(`the image is ${width}x${height} pixels`)
  if (Math.max(height, width) / Math.min(height, width) > 200) {
    return Result.fail(
      `absolute aspect ratio must be smaller than 200, got ${Math.max(height, width) / Math.min(height, width)}`
    )
  }
  const factor = config.patchSize * config.mergeSize
  let h = Math.max(factor, roundHalfEven(height / factor) * factor)
  let w = Math.max(factor, roundHalfEven(width / factor) * factor)
  if (h * w > config.maxPixels) {
    const beta = Math.sqrt((height * width) / config.maxPixels)
    h = Math.max(factor, Math.floor(height / beta / factor) * factor)
    w = Math.max(factor, Math.floor(width / beta / factor) * factor)
  } else if (h * w < config.minPixels) {
    const beta = Math.sqrt(config.minPixels / (height * width))
    h = Math.ceil((height * beta) / factor) * factor
    w = Math.ceil((width * beta) / factor) * factor
  }
  return Result.succeed({ height: h, width: w })
}

/** `image_grid_thw` of one image of `height` x `width` pixels. */
export const gridOf = (height: number, width: number, config: VisionConfig): Result.Result<Grid, string> =>
  Result.map(
    smartResize(height, width, config),
    (size): Grid => [1, size.height / config.patchSize, size.width / config.patchSize]
  )

/** How many `<|image_pad|>` tokens the processor puts in place of one image's placeholder. */
export const padCount = (grid: Grid, config: VisionConfig): number =>
  (grid[0] * grid[1] * grid[2]) / (config.mergeSize * config.mergeSize)

/**
 * Training ids from inference ids: the k-th `imagePadId` becomes `counts[k]` copies of it. Fails when the template
 * rendered a different number of placeholders than there are images.
 */
export const expand = (
  ids: ReadonlyArray<number>,
  imagePadId: number,
  counts: ReadonlyArray<number>
): Result.Result<Array<number>, string> => {
  const out: Array<number> = []
  let image = 0
  for (const id of ids) {
    if (id !== imagePadId) {
      out.push(id)
      continue
    }
    const count = counts[image++]
    if (count === undefined) break
    for (let i = 0; i < count; i++) out.push(imagePadId)
  }
  const placeholders = ids.reduce((n, id) => n + (id === imagePadId ? 1 : 0), 0)
  return placeholders === counts.length
    ? Result.succeed(out)
    : Result.fail(
      `the chat template rendered ${placeholders} image placeholder(s) for ${counts.length} image(s); use the ` +
        `vision model's own chat template (--tokenizer), which renders one <|image_pad|> per image`
    )
}
