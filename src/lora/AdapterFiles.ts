/**
 * What an adapter directory is (PEFT's layout, what SGLang's `/load_lora_adapter` reads), its digest, and the seed the
 * embedded engine's adapter model is drawn from.
 *
 * **Details**
 * An adapter directory holds `adapter_config.json` and its weights, `adapter_model.safetensors` (or the older
 * `adapter_model.bin`). The digest is SHA-256 over every top-level file, in name order: each name, then the SHA-256
 * of its bytes, so the same content published twice has one digest (the registry's idempotence) wherever it lies.
 */
import { Data } from "effect"
import { createHash } from "node:crypto"
import * as CounterHash from "../engine/CounterHash.ts"

/** A path given as an adapter that is none: `reason` says why, `detail` names the path and what to give instead. */
export class AdapterPathError extends Data.TaggedError("AdapterPathError")<{
  readonly reason: "missing" | "not-a-directory" | "not-an-adapter" | "unreadable"
  readonly path: string
  readonly detail: string
}> {
  override get message(): string {
    return this.detail
  }
}

/** PEFT's config file: its presence makes a directory an adapter. */
export const configFile = "adapter_config.json"

/** The weight files an adapter has one of, in the order they are looked for. */
export const weightFiles: ReadonlyArray<string> = ["adapter_model.safetensors", "adapter_model.bin"]

/** One file of an adapter directory. */
export interface AdapterFile {
  readonly name: string
  readonly bytes: Uint8Array
}

/** What a directory with these file names lacks to be an adapter; undefined when it is one. */
export const missingFiles = (names: ReadonlyArray<string>): string | undefined => {
  const present = new Set(names)
  if (!present.has(configFile)) return configFile
  return weightFiles.some((file) => present.has(file)) ? undefined : weightFiles.join(" or ")
}

/** The adapter's digest: 64 hex digits (see the module comment). */
export const digestOf = (files: ReadonlyArray<AdapterFile>): string => {
  const hash = createHash("sha256")
  for (const file of [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    hash.update(file.name)
    hash.update("\0")
    hash.update(createHash("sha256").update(file.bytes).digest("hex"))
    hash.update("\n")
  }
  return hash.digest("hex")
}

/**
 * The embedded engine's seed for an adapter: the engine seed mixed with the adapter's weight file (its first 4 bytes
 * of SHA-256), so two adapters with different weights sample differently and the same weights the same way.
 */
export const embeddedSeed = (engineSeed: number, weights: Uint8Array): number =>
  CounterHash.hash32(engineSeed, 0x4c6f5241, createHash("sha256").update(weights).digest().readUInt32LE(0))
