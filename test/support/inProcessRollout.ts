/**
 * A training step of the real Rollout with in-process agents that call the real generation core (test/sim/): the
 * Rollout, GroupPool, Generation on the embedded engine with a scripted policy, and Credit, under the TestClock.
 *
 * **Details**
 * The agents run inside the Supervisor's in-process executor and reach the generation services (`Sessions`,
 * `Generation`, `Forests`, `Tokenizer`, the engine) through the layer {@link runStep} hands their factory: the same
 * instances the gateway would use, built once for the step. The step runs on a forked fiber while the TestClock
 * advances one second at a time (so each agent's turn finishes before its next sleep is registered).
 */
import { Effect, Fiber, Layer, Result } from "effect"
import { TestClock } from "effect/testing"
import * as Credit from "../../layers/credit/Credit.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as Rollout from "../../layers/rollout/Rollout.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as GroupPool from "../../layers/schedule/GroupPool.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import type * as Settings from "../../src/config/Settings.ts"
import { creditOptions } from "../../src/index.ts"

/** What an in-process agent of the step may call. */
export type GenerationServices =
  | Sessions.Sessions
  | Generation.Generation
  | Forests.Forests
  | Tokenizer.Tokenizer
  | Engine.Engine

/**
 * Run training step 0 of `settings` with agents made by `agent` (given the generation services) and the embedded
 * engine answering with `policy`; the TestClock advances at most `maxSeconds`. Returns the step and the log.
 */
export const runStep = (
  settings: Settings.RolloutSettings,
  options: {
    readonly policy: EmbeddedEngine.Policy
    readonly agent: (services: Layer.Layer<GenerationServices>) => Supervisor.InProcessAgent
    readonly maxSeconds: number
  }
) =>
  Effect.gen(function*() {
    const generationOptions = Generation.Generation.optionsOf(settings)
    if (Result.isFailure(generationOptions)) return yield* Effect.die(generationOptions.failure)
    const sink = Telemetry.memorySink()
    const core = Layer.mergeAll(
      Sessions.Sessions.layer,
      Forests.Forests.layer,
      Tokenizer.Tokenizer.layer.pipe(Layer.orDie)
    )
    const generation = Generation.Generation.layer(generationOptions.success).pipe(
      Layer.provideMerge(
        EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy: options.policy })
      ),
      Layer.provideMerge(core)
    )
    const services: Layer.Layer<GenerationServices> = Layer.succeedContext(yield* Layer.build(generation))
    const rollout = Rollout.Rollout.layer.pipe(
      Layer.provide(Layer.mergeAll(
        RolloutConfig.RolloutConfig.layerSettings(settings),
        Supervisor.Supervisor.layerInProcess(options.agent(services), { timeoutSeconds: settings.agentTimeout }),
        Credit.Credit.layer(creditOptions(settings)).pipe(Layer.orDie),
        GroupPool.GroupPool.layer.pipe(Layer.provide(Telemetry.Telemetry.layerSink(sink))),
        Telemetry.Telemetry.layerSink(sink),
        services
      )),
      Layer.orDie
    )
    const fiber = yield* Effect.gen(function*() {
      return yield* (yield* Rollout.Rollout).runStep(0)
    }).pipe(Effect.provide(rollout), Effect.forkChild)
    for (let second = 0; second < options.maxSeconds && fiber.pollUnsafe() === undefined; second++) {
      yield* TestClock.adjust("1 second")
    }
    return { step: yield* Fiber.join(fiber), sink }
  })
