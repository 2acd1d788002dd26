/**
 * `pixel_values` computed on a worker thread (layers/vision/PixelWorkerMain.ts), so that resizing and patching a large
 * image does not hold every other Session for its whole computation — the pattern of the tokenizer's off-loop encoder
 * (layers/tokenizer/OffLoopEncoder.ts).
 *
 * **Details**
 * The worker starts on first use and does not keep an idle process alive. It runs the TypeScript sources by Node's
 * type stripping; where that is not available (the package installed under node_modules) or the worker fails, the
 * pending images are computed in place, so a result always comes back.
 */
import { Result } from "effect"
import { Worker } from "node:worker_threads"
import type * as ImageProcessor from "../../src/vision/ImageProcessor.ts"
import type * as PillowResample from "../../src/vision/PillowResample.ts"
import * as PixelValues from "../../src/vision/PixelValues.ts"

type Answer = Result.Result<PixelValues.PixelValues, string>

interface Reply {
  readonly id: number
  readonly error?: string
  readonly grid?: PixelValues.PixelValues["grid"]
  readonly shape?: PixelValues.PixelValues["shape"]
  readonly data?: Float32Array<ArrayBuffer>
}

interface Pending {
  readonly rgb: PillowResample.Image8
  readonly config: ImageProcessor.ProcessorConfig
  readonly resolve: (answer: Answer) => void
}

const answerOf = (reply: Reply): Answer =>
  reply.error !== undefined || reply.grid === undefined || reply.shape === undefined || reply.data === undefined
    ? Result.fail(reply.error ?? "the pixel worker answered without values")
    : Result.succeed({ grid: reply.grid, shape: reply.shape, data: reply.data })

/** A computation of one RGB image's `pixel_values` off the event loop (in place when no worker can run). */
export const make = (): (
  rgb: PillowResample.Image8,
  config: ImageProcessor.ProcessorConfig
) => Promise<Answer> => {
  let worker: Worker | undefined
  let broken = false
  let nextId = 0
  const pending = new Map<number, Pending>()
  const failed = () => {
    worker = undefined
    broken = true
    for (const [id, job] of pending) {
      pending.delete(id)
      job.resolve(PixelValues.compute(job.rgb, job.config))
    }
  }
  const start = (): Worker => {
    const started = new Worker(new URL("./PixelWorkerMain.ts", import.meta.url))
    started.on("message", (reply: Reply) => {
      const job = pending.get(reply.id)
      pending.delete(reply.id)
      if (pending.size === 0) started.unref()
      job?.resolve(answerOf(reply))
    })
    started.on("error", failed)
    started.on("exit", failed)
    return started
  }
  return (rgb, config) => {
    if (broken) return Promise.resolve(PixelValues.compute(rgb, config))
    return new Promise((resolve) => {
      const id = nextId++
      pending.set(id, { rgb, config, resolve })
      try {
        worker ??= start()
      } catch {
        failed()
        return
      }
      worker.ref()
      // The image is copied to the worker (the caller may keep it); the result's buffer is transferred back.
      worker.postMessage({ id, rgb, config })
    })
  }
}
