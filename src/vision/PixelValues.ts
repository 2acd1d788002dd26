/**
 * One image's `pixel_values` as transformers' `Qwen2VLImageProcessor` (PIL backend) computes them: resized by
 * `smart_resize` with Pillow's filter, rescaled, normalised, repeated to `temporal_patch_size` frames and cut into
 * rows of one patch each, in the merge-block order the vision encoder reads.
 *
 * **Details**
 * The input is the decoded image as Pillow's `convert("RGB")` gives it (layers/platform/ImageCodec.ts). Arithmetic
 * follows the reference's dtypes: `rescale` multiplies in float64 and rounds to float32, `normalize` subtracts and
 * divides in float32, so each value is the one NumPy computes (a 256-entry table per channel holds them). The result
 * has `grid_t * grid_h * grid_w` rows of `channels * temporal_patch_size * patch_size²` values: row order
 * `(t, h / merge, w / merge, merge_h, merge_w)`, column order `(channel, frame, patch_y, patch_x)` — the reference's
 * reshape `(t, T, C, h/m, m, P, w/m, m, P)` transposed by `(0, 3, 6, 4, 7, 2, 1, 5, 8)`.
 */
import { Result } from "effect"
import * as ImageGrid from "../template/ImageGrid.ts"
import type * as ImageProcessor from "./ImageProcessor.ts"
import * as PillowResample from "./PillowResample.ts"

/** One image's processor output. */
export interface PixelValues {
  /** `image_grid_thw`. */
  readonly grid: ImageGrid.Grid
  /** `[rows, columns]` = `[grid_t * grid_h * grid_w, channels * temporal_patch_size * patch_size²]`. */
  readonly shape: readonly [number, number]
  /** Row after row, float32. */
  readonly data: Float32Array<ArrayBuffer>
}

/** Per channel, the float32 value each byte becomes after `rescale` and `normalize`. */
const valueTables = (config: ImageProcessor.ProcessorConfig): ReadonlyArray<Float32Array> =>
  [0, 1, 2].map((c) => {
    const table = new Float32Array(256)
    const mean = Math.fround(config.imageMean[c]!)
    const std = Math.fround(config.imageStd[c]!)
    for (let v = 0; v < 256; v++) {
      let x = config.doRescale ? Math.fround(v * config.rescaleFactor) : v
      if (config.doNormalize) x = Math.fround(Math.fround(x - mean) / std)
      table[v] = x
    }
    return table
  })

/** The size the processor gives an image of `width` x `height`; fails as the reference would. */
const targetSize = (
  image: PillowResample.Image8,
  config: ImageProcessor.ProcessorConfig
): Result.Result<{ readonly height: number; readonly width: number }, string> => {
  if (config.doResize) return ImageGrid.smartResize(image.height, image.width, config)
  const factor = config.patchSize * config.mergeSize
  return image.height % factor === 0 && image.width % factor === 0
    ? Result.succeed({ height: image.height, width: image.width })
    : Result.fail(
      `do_resize is false and the image (${image.width}x${image.height}) is not a multiple of ${factor} pixels`
    )
}

/** The `pixel_values` of one RGB image (3 interleaved channels, as `convert("RGB")` gives them). */
export const compute = (
  rgb: PillowResample.Image8,
  config: ImageProcessor.ProcessorConfig
): Result.Result<PixelValues, string> => {
  if (rgb.channels !== 3) return Result.fail(`expected an RGB image, got ${rgb.channels} channel(s)`)
  const size = targetSize(rgb, config)
  if (Result.isFailure(size)) return Result.fail(size.failure)
  const { height, width } = size.success
  const image = config.doResize ? PillowResample.resize(rgb, width, height, config.resample) : rgb
  const tables = valueTables(config)
  const patch = config.patchSize
  const merge = config.mergeSize
  const frames = config.temporalPatchSize
  const gridH = height / patch
  const gridW = width / patch
  const columns = 3 * frames * patch * patch
  const rows = gridH * gridW
  const data = new Float32Array(rows * columns)
  const pixels = image.data
  let o = 0
  for (let bh = 0; bh < gridH / merge; bh++) {
    for (let bw = 0; bw < gridW / merge; bw++) {
      for (let mh = 0; mh < merge; mh++) {
        for (let mw = 0; mw < merge; mw++) {
          const y0 = (bh * merge + mh) * patch
          const x0 = (bw * merge + mw) * patch
          for (let c = 0; c < 3; c++) {
            const table = tables[c]!
            // One image is one frame, repeated to fill the temporal patch.
            for (let t = 0; t < frames; t++) {
              for (let py = 0; py < patch; py++) {
                const rowStart = ((y0 + py) * width + x0) * 3 + c
                for (let px = 0; px < patch; px++) data[o++] = table[pixels[rowStart + px * 3]!]!
              }
            }
          }
        }
      }
    }
  }
  return Result.succeed({ grid: [1, gridH, gridW], shape: [rows, columns], data })
}
