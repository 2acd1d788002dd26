/**
 * LoRA adapters on the embedded engine (docs/lora.md "Embedded engine"): an adapter is real here too — its weight
 * file's bytes draw another seeded model (src/lora/AdapterFiles.ts `embeddedSeed`), so a request naming it samples other
 * tokens than the base model, and a test can tell from the tokens which version generated them.
 *
 * **Details**
 * The engine is its one worker, `embedded`. As on SGLang: loading a name already loaded is refused (HTTP 400), a
 * request naming an adapter never loaded is refused (400 "Got LoRA adapter that has never been loaded"), and an
 * unload of a name not held succeeds. A generation computes its whole output when it starts, so an unload never
 * changes a generation already running.
 */
import { Effect } from "effect"
import type * as BigramModel from "../../src/engine/BigramModel.ts"
import * as AdapterFiles from "../../src/lora/AdapterFiles.ts"
import * as AdapterDir from "./AdapterDir.ts"
import * as Engine from "./Engine.ts"

/** The embedded engine's one worker. */
export const worker = "embedded"

export interface EmbeddedAdapters {
  readonly port: Engine.AdapterPort
  /** The model of the loaded adapter `name`; undefined when none is loaded under it. */
  readonly model: (name: string) => BigramModel.Model | undefined
  /** The names loaded now. */
  readonly names: () => ReadonlyArray<string>
}

const refused = (detail: string) =>
  new Engine.EngineError({ reason: "invalid-request", detail, status: 400, url: worker })

/** The adapters of an engine whose model for a seed is `modelOf`. */
export const make = (engineSeed: number, modelOf: (seed: number) => BigramModel.Model): EmbeddedAdapters => {
  const loaded = new Map<string, BigramModel.Model>()
  const unknownWorker = (name: string) =>
    Effect.fail(refused(`the embedded engine has one worker, ${JSON.stringify(worker)}, not ${JSON.stringify(name)}`))
  return {
    model: (name) => loaded.get(name),
    names: () => [...loaded.keys()],
    port: {
      workers: Effect.succeed([worker]),
      load: (at, adapter) =>
        at !== worker ? unknownWorker(at) : Effect.gen(function*() {
          if (loaded.has(adapter.name)) {
            return yield* refused(`The LoRA adapter ${adapter.name} is already loaded`)
          }
          const dir = yield* AdapterDir.read(adapter.path).pipe(Effect.mapError((error) => refused(error.detail)))
          loaded.set(adapter.name, modelOf(AdapterFiles.embeddedSeed(engineSeed, dir.weights)))
        }),
      unload: (at, name) =>
        at !== worker ? unknownWorker(at) : Effect.sync(() => {
          loaded.delete(name)
        })
    }
  }
}

/** The refusal of a request naming an adapter that is not loaded, in SGLang's words. */
export const notLoaded = (name: string, loadedNames: ReadonlyArray<string>): Engine.EngineError =>
  refused(`Got LoRA adapter that has never been loaded: ${name}\nAll loaded adapters: ${loadedNames.join(", ")}.`)
