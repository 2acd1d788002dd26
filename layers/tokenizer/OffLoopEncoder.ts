/**
 * The tokenizer's off-loop encoder (layers/tokenizer/Tokenizer.ts `encodeAsync`): long texts encoded on a worker
 * thread, so that a long tool result does not hold every other Session for its whole encode.
 *
 * **Details**
 * The worker loads the same `tokenizer.json` and `tokenizer_config.json` with the same library, so its ids are the
 * ones an in-place encode gives; it is started on first use and does not keep an idle process alive.
 */
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { Worker } from "node:worker_threads"
import * as FairScheduler from "../platform/FairScheduler.ts"

/**
 * The worker thread's nice value (19: the lowest priority). On Linux the nice value is per thread, and
 * `os.setPriority` inside the worker (pid 0: the calling thread) lowers only the worker's: the main thread serves
 * every other Session while one long text is encoded (~1 s of CPU for 1 MB, and ~0.6 s to load the tokenizer on first
 * use), so on a machine with fewer cores than runnable threads the encode gives way to it instead of taking its core
 * (docs/performance.md, section 3, "Issue 41, the 1 MB message"). Elsewhere (where it would apply to the whole process)
 * and where it fails, the worker keeps the process's priority.
 */
export const WORKER_NICE = 19

// The worker is plain CommonJS (no TypeScript loader needed wherever the service runs): it lowers its own priority
// first, loads the same files with the same library and answers `{ id, text }` with `{ id, ids }` (an Int32Array,
// transferred).
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads")
if (process.platform === "linux") {
  try { require("node:os").setPriority(workerData.nice) } catch {}
}
const { readFileSync } = require("node:fs")
const { join } = require("node:path")
const { Tokenizer } = require(workerData.library)
const read = (name) => JSON.parse(readFileSync(join(workerData.directory, name), "utf8"))
const hf = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"))
parentPort.on("message", ({ id, text }) => {
  const ids = Int32Array.from(hf.encode(text, { add_special_tokens: false }).ids)
  parentPort.postMessage({ id, ids }, [ids.buffer])
})
`

/**
 * An encoder on a worker thread for the tokenizer files in `directory`, started on first use; `undefined` when the
 * files are not there (the caller then encodes in place). A worker that fails is dropped and the pending texts are
 * encoded in place, so a result always comes back.
 *
 * **Details**
 * Each step the main thread takes for a long text is a task of the scheduler of its own: the hand-over leaves the
 * task that prepared the text (a 1 MB body's read, parse and render), starting the worker is one task and posting the
 * text (serializing it for the worker) the next, and the ids come back in {@link toArrayInSlices}' slices. Run in one
 * go they were ~25–30 ms of one task for a 1 MB message (docs/performance.md, section 3, "Issue 41, the 1 MB message").
 */
export const make = (
  directory: string,
  inPlace: (text: string) => ReadonlyArray<number>
): ((text: string) => Effect.Effect<ReadonlyArray<number>>) | undefined => {
  if (!existsSync(join(directory, "tokenizer.json"))) return undefined
  let worker: Worker | undefined
  let nextId = 0
  const pending = new Map<number, { readonly text: string; readonly resolve: (ids: ArrayLike<number>) => void }>()
  const failed = () => {
    worker = undefined
    for (const [id, job] of pending) {
      pending.delete(id)
      job.resolve(inPlace(job.text))
    }
  }
  const start = (): Worker => {
    const library = createRequire(import.meta.url).resolve("@huggingface/tokenizers")
    const started = new Worker(workerSource, { eval: true, workerData: { directory, library, nice: WORKER_NICE } })
    started.on("message", (message: { readonly id: number; readonly ids: Int32Array }) => {
      const job = pending.get(message.id)
      pending.delete(message.id)
      // An idle worker does not keep the process alive.
      if (pending.size === 0) started.unref()
      // As the worker sent them: the copy into an array is `toArrayInSlices`' work, in the scheduler's slices.
      job?.resolve(message.ids)
    })
    started.on("error", failed)
    started.on("exit", failed)
    return started
  }
  const post = (text: string) =>
    new Promise<ArrayLike<number>>((resolve) => {
      const id = nextId++
      pending.set(id, { text, resolve })
      worker ??= start()
      worker.ref()
      worker.postMessage({ id, text })
    })
  return (text) =>
    Effect.gen(function*() {
      yield* FairScheduler.continueAsTask
      if (worker === undefined) {
        worker = start()
        yield* FairScheduler.continueAsTask
      }
      return yield* toArrayInSlices(yield* Effect.promise(() => post(text)))
    })
}

/** Ids copied into the array per task of {@link toArrayInSlices} (a few milliseconds on a loaded 2-core machine). */
export const SLICE_IDS = 16_384

/**
 * The worker's ids as a plain array, copied {@link SLICE_IDS} at a time, each slice a task of the scheduler
 * (`FairScheduler.continueAsTask` before it).
 *
 * **Details**
 * A 1 MB text is ~250,000 ids; copying them in one go (`Array.from`) took 20–50 ms inside the worker's message
 * callback, and the request's fiber then went on there with its commit (docs/performance.md, section 3, "Issue 41,
 * third pass"). The first yield leaves that callback; an array (the in-place fallback's) is returned as it is.
 */
export const toArrayInSlices = (ids: ArrayLike<number>): Effect.Effect<ReadonlyArray<number>> =>
  Effect.gen(function*() {
    yield* FairScheduler.continueAsTask
    if (Array.isArray(ids)) return ids
    const out: Array<number> = []
    for (let start = 0; start < ids.length; start += SLICE_IDS) {
      if (start > 0) yield* FairScheduler.continueAsTask
      const end = Math.min(ids.length, start + SLICE_IDS)
      for (let i = start; i < end; i++) out.push(ids[i]!)
    }
    return out
  })
