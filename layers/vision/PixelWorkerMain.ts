/**
 * The pixel worker's thread (layers/vision/PixelWorker.ts starts it): answers `{ id, rgb, config }` with the image's
 * `pixel_values` (`{ id, grid, shape, data }`, the Float32Array's buffer transferred) or `{ id, error }`.
 */
import { Result } from "effect"
import { parentPort } from "node:worker_threads"
import type * as ImageProcessor from "../../src/vision/ImageProcessor.ts"
import type * as PillowResample from "../../src/vision/PillowResample.ts"
import * as PixelValues from "../../src/vision/PixelValues.ts"

interface Job {
  readonly id: number
  readonly rgb: PillowResample.Image8
  readonly config: ImageProcessor.ProcessorConfig
}

parentPort?.on("message", (job: Job) => {
  const computed = PixelValues.compute(job.rgb, job.config)
  if (Result.isFailure(computed)) {
    parentPort?.postMessage({ id: job.id, error: computed.failure })
    return
  }
  const { grid, shape, data } = computed.success
  parentPort?.postMessage({ id: job.id, grid, shape, data }, [data.buffer])
})
