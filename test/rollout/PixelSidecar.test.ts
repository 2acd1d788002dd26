import { assert, describe, it } from "@effect/vitest"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as PixelSidecar from "../../src/rollout/PixelSidecar.ts"
import * as Npy from "../../src/vision/Npy.ts"

const array = (rows: number, columns: number, start: number): TrainingSample.PixelArray => ({
  dtype: "float32",
  shape: [rows, columns],
  data: Float32Array.from({ length: rows * columns }, (_, i) => start + i / 8)
})

const sample = (pixels: ReadonlyArray<TrainingSample.PixelArray>) =>
  ({
    index: 0,
    multimodal_train_inputs: { image_grid_thw: pixels.map(() => [1, 1, 1] as const), pixel_values: pixels }
  }) as unknown as TrainingSample.TrainingSample

describe("the pixel_values sidecar", () => {
  it("writes each distinct array once and names its rows by byte offset and shape", () => {
    const shared = array(2, 3, 100)
    const [a, b] = [array(1, 3, 0), array(4, 3, 50)]
    const split = PixelSidecar.split([sample([shared, a]), sample([shared, b])], "rollout_0.pixel_values.npy")
    assert.notStrictEqual(typeof split, "string")
    if (typeof split === "string") return
    const bytes = Buffer.concat(split.chunks)
    const whole = Npy.read(bytes)
    assert.notStrictEqual(typeof whole, "string")
    assert.deepStrictEqual(typeof whole === "string" ? [] : whole.shape, [7, 3])
    const refs = split.samples.flatMap((s) => s.multimodal_train_inputs?.pixel_values ?? [])
    const originals = [shared, a, shared, b]
    assert.strictEqual(new Set(refs.map((r) => ("offset" in r ? r.offset : -1))).size, 3)
    for (const [i, ref] of refs.entries()) {
      assert.isTrue("file" in ref && ref.file === "rollout_0.pixel_values.npy" && ref.dtype === "float32")
      if (!("offset" in ref)) continue
      const original = originals[i]!
      assert.deepStrictEqual(ref.shape, original.shape)
      const rows = bytes.subarray(ref.offset, ref.offset + original.data.byteLength)
      assert.deepStrictEqual(Npy.fromLittleEndian(rows), original.data)
      assert.strictEqual(PixelSidecar.digests(sample([original]))?.[0]?.shape, original.shape)
    }
    assert.strictEqual(PixelSidecar.fileFor("/run/eval_2_test.jsonl"), "/run/eval_2_test.pixel_values.npy")
  })

  it("re-points a file sample's references for a samples file written elsewhere (rescore)", () => {
    const ref: TrainingSample.PixelFile = {
      file: "rollout_0.pixel_values.npy",
      offset: 128,
      shape: [4, 3],
      dtype: "float32"
    }
    const moved = PixelSidecar.relocate(
      {
        multimodal_train_inputs: { image_grid_thw: [[1, 2, 2]], pixel_values: [ref] }
      } as unknown as TrainingSample.TrainingSample,
      "/runs/a",
      "/runs/a/rescored"
    )
    assert.deepStrictEqual(moved.multimodal_train_inputs?.pixel_values, [{
      ...ref,
      file: "../rollout_0.pixel_values.npy"
    }])
  })

  it("leaves samples without arrays alone and writes nothing", () => {
    const split = PixelSidecar.split([sample([])], "x.npy")
    assert.deepStrictEqual(typeof split === "string" ? split : split.chunks, [])
  })
})
