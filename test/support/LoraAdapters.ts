/**
 * LoRA adapter directories for tests (PEFT's layout, src/lora/AdapterFiles.ts): `adapter_config.json` and a weight
 * file whose bytes the test chooses (the embedded engine draws an adapter's model from them), under a temp dir removed
 * with the scope.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as TempDir from "./TempDir.ts"

/** Write the adapter directory `root/name` with `weights` as its weight file's bytes; returns its path. */
export const write = (root: string, name: string, weights: string): string => {
  const dir = Path.join(root, name)
  Fs.mkdirSync(dir)
  Fs.writeFileSync(Path.join(dir, "adapter_config.json"), JSON.stringify({ r: 8, lora_alpha: 32, peft_type: "LORA" }))
  Fs.writeFileSync(Path.join(dir, "adapter_model.safetensors"), weights)
  return dir
}

/** `count` adapters `v1` … `vN` (weights `weights 1` …) under a temp dir removed with the scope. */
export const versions = (
  count: number
): Effect.Effect<{ readonly root: string; readonly dirs: ReadonlyArray<string> }, never, Scope.Scope> =>
  Effect.map(TempDir.scoped("relax-lora-"), (root) => ({
    root,
    dirs: Array.from({ length: count }, (_, i) => write(root, `v${i + 1}`, `weights ${i + 1}`))
  }))
