/**
 * The cost of `pixel_values` (docs/outputs.md "pixel_values"), beside sharp's own resize of the same image to the same
 * size: per image size, milliseconds per source megapixel of Pillow's bicubic resize as src/vision/PillowResample.ts
 * computes it, of the whole `pixel_values` (resize, rescale, normalize, patches), of sharp's resize (libvips, cubic,
 * to raw RGB: not Pillow's arithmetic, so not what the model was trained on), and of decoding the PNG; then the bytes
 * written per image (the float32 rows in the sidecar) beside the PNG and the resized RGB bytes. Rounds alternate
 * between the candidates; the median round is printed. Qwen2.5-VL's processor constants.
 */
import { Result } from "effect"
import sharp from "sharp"
import * as ImageGrid from "../../src/template/ImageGrid.ts"
import * as ImageProcessor from "../../src/vision/ImageProcessor.ts"
import * as PillowResample from "../../src/vision/PillowResample.ts"
import * as PixelValues from "../../src/vision/PixelValues.ts"
import * as SeededRandom from "../support/SeededRandom.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"
import * as Harness from "./harness.ts"

const json = VisionTokenizer.qwen25VlPreprocessorConfig
const config = Result.getOrThrow(ImageProcessor.fromJson(json, Result.getOrThrow(ImageGrid.configFrom(json)), "bench"))

/** A noisy gradient of `width` x `height` as a PNG (every pixel differs, as in a photo). */
const png = (width: number, height: number): Promise<Buffer> => {
  const noise = SeededRandom.ints(40)
  const data = Buffer.alloc(width * height * 3)
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < 3; c++) {
        const base = c === 0 ? x / width : c === 1 ? y / height : 0.5
        data[(y * width + x) * 3 + c] = Math.min(255, Math.round(base * 200) + noise(56))
      }
    }
  }
  return sharp(data, { raw: { width, height, channels: 3 } }).png().toBuffer()
}

const timeAsync = async (run: () => Promise<unknown>): Promise<number> => {
  const start = performance.now()
  Harness.consume(await run())
  return performance.now() - start
}

const timeSync = (run: () => unknown): number => {
  const start = performance.now()
  Harness.consume(run())
  return performance.now() - start
}

export const bench: Harness.Bench = {
  name: "vision",
  run: async ({ full }) => {
    const sizes: ReadonlyArray<readonly [number, number]> = full
      ? [[640, 480], [1280, 960], [2000, 1500], [4000, 3000]]
      : [[640, 480], [1280, 960]]
    const rounds = full ? 7 : 3
    const rows: Array<Record<string, string>> = []
    for (const [width, height] of sizes) {
      const file = await png(width, height)
      const decoded = await sharp(file).raw().toBuffer({ resolveWithObject: true })
      const rgb: PillowResample.Image8 = { width, height, channels: 3, data: new Uint8Array(decoded.data) }
      const target = Result.getOrThrow(ImageGrid.smartResize(height, width, config))
      const samples = {
        decode: [] as Array<number>,
        pillow: [] as Array<number>,
        pixels: [] as Array<number>,
        sharp: [] as Array<number>
      }
      let bytes = 0
      for (let round = 0; round <= rounds; round++) {
        const decode = await timeAsync(() => sharp(file).raw().toBuffer())
        const pillow = timeSync(() =>
          PillowResample.resize(rgb, target.width, target.height, PillowResample.Resample.bicubic)
        )
        let values: PixelValues.PixelValues | undefined
        const pixels = timeSync(() => (values = Result.getOrThrow(PixelValues.compute(rgb, config))))
        const viaSharp = await timeAsync(() =>
          sharp(file).resize(target.width, target.height, { fit: "fill", kernel: "cubic" }).raw().toBuffer()
        )
        bytes = values?.data.byteLength ?? 0
        // The first round warms up.
        if (round === 0) continue
        samples.decode.push(decode)
        samples.pillow.push(pillow)
        samples.pixels.push(pixels)
        samples.sharp.push(viaSharp)
      }
      const megapixels = (width * height) / 1e6
      const perMp = (values: ReadonlyArray<number>) => `${(Harness.median(values) / megapixels).toFixed(1)} ms/MP`
      rows.push({
        image: `${width}x${height} → ${target.width}x${target.height}`,
        "Pillow bicubic (ours)": perMp(samples.pillow),
        "pixel_values (ours)": perMp(samples.pixels),
        "sharp resize": perMp(samples.sharp),
        "ours / sharp": Harness.formatRatio(Harness.median(samples.pillow) / Harness.median(samples.sharp)),
        "PNG decode": perMp(samples.decode),
        "bytes written": `${(bytes / 1e6).toFixed(2)} MB`,
        "PNG / resized RGB": `${(file.length / 1e6).toFixed(2)} / ${
          ((target.width * target.height * 3) / 1e6).toFixed(2)
        } MB`
      })
    }
    return {
      title: "pixel_values cost per source megapixel, beside sharp's resize (Qwen2.5-VL constants)",
      rows,
      notes: [
        "ours: one thread (the rollout runs it on a worker thread); sharp: libvips on its own thread pool, not Pillow's arithmetic",
        "bytes written: the image's float32 pixel_values rows in the .npy sidecar (once per distinct image per file)"
      ]
    }
  }
}
