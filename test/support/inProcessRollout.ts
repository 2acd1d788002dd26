/**
 * The simulation stack, built once for every whole-rollout simulation (test/sim/, test/bench/): the real Rollout,
 * GroupPool, Sessions, Forests, generation core on an engine of the test's choice, and Credit, with in-process agents
 * that call the generation core directly, under the TestClock.
 *
 * **Details**
 * The agents run inside the Supervisor's in-process executor and reach the generation services (`Sessions`,
 * `Generation`, `Forests`, `Tokenizer`, the engine) through the layer their factory is handed: the same instances the
 * gateway would use, built once for the rollout. {@link generationServices} and {@link rolloutOf} are the two halves
 * (a simulation that closes the rollout before it looks at the engine builds them in two scopes); {@link build} is
 * both; {@link runStep} runs one training step while the TestClock advances one second at a time (so each agent's turn
 * finishes before its next sleep is registered).
 */
import { Context, Effect, Fiber, Layer, Result } from "effect"
import type { Scope } from "effect"
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

/** What an in-process agent of the rollout may call. */
export type GenerationServices =
  | Sessions.Sessions
  | Generation.Generation
  | Forests.Forests
  | Tokenizer.Tokenizer
  | Engine.Engine

/** The engine a simulation generates with: built over the stack's Tokenizer. */
export type EngineLayer = Layer.Layer<Engine.Engine, never, Tokenizer.Tokenizer>

/** The embedded engine answering every request with `policy`, without latency. */
export const instantEngine = (policy: EmbeddedEngine.Policy): EngineLayer =>
  EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy })

/** Sessions, Forests, the Tokenizer, `engine` and the generation core with `settings`' options, built in the scope. */
export const generationServices = (
  settings: Settings.RolloutSettings,
  engine: EngineLayer
): Effect.Effect<Context.Context<GenerationServices>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const options = Generation.Generation.optionsOf(settings)
    if (Result.isFailure(options)) return yield* Effect.die(options.failure)
    const core = Layer.mergeAll(
      Sessions.Sessions.layer,
      Forests.Forests.layer,
      Tokenizer.Tokenizer.layer.pipe(Layer.orDie)
    )
    return yield* Layer.build(
      Generation.Generation.layer(options.success).pipe(Layer.provideMerge(engine), Layer.provideMerge(core))
    )
  })

/**
 * The Rollout of `settings` over `services`, its agents made by `agent` (given the services), built in the scope:
 * built before the clock moves, since loading the dataset is real I/O.
 */
export const rolloutOf = (
  settings: Settings.RolloutSettings,
  services: Context.Context<GenerationServices>,
  agent: (services: Layer.Layer<GenerationServices>) => Supervisor.InProcessAgent,
  sink: Telemetry.Sink
): Effect.Effect<Context.Context<Rollout.Rollout>, never, Scope.Scope> => {
  const provided = Layer.succeedContext(services)
  return Layer.build(
    Rollout.Rollout.layer.pipe(
      Layer.provide(Layer.mergeAll(
        RolloutConfig.RolloutConfig.layerSettings(settings),
        Supervisor.Supervisor.layerInProcess(agent(provided), { timeoutSeconds: settings.agentTimeout }),
        Credit.Credit.layer(creditOptions(settings)).pipe(Layer.orDie),
        GroupPool.GroupPool.layer.pipe(Layer.provide(Telemetry.Telemetry.layerSink(sink))),
        Telemetry.Telemetry.layerSink(sink),
        provided
      )),
      Layer.orDie
    )
  )
}

/** The whole stack in the scope: the Rollout (as a layer), the generation services and the telemetry sink. */
export const build = (
  settings: Settings.RolloutSettings,
  options: {
    readonly engine: EngineLayer
    readonly agent: (services: Layer.Layer<GenerationServices>) => Supervisor.InProcessAgent
  }
) =>
  Effect.gen(function*() {
    const sink = Telemetry.memorySink()
    const services = yield* generationServices(settings, options.engine)
    const rollout = yield* rolloutOf(settings, services, options.agent, sink)
    return {
      rollout: Layer.succeedContext(rollout),
      services,
      sessions: Context.get(services, Sessions.Sessions),
      sink
    }
  })

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
    const { rollout, sink } = yield* build(settings, { engine: instantEngine(options.policy), agent: options.agent })
    const fiber = yield* Effect.gen(function*() {
      return yield* (yield* Rollout.Rollout).runStep(0)
    }).pipe(Effect.provide(rollout), Effect.forkChild)
    for (let second = 0; second < options.maxSeconds && fiber.pollUnsafe() === undefined; second++) {
      yield* TestClock.adjust("1 second")
    }
    return { step: yield* Fiber.join(fiber), sink }
  })
