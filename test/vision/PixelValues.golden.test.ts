/**
 * Golden pixel_values: the reference processor's algorithm (transformers' Qwen2VLImageProcessor, PIL backend) run with
 * Pillow and NumPy by test/fixtures/vision/pixel_values_golden.py, whose output (six images — odd sizes, tiny, a
 * panorama, RGBA, grey, one the max_pixels bound scales down — for Qwen2-VL, Qwen2.5-VL and Qwen3-VL configs) is
 * committed under test/fixtures/vision/pixels/. To re-run it (Debian's Pillow and NumPy):
 *
 *     apt-get install -y python3-pil python3-numpy
 *     /usr/bin/python3 test/fixtures/vision/pixel_values_golden.py
 *
 * The images are decoded here as the rollout decodes them (sharp, as Pillow's `convert("RGB")`), so the test covers
 * decoding, Pillow's resample, rescale/normalize and the patch layout together. The largest difference seen: 0 (every
 * value equal). Each of Pillow's six filters is also checked byte for byte on a downscale and an upscale.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import * as ImageCodec from "../../layers/platform/ImageCodec.ts"
import * as ImageGrid from "../../src/template/ImageGrid.ts"
import * as ImageProcessor from "../../src/vision/ImageProcessor.ts"
import * as Npy from "../../src/vision/Npy.ts"
import * as PillowResample from "../../src/vision/PillowResample.ts"
import * as PixelValues from "../../src/vision/PixelValues.ts"

const dir = Path.join(import.meta.dirname, "..", "fixtures", "vision", "pixels")

interface Manifest {
  readonly processors: Record<string, Record<string, unknown>>
  readonly images: ReadonlyArray<{ readonly name: string; readonly file: string; readonly mode: string }>
  readonly resized: ReadonlyArray<
    { readonly image: string; readonly size: [number, number]; readonly resample: number; readonly file: string }
  >
  readonly expected: Record<
    string,
    Record<string, { readonly file: string; readonly grid_thw: ImageGrid.Grid; readonly shape: [number, number] }>
  >
}

const manifest = JSON.parse(Fs.readFileSync(Path.join(dir, "manifest.json"), "utf8")) as Manifest

const processorOf = (json: Record<string, unknown>): ImageProcessor.ProcessorConfig =>
  Result.getOrThrow(ImageProcessor.fromJson(json, Result.getOrThrow(ImageGrid.configFrom(json)), "fixture"))

const expected = (file: string) => {
  const read = Npy.read(Zlib.gunzipSync(Fs.readFileSync(Path.join(dir, file))))
  if (typeof read === "string") throw new Error(`${file}: ${read}`)
  return read
}

const maxDifference = (a: Float32Array, b: Float32Array): number => {
  let max = 0
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!))
  return max
}

const decode = (name: string) =>
  ImageCodec.decodeRgb(Path.join(dir, manifest.images.find((i) => i.name === name)!.file)).pipe(
    Effect.orDie
  )

describe("pixel_values against the reference processor (Pillow + NumPy fixtures)", () => {
  it("covers at least six images for each of the three processors", () => {
    assert.deepStrictEqual(Object.keys(manifest.expected), ["qwen2-vl", "qwen2.5-vl", "qwen3-vl"])
    for (const images of Object.values(manifest.expected)) assert.isAtLeast(Object.keys(images).length, 6)
    assert.sameMembers(manifest.images.map((i) => i.mode), ["RGB", "RGB", "RGB", "RGBA", "L", "RGB"])
  })

  for (const [processor, json] of Object.entries(manifest.processors)) {
    it.effect(`${processor}: equals the fixtures within 1e-6 for every image`, () =>
      Effect.gen(function*() {
        const config = processorOf(json)
        let worst = 0
        for (const [name, want] of Object.entries(manifest.expected[processor]!)) {
          const rgb = yield* decode(name)
          const got = Result.getOrThrow(PixelValues.compute(rgb, config))
          const fixture = expected(want.file)
          assert.deepStrictEqual(got.grid, want.grid_thw, `${processor} ${name} grid`)
          assert.deepStrictEqual(got.shape, fixture.shape, `${processor} ${name} shape`)
          // One row per patch: the grid's product.
          assert.strictEqual(got.shape[0], want.grid_thw[0] * want.grid_thw[1] * want.grid_thw[2])
          const difference = maxDifference(got.data, fixture.data)
          assert.isAtMost(difference, 1e-6, `${processor} ${name}: max difference ${difference}`)
          worst = Math.max(worst, difference)
        }
        assert.isAtMost(worst, 1e-6)
      }))
  }

  it.effect("Pillow's six filters, downscaling and upscaling, give Pillow's bytes", () =>
    Effect.gen(function*() {
      for (const r of manifest.resized) {
        const source = yield* decode(r.image)
        const want = yield* ImageCodec.decodeRgb(Path.join(dir, r.file)).pipe(Effect.orDie)
        assert.isTrue(PillowResample.isResample(r.resample))
        const got = PillowResample.resize(source, r.size[0], r.size[1], r.resample as PillowResample.Resample)
        assert.deepStrictEqual([got.width, got.height], [want.width, want.height])
        let differing = 0
        for (let i = 0; i < got.data.length; i++) if (got.data[i] !== want.data[i]) differing++
        assert.strictEqual(differing, 0, `${r.file}: ${differing} bytes differ`)
      }
    }))

  it.effect("another resampling filter or another patch order does not match", () =>
    Effect.gen(function*() {
      const json = manifest.processors["qwen2-vl"]!
      const want = manifest.expected["qwen2-vl"]!["large-100x70"]!
      const fixture = expected(want.file)
      const rgb = yield* decode("large-100x70")
      for (const resample of [PillowResample.Resample.bilinear, PillowResample.Resample.lanczos]) {
        const other = Result.getOrThrow(PixelValues.compute(rgb, processorOf({ ...json, resample })))
        assert.isAbove(maxDifference(other.data, fixture.data), 1e-3, `resample ${resample}`)
      }
      // The same values in row-major patch order (no merge blocks) are not the reference's layout.
      const values = Result.getOrThrow(PixelValues.compute(rgb, processorOf(json)))
      const merge = 2
      const [, gridH, gridW] = values.grid
      const columns = values.shape[1]
      const rowMajor = new Float32Array(values.data.length)
      let row = 0
      for (let bh = 0; bh < gridH / merge; bh++) {
        for (let bw = 0; bw < gridW / merge; bw++) {
          for (let mh = 0; mh < merge; mh++) {
            for (let mw = 0; mw < merge; mw++) {
              const y = bh * merge + mh
              const x = bw * merge + mw
              rowMajor.set(values.data.subarray(row * columns, (row + 1) * columns), (y * gridW + x) * columns)
              row++
            }
          }
        }
      }
      assert.isAbove(maxDifference(rowMajor, fixture.data), 1e-3)
    }))
})
