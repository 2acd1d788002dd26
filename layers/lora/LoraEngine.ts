/**
 * The engine as LoRA publication sees it (docs/lora.md): every request names its Session's adapter, and a Session's
 * end releases its version.
 *
 * **Details**
 * Versioned, a Session binds the default version at its first engine attempt (its first model request) and every
 * attempt after it — resumed ones included — names that version (`lora_path`); each result reports it
 * (`loraVersion`), which the samples record per turn (`lora_versions`). In place, requests name the fixed adapter once
 * one is published; the version is the weight version. With LoRA off the engine is returned as it is.
 */
import { Context, Effect, Layer } from "effect"
import * as Engine from "../engine/Engine.ts"
import * as LoraVersions from "./LoraVersions.ts"

/** SGLang's refusal of a `lora_path` the worker never loaded (`TokenizerManager._validate_and_resolve_lora`). */
const neverLoaded = /never been loaded|not loaded/i

/** `engine` with its requests naming the Session's adapter from `versions`. */
export const wrap = (engine: Engine.EngineShape, versions: LoraVersions.LoraVersionsShape): Engine.EngineShape => {
  if (versions.mode === "off") return engine
  const versioned = versions.mode === "versioned"
  return {
    ...engine,
    generate: (request) =>
      Effect.flatMap(
        Effect.mapError(
          versions.adapterFor(request.sessionId ?? ""),
          (refused) =>
            new Engine.EngineError({
              reason: "lora",
              detail: `Session ${request.sessionId ?? "(none)"} has no LoRA version: ${refused.detail}`,
              code: refused.reason.replaceAll("-", "_"),
              cause: refused
            })
        ),
        (lora) => {
          if (lora === undefined) return engine.generate(request)
          // A worker that restarted lost its adapters: load them again, then send the attempt once more.
          const generated = engine.generate({ ...request, lora }).pipe(
            Effect.catchIf(
              (error) => error._tag === "EngineError" && error.status === 400 && neverLoaded.test(error.detail),
              () => Effect.andThen(versions.reload, engine.generate({ ...request, lora }))
            )
          )
          return versioned ? Effect.map(generated, (result) => ({ ...result, loraVersion: lora })) : generated
        }
      ),
    closeSession: (sessionId) => Effect.andThen(versions.release(sessionId), engine.closeSession(sessionId)),
    takeStepMetrics: Effect.zipWith(engine.takeStepMetrics, versions.takeStepMetrics, (a, b) => ({ ...a, ...b }))
  }
}

/**
 * The `Engine` over the one beneath it, binding through `versions` (a cluster member: the fleet's writer,
 * layers/cluster/LoraWriter.ts); provides that `LoraVersions` too.
 */
export const layerOver = <E, R>(
  versions: Layer.Layer<LoraVersions.LoraVersions, E, R>
): Layer.Layer<Engine.Engine | LoraVersions.LoraVersions, E, Engine.Engine | R> =>
  Layer.effectContext(Effect.gen(function*() {
    const engine = yield* Engine.Engine
    const bound = yield* LoraVersions.LoraVersions
    return Context.make(Engine.Engine, wrap(engine, bound)).pipe(Context.add(LoraVersions.LoraVersions, bound))
  })).pipe(Layer.provideMerge(versions))

/** The `Engine` over the one beneath it, with the `LoraVersions` service its requests bind through. */
export const layer = (
  options: LoraVersions.LoraVersionsOptions
): Layer.Layer<Engine.Engine | LoraVersions.LoraVersions, Engine.EngineError, Engine.Engine> =>
  Layer.effectContext(Effect.gen(function*() {
    const engine = yield* Engine.Engine
    const versions = yield* LoraVersions.make(engine, options)
    return Context.make(Engine.Engine, wrap(engine, versions)).pipe(Context.add(LoraVersions.LoraVersions, versions))
  }))
