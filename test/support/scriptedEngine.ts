/**
 * An `Engine` whose every generation is what a test scripts for it, recording the requests; no abort, fixed weight
 * version `v0`. And {@link wrapGenerate}: the engine below with every generation seen or disturbed by a test;
 * {@link inertControls}: the rest of a scripted engine, for a test's own `generate`.
 */
import { Effect, Layer } from "effect"
import * as Engine from "../../layers/engine/Engine.ts"

/** What the engine answers to the n-th request (0-based) of `calls`. */
export type Script = (
  request: Engine.GenerateRequest,
  call: number
) => Omit<Engine.GenerateResult, "promptTokens" | "cachedTokens">

/** An engine's operations besides `generate`, doing nothing: weight version `v0`, `v1` after an update. */
export const inertControls = {
  abort: () => Effect.void,
  weightVersion: Effect.succeed("v0"),
  updateWeights: () => Effect.succeed("v1"),
  pauseGeneration: () => Effect.void,
  resumeGeneration: () => Effect.succeed("v1"),
  health: Effect.void,
  closeSession: () => Effect.void,
  takeStepMetrics: Effect.succeed({})
} satisfies Omit<Engine.EngineShape, "generate">

export const scriptedEngine = (calls: Array<Engine.GenerateRequest>, script: Script) =>
  Layer.succeed(
    Engine.Engine,
    Engine.Engine.of({
      ...inertControls,
      generate: (request) =>
        Effect.sync(() => {
          calls.push(request)
          return { ...script(request, calls.length - 1), promptTokens: request.inputIds.length, cachedTokens: 0 }
        })
    })
  )

/** The engine provided below this layer, its `generate` replaced by `wrap` of it (the rest as it is). */
export const wrapGenerate = (wrap: (generate: Engine.EngineShape["generate"]) => Engine.EngineShape["generate"]) =>
  Layer.effect(
    Engine.Engine,
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      return Engine.Engine.of({ ...engine, generate: wrap(engine.generate) })
    })
  )
