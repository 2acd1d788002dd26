/**
 * An `Engine` whose every generation is what a test scripts for it, recording the requests; no abort, fixed weight
 * version `v0`.
 */
import { Effect, Layer } from "effect"
import * as Engine from "../../layers/engine/Engine.ts"

/** What the engine answers to the n-th request (0-based) of `calls`. */
export type Script = (
  request: Engine.GenerateRequest,
  call: number
) => Omit<Engine.GenerateResult, "promptTokens" | "cachedTokens">

export const scriptedEngine = (calls: Array<Engine.GenerateRequest>, script: Script) =>
  Layer.succeed(
    Engine.Engine,
    Engine.Engine.of({
      generate: (request) =>
        Effect.sync(() => {
          calls.push(request)
          return { ...script(request, calls.length - 1), promptTokens: request.inputIds.length, cachedTokens: 0 }
        }),
      abort: () => Effect.void,
      weightVersion: Effect.succeed("v0"),
      updateWeights: () => Effect.succeed("v1"),
      pauseGeneration: () => Effect.void,
      resumeGeneration: () => Effect.succeed("v1"),
      health: Effect.void,
      closeSession: () => Effect.void,
      takeStepMetrics: Effect.succeed({})
    })
  )
