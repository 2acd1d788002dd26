/**
 * A rollout process's services composed from resolved settings (the composition root under `src/index.ts`, the
 * command and a cluster runner): tokenizer, engine, Sessions, Forests, generation core, gateway, supervisor, credit,
 * the Group pool, telemetry, and the `Rollout` on top.
 */
import { Effect, Layer } from "effect"
import type { HttpServerError } from "effect/http"
import * as Path from "node:path"
import * as Settings from "../../src/config/Settings.ts"
import type * as CreditOptions from "../../src/credit/CreditOptions.ts"
import type * as HookSpec from "../../src/hooks/HookSpec.ts"
import * as LoraOptions from "../../src/lora/LoraOptions.ts"
import type * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as ReplayRecord from "../../src/replay/Record.ts"
import type * as OutputPaths from "../../src/rollout/OutputPaths.ts"
import type * as ScheduleDataset from "../../src/schedule/Dataset.ts"
import type * as SessionError from "../../src/session/SessionError.ts"
import type * as ClusterJoin from "../cluster/ClusterJoin.ts"
import * as Credit from "../credit/Credit.ts"
import type * as Engine from "../engine/Engine.ts"
import * as Gateway from "../gateway/Gateway.ts"
import * as Forests from "../generation/Forests.ts"
import * as Generation from "../generation/Generation.ts"
import * as ReplayRecorder from "../generation/ReplayRecorder.ts"
import * as LoraEngine from "../lora/LoraEngine.ts"
import * as MetricsServer from "../observability/MetricsServer.ts"
import * as OtlpExport from "../observability/OtlpExport.ts"
import * as Telemetry from "../observability/Telemetry.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import type * as Hooks from "../platform/Hooks.ts"
import * as Rollout from "../rollout/Rollout.ts"
import * as RolloutConfig from "../rollout/RolloutConfig.ts"
import type * as GenerationGate from "../schedule/GenerationGate.ts"
import * as GroupPool from "../schedule/GroupPool.ts"
import * as Sessions from "../schedule/Sessions.ts"
import * as SlowStartWatch from "../session/SlowStartWatch.ts"
import * as Supervisor from "../session/Supervisor.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as VisionInputs from "../vision/VisionInputs.ts"
import * as AgentsFromSettings from "./AgentsFromSettings.ts"
import type * as ClusterRole from "./ClusterRole.ts"
import * as EngineFromSettings from "./EngineFromSettings.ts"
import type * as RolloutExtras from "./RolloutExtras.ts"

/** The services a rollout's layer provides to a program (`makeRollout`; `TrainerServices` adds the trainer's). */
export type RolloutServices =
  | Rollout.Rollout
  | RolloutConfig.RolloutConfig
  | Gateway.Gateway
  | Engine.Engine
  | Sessions.Sessions
  | Forests.Forests
  | Telemetry.Telemetry

/** Everything that can stop a rollout from starting, each naming the flag or file to fix. */
export type RolloutStartupError =
  | Settings.RolloutConfigError
  | Tokenizer.TokenizerLoadError
  | HookSpec.HookSpecError
  | Hooks.HookLoadError
  | Engine.EngineError
  | ParserRegistry.UnknownParserError
  | SessionError.AgentSpecError
  | Credit.CreditStartupError
  | ScheduleDataset.DatasetError
  | OutputPaths.OutputPathError
  | HttpServerError.ServeError
  | ClusterJoin.JoinError

/** The credit options the flags describe. */
export const creditOptions = (settings: Settings.RolloutSettings): CreditOptions.CreditOptions => ({
  groupRm: settings.groupRm,
  disableGrpoStdNormalization: settings.disableGrpoStdNormalization,
  disableRewardsNormalization: settings.disableRewardsNormalization,
  normalizeAdvantages: settings.normalizeAdvantages,
  nSamplesPerPrompt: settings.nSamplesPerPrompt,
  logPassrate: settings.logPassrate,
  useDynamicBatchSize: settings.useDynamicBatchSize,
  ...(settings.rewardKey === undefined ? {} : { rewardKey: settings.rewardKey }),
  ...(settings.evalRewardKey === undefined ? {} : { evalRewardKey: settings.evalRewardKey }),
  ...(settings.customRmPath === undefined ? {} : { customRmPath: settings.customRmPath }),
  ...(settings.agenticCustomAdvantagePath === undefined
    ? {}
    : { customAdvantagePath: settings.agenticCustomAdvantagePath }),
  ...(settings.maxTokensPerGpu === undefined ? {} : { maxTokensPerGpu: settings.maxTokensPerGpu }),
  ...(settings.dynamicSamplingFilterPath === undefined
    ? {}
    : { dynamicSamplingFilterPath: settings.dynamicSamplingFilterPath })
})

/**
 * Every service a rollout process runs Sessions with, composed from resolved settings: tokenizer, engine (embedded or
 * SGLang), Sessions, Forests, generation core, gateway, supervisor, credit, the Group pool and telemetry (what a
 * cluster runner runs, without the `Rollout` on top).
 */
export const servicesFromSettings = (
  settings: Settings.RolloutSettings,
  extras: RolloutExtras.MakeRolloutExtras = {},
  role: ClusterRole.ClusterRole = {}
) => {
  const cwd = extras.cwd ?? process.cwd()
  const services = Layer.mergeAll(
    RolloutConfig.RolloutConfig.layerSettings(settings),
    settings.tokenizer === undefined
      ? Tokenizer.Tokenizer.layer
      : Tokenizer.Tokenizer.fromDirectory(settings.tokenizer),
    Sessions.Sessions.layer,
    Forests.Forests.layer,
    extras.telemetry === undefined ? Telemetry.Telemetry.layer : Telemetry.Telemetry.layerSink(extras.telemetry),
    ReplayRecorder.ReplayRecorder.layer(
      ReplayRecord.generationSettingsOf(
        settings,
        settings.tokenizer === undefined ? null : Path.resolve(cwd, settings.tokenizer)
      )
    )
  )
  // The vision samples' training inputs (--multimodal-train-inputs), checked against the tokenizer's processor.
  const base = VisionInputs.VisionInputs.layer(settings.multimodalTrainInputs).pipe(Layer.provideMerge(services))
  const ownEngine = EngineFromSettings.engineLayer(settings, {
    cwd,
    embedded: extras.embedded,
    admissionCoordinator: role.admissionCoordinator
  })
  const generationCore = Layer.unwrap(
    Effect.map(
      Effect.fromResult(Generation.Generation.optionsOf(settings)),
      (options) => Generation.Generation.layer(options)
    )
  )
  // With debug dumps, each Session's requests and engine answers are recorded for `replay` (docs/debugging.md).
  const recording = settings.saveDebugRolloutData !== undefined
  const someEngine = role.engine === undefined ? ownEngine : role.engine(ownEngine)
  const recorded = recording ? ReplayRecorder.recordingEngine(someEngine) : someEngine
  // With --lora-adapter-mode the requests name the Sessions' adapters (layers/lora/, docs/lora.md); outermost, so an
  // in-place publication pauses through the cluster's fleet.
  const loraMode = LoraOptions.modeOf(settings)
  const lora = role.loraVersions === undefined || loraMode === "off"
    ? LoraEngine.layer({ mode: loraMode })
    : LoraEngine.layerOver(role.loraVersions(loraMode))
  const engine = lora.pipe(Layer.provide(recorded))
  const generation = recording ? ReplayRecorder.recordingGeneration(generationCore) : generationCore
  const supervisor = Layer.effect(
    Supervisor.Supervisor,
    Effect.gen(function*() {
      const gateway = yield* Gateway.Gateway
      const telemetry = yield* Telemetry.Telemetry
      // Process agents start under `bash -lc`: one line when they are slow to start, naming the login shell's time.
      const slowStart = extras.agent !== undefined ?
        undefined :
        (executor: Supervisor.SupervisorShape) =>
          SlowStartWatch.watch(executor, {
            loginShell: SlowStartWatch.loginShellSeconds({ ...process.env, ...settings.agentEnvVars }),
            report: telemetry.warn
          })
      return yield* AgentsFromSettings.supervisorFromSettings(
        settings,
        role.agentBaseUrl ?? gateway.agentBaseUrl,
        extras,
        slowStart
      )
    })
  )
  const withEngine = engine.pipe(Layer.provideMerge(base))
  const withGeneration = generation.pipe(Layer.provideMerge(withEngine))
  const gateway = Gateway.Gateway.layer({ host: settings.host, port: settings.port })
  const withGateway = (role.forwarder === undefined ? gateway : gateway.pipe(Layer.provide(role.forwarder))).pipe(
    Layer.provideMerge(withGeneration)
  )
  return Layer.mergeAll(
    supervisor,
    Credit.Credit.layer(creditOptions(settings), { cwd }),
    GroupPool.GroupPool.layer
  ).pipe(Layer.provideMerge(withGateway))
}

/**
 * Every service of a rollout, composed from resolved settings: tokenizer, engine (embedded or SGLang), Sessions,
 * Forests, generation core, gateway, supervisor, credit, scheduler, telemetry and the `Rollout` itself. With a
 * cluster role's `sessionRunner`, the Groups' Sessions run on the cluster's runners.
 */
export const layerFromSettings = (
  settings: Settings.RolloutSettings,
  extras: RolloutExtras.MakeRolloutExtras = {},
  role: ClusterRole.ClusterRole = {}
): Layer.Layer<RolloutServices | GenerationGate.GenerationGate, RolloutStartupError> => {
  const rollout = role.sessionRunner === undefined
    ? Rollout.Rollout.layer
    : Rollout.Rollout.layerWith(
      role.sessionRunner,
      role.gate === undefined ? Rollout.gateLayer : role.gate(Settings.retentionMode(settings))
    )
  // With an OTLP endpoint the tracer is part of the output, so the effects run with these services export their spans.
  const endpoint = OtlpExport.endpointOf(settings.otlpEndpoint, process.env)
  // Every service runs its fibers on the time-sliced scheduler, so a burst of agent requests cannot stall the loop.
  return rollout.pipe(
    Layer.provideMerge(servicesFromSettings(settings, extras, role)),
    Layer.provide(FairScheduler.layer()),
    Layer.provideMerge(endpoint === undefined ? Layer.empty : OtlpExport.layer(endpoint)),
    Layer.provideMerge(metricsServer(settings.metricsPort))
  )
}

/** `--metrics-port`: `/metrics` on its own loopback port; a port that cannot be bound fails the start. */
const metricsServer = (port: number | undefined): Layer.Layer<never, RolloutStartupError> =>
  port === undefined ? Layer.empty : Layer.empty.pipe(Layer.provide(MetricsServer.layer(port)))
