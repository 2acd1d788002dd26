/**
 * The file operations behind the rollout's outputs: create a directory without looping, prove it writable, and write
 * a file atomically, while keeping the writes in flight visible to the shutdown.
 *
 * **Details**
 * Directories are created one level at a time from the deepest existing ancestor, never with Node's recursive `mkdir`,
 * which spins forever on a parent that answers `ENOENT` for new entries (`/proc/nope`). A file is written to
 * `<path>.tmp-<pid>` and renamed over `<path>`, so a reader never sees a half-written file; writes of one path within
 * this process are serialized, so that temporary name is never shared. A write is interruptible: the fiber stops
 * waiting and the operation is abandoned (its temporary file may stay behind; the target is whole or untouched), so a
 * file operation that never settles (a hung mount) cannot hold a shutdown. `inFlight` lists what is abandoned then.
 */
import { Effect } from "effect"
import { mkdir, rename, rm, stat, writeFile } from "node:fs/promises"
import { dirname, join, resolve } from "node:path"
import * as OutputPaths from "../../src/rollout/OutputPaths.ts"
import * as Thrown from "../../src/Thrown.ts"

/**
 * Create `directory` and its missing ancestors, one `mkdir` each; fails with the file-system error (`ENOTDIR` under a
 * file, `ENOENT` where new entries are refused, `EACCES`, ...). Bounded by the path's depth.
 */
export const ensureDirectory = async (directory: string): Promise<void> => {
  const missing: Array<string> = []
  let current = resolve(directory)
  for (;;) {
    try {
      const found = await stat(current)
      if (!found.isDirectory()) {
        throw Object.assign(new Error(`ENOTDIR: not a directory: ${current}`), { code: "ENOTDIR" })
      }
      break
    } catch (error) {
      if (Thrown.codeOf(error) !== "ENOENT") throw error
      missing.push(current)
      const parent = dirname(current)
      if (parent === current) break
      current = parent
    }
  }
  for (const path of missing.reverse()) {
    try {
      await mkdir(path)
    } catch (error) {
      if (Thrown.codeOf(error) !== "EEXIST" || !(await stat(path)).isDirectory()) throw error
    }
  }
}

/**
 * Create `target.directory` and write and remove a probe file in it, before anything runs; fails with
 * `OutputPathError` naming the flag, the path and the reason.
 */
export const probeDirectory = (target: OutputPaths.Target): Effect.Effect<void, OutputPaths.OutputPathError> =>
  Effect.gen(function*() {
    const failed = (reason: "create" | "write") => (error: unknown) =>
      new OutputPaths.OutputPathError({
        ...target,
        path: target.directory,
        reason,
        detail: OutputPaths.describeFsError(error)
      })
    yield* Effect.tryPromise({ try: () => ensureDirectory(target.directory), catch: failed("create") })
    const probe = join(target.directory, `.relax-agentic-probe-${process.pid}`)
    yield* Effect.tryPromise({
      try: async () => {
        await writeFile(probe, "probe\n", { flag: "wx" })
        await rm(probe, { force: true })
      },
      catch: failed("write")
    })
  })

/** Writes started and not settled, by target path (the shutdown names them when it abandons them). */
const pending = new Map<string, Promise<void>>()

/** The paths whose writes are in flight now. */
export const inFlight = (): ReadonlyArray<string> => [...pending.keys()]

/** What a file is written from: text (UTF-8), or binary chunks written one after the other. */
export type Content = string | ReadonlyArray<Uint8Array>

const writeNow = async (path: string, content: Content): Promise<void> => {
  const temp = `${path}.tmp-${process.pid}`
  await ensureDirectory(dirname(path))
  try {
    await writeFile(temp, content, typeof content === "string" ? "utf8" : {})
    await rename(temp, path)
  } catch (error) {
    await rm(temp, { force: true })
    throw error
  }
}

/**
 * Write `text` to `path` atomically (temporary file, then rename); the error is the file system's. Interruptible:
 * interrupting abandons the operation (see the module comment).
 */
export const writeFileAtomic = (path: string, text: Content): Effect.Effect<void, unknown> =>
  Effect.tryPromise({
    try: () => {
      const before = pending.get(path) ?? Promise.resolve()
      const write: Promise<void> = before.then(() => writeNow(path, text)).finally(() => {
        if (pending.get(path) === settled) pending.delete(path)
      })
      const settled = write.catch(() => undefined)
      pending.set(path, settled)
      return write
    },
    catch: (error) => error
  })
