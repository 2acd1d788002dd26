/**
 * The `pixel_values` sidecar of a samples file (docs/outputs.md "pixel_values"): every distinct image array of the
 * file's samples, row after row, in one 2-D float32 `.npy` beside it (`rollout_3.jsonl` → `rollout_3.pixel_values.npy`),
 * and the samples with each array replaced by where it is: `{file, offset, shape, dtype}`.
 *
 * **Details**
 * One `.npy` per file, since every image of one model has the same row width (`channels * temporal_patch_size *
 * patch_size²`): a trainer memory-maps it with `numpy.load(path, mmap_mode="r")` or reads one image with
 * `numpy.fromfile(path, "<f4", rows * columns, offset=offset)`. An array the samples share (a Group's prompt image:
 * the same cached array) is written once. `offset` counts bytes from the start of the file, header included.
 */
import { createHash } from "node:crypto"
import * as Path from "node:path"
import type * as TrainingSample from "../forest/TrainingSample.ts"
import * as Npy from "../vision/Npy.ts"

/** The sidecar's name beside a samples file: `rollout_3.jsonl` → `rollout_3.pixel_values.npy`. */
export const fileFor = (samplesFile: string): string => `${samplesFile.replace(/\.jsonl$/, "")}.pixel_values.npy`

const isArray = (
  value: TrainingSample.PixelArray | TrainingSample.PixelFile
): value is TrainingSample.PixelArray => "data" in value

/** The samples as a file holds them, and the sidecar's bytes (chunks in order); no chunks when no sample has pixels. */
export interface Split {
  readonly samples: Array<TrainingSample.TrainingSample>
  readonly chunks: ReadonlyArray<Uint8Array>
}

/**
 * Split `samples` into file samples naming `file` and the sidecar's content. Fails (a message) when two arrays have
 * different row widths, which one model's processor never gives.
 */
export const split = (samples: ReadonlyArray<TrainingSample.TrainingSample>, file: string): Split | string => {
  const distinct = new Map<Float32Array, number>()
  let columns: number | undefined
  let rows = 0
  for (const sample of samples) {
    for (const values of sample.multimodal_train_inputs?.pixel_values ?? []) {
      if (!isArray(values) || distinct.has(values.data)) continue
      if (columns !== undefined && values.shape[1] !== columns) {
        return `pixel_values of ${columns} and ${values.shape[1]} columns in one file`
      }
      columns = values.shape[1]
      distinct.set(values.data, rows)
      rows += values.shape[0]
    }
  }
  if (columns === undefined) return { samples: [...samples], chunks: [] }
  const header = Npy.header([rows, columns])
  const rowBytes = columns * 4
  const reference = (values: TrainingSample.PixelArray): TrainingSample.PixelFile => ({
    file,
    offset: header.length + (distinct.get(values.data) ?? 0) * rowBytes,
    shape: values.shape,
    dtype: "float32"
  })
  return {
    samples: samples.map((sample) => {
      const train = sample.multimodal_train_inputs
      if (train?.pixel_values === undefined) return sample
      return {
        ...sample,
        multimodal_train_inputs: {
          ...train,
          pixel_values: train.pixel_values.map((values) => (isArray(values) ? reference(values) : values))
        }
      }
    }),
    chunks: [header, ...[...distinct.keys()].map(Npy.littleEndian)]
  }
}

/**
 * What a debug dump records of a sample's `pixel_values`, to check the sidecar against: per image its shape and the
 * SHA-256 of its little-endian float32 bytes (the bytes the sidecar holds at its offset).
 */
export const digests = (
  sample: TrainingSample.TrainingSample
): Array<{ readonly shape: readonly [number, number]; readonly sha256: string }> | undefined =>
  sample.multimodal_train_inputs?.pixel_values?.flatMap((values) =>
    isArray(values)
      ? [{ shape: values.shape, sha256: createHash("sha256").update(Npy.littleEndian(values.data)).digest("hex") }]
      : []
  )

/**
 * A sample read from a samples file in directory `from`, for a samples file written in `to` (`rescore`): its
 * `pixel_values` references point at the same sidecar, relative to `to`.
 */
export const relocate = (
  sample: TrainingSample.TrainingSample,
  from: string,
  to: string
): TrainingSample.TrainingSample => {
  const train = sample.multimodal_train_inputs
  if (train?.pixel_values === undefined || Path.resolve(from) === Path.resolve(to)) return sample
  return {
    ...sample,
    multimodal_train_inputs: {
      ...train,
      pixel_values: train.pixel_values.map((values) =>
        isArray(values) ? values : { ...values, file: Path.relative(to, Path.resolve(from, values.file)) }
      )
    }
  }
}
