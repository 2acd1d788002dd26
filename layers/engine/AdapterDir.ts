/**
 * Reading a LoRA adapter directory (src/lora/AdapterFiles.ts says what one is): its files and digest, or an
 * {@link AdapterFiles.AdapterPathError} naming the path. The publisher reads it before any worker is touched; the embedded
 * engine reads its weights to draw the adapter's model.
 */
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as AdapterFiles from "../../src/lora/AdapterFiles.ts"
import * as Thrown from "../../src/Thrown.ts"

/** An adapter directory read whole. */
export interface AdapterDir {
  /** The absolute path. */
  readonly path: string
  readonly files: ReadonlyArray<AdapterFiles.AdapterFile>
  readonly digest: string
  /** The bytes of its weight file (`adapter_model.safetensors`, else `adapter_model.bin`). */
  readonly weights: Uint8Array
}

const failure = (path: string, reason: AdapterFiles.AdapterPathError["reason"], what: string) =>
  new AdapterFiles.AdapterPathError({
    reason,
    path,
    detail: `LoRA adapter path ${path}: ${what}; give the directory the trainer saved the adapter to (PEFT's ` +
      `save_pretrained: ${AdapterFiles.configFile} and ${AdapterFiles.weightFiles.join(" or ")})`
  })

/** Read the adapter directory at `path` (relative to the working directory). */
export const read = (path: string): Effect.Effect<AdapterDir, AdapterFiles.AdapterPathError> =>
  Effect.gen(function*() {
    const absolute = Path.resolve(path)
    const stat = yield* Effect.tryPromise({
      try: () => Fs.stat(absolute),
      catch: (error) =>
        Thrown.codeOf(error) === "ENOENT"
          ? failure(absolute, "missing", "does not exist")
          : failure(absolute, "unreadable", `cannot be read (${Thrown.messageOf(error)})`)
    })
    if (!stat.isDirectory()) return yield* failure(absolute, "not-a-directory", "is a file, not a directory")
    const entries = yield* Effect.tryPromise({
      try: () => Fs.readdir(absolute, { withFileTypes: true }),
      catch: (error) => failure(absolute, "unreadable", `cannot be listed (${Thrown.messageOf(error)})`)
    })
    const names = entries.filter((e) => e.isFile()).map((e) => e.name)
    const missing = AdapterFiles.missingFiles(names)
    if (missing !== undefined) return yield* failure(absolute, "not-an-adapter", `has no ${missing}`)
    const files = yield* Effect.forEach(names, (name) =>
      Effect.tryPromise({
        try: async (): Promise<AdapterFiles.AdapterFile> => ({
          name,
          bytes: await Fs.readFile(Path.join(absolute, name))
        }),
        catch: (error) => failure(absolute, "unreadable", `${name} cannot be read (${Thrown.messageOf(error)})`)
      }))
    const weightName = AdapterFiles.weightFiles.find((w) => names.includes(w))
    const weights = files.find((f) => f.name === weightName)?.bytes ?? new Uint8Array()
    return { path: absolute, files, digest: AdapterFiles.digestOf(files), weights }
  })
