/**
 * relax-agentic's public API: the `TrainerService` a trainer drives (`makeTrainer`), its Promise facade
 * (`createRollout`), the trainer RPC (`serveFromSettings`, `makeRpcClient`), the configuration, the rollout service
 * underneath (one step, Eval, or the whole run), the result and sample Schemas, and the engine port (docs/trainer.md,
 * docs/api.md).
 *
 * **Details**
 * ```ts
 * import { Effect } from "effect"
 * import { makeTrainer, TrainerService } from "relax-agentic"
 *
 * const program = Effect.gen(function*() {
 *   const trainer = yield* TrainerService
 *   for (let step = 0; step < 3; step++) {
 *     const { samples, metrics } = yield* trainer.step(step)
 *     // train on samples (tokens, loss_mask, rollout_log_probs, advantage), then:
 *     yield* trainer.updateWeights()
 *   }
 * })
 * Effect.runPromise(program.pipe(Effect.provide(makeTrainer({
 *   promptData: "data/train.jsonl", rolloutBatchSize: 4, nSamplesPerPrompt: 4,
 *   agentCommand: "bash run_agent_app.sh", agentCwd: "examples/arithmetic"
 * }))))
 * ```
 * Everything started by the rollout (gateway, agent processes, in-flight generations) lives as long as the layer:
 * when the program ends or is interrupted, every agent is reaped.
 */
import { Effect, Layer, ManagedRuntime, Stream } from "effect"
import type { HttpServerError } from "effect/http"
import * as Path from "node:path"
import * as Admission from "../layers/admission/Admission.ts"
import type * as Coordinator from "../layers/admission/Coordinator.ts"
import type * as ClusterJoin from "../layers/cluster/ClusterJoin.ts"
import * as Credit from "../layers/credit/Credit.ts"
import * as EmbeddedEngine from "../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../layers/engine/Engine.ts"
import * as SglangEngine from "../layers/engine/sglang/SglangEngine.ts"
import type * as Forwarder from "../layers/gateway/Forwarder.ts"
import * as Gateway from "../layers/gateway/Gateway.ts"
import * as Forests from "../layers/generation/Forests.ts"
import * as Generation from "../layers/generation/Generation.ts"
import * as ReplayRecorder from "../layers/generation/ReplayRecorder.ts"
import * as LoraEngine from "../layers/lora/LoraEngine.ts"
import type * as LoraVersions from "../layers/lora/LoraVersions.ts"
import * as MetricsServer from "../layers/observability/MetricsServer.ts"
import * as OtlpExport from "../layers/observability/OtlpExport.ts"
import * as Telemetry from "../layers/observability/Telemetry.ts"
import * as FairScheduler from "../layers/platform/FairScheduler.ts"
import type * as Hooks from "../layers/platform/Hooks.ts"
import * as Replay from "../layers/replay/Replay.ts"
import * as Rescore from "../layers/replay/Rescore.ts"
import * as Rollout from "../layers/rollout/Rollout.ts"
import * as RolloutConfig from "../layers/rollout/RolloutConfig.ts"
import type * as SessionRunner from "../layers/rollout/SessionRunner.ts"
import type * as GenerationGate from "../layers/schedule/GenerationGate.ts"
import * as GroupPool from "../layers/schedule/GroupPool.ts"
import * as Sessions from "../layers/schedule/Sessions.ts"
import * as SlowStartWatch from "../layers/session/SlowStartWatch.ts"
import * as StartLimit from "../layers/session/StartLimit.ts"
import * as Supervisor from "../layers/session/Supervisor.ts"
import * as Tokenizer from "../layers/tokenizer/Tokenizer.ts"
import * as RolloutRpc from "../layers/trainer/RolloutRpc.ts"
import * as TrainerService from "../layers/trainer/TrainerService.ts"
import * as VisionInputs from "../layers/vision/VisionInputs.ts"
import * as RolloutOptions from "./config/RolloutOptions.ts"
import * as Settings from "./config/Settings.ts"
import type * as CreditOptions from "./credit/CreditOptions.ts"
import type * as HookSpec from "./hooks/HookSpec.ts"
import * as LoraOptions from "./lora/LoraOptions.ts"
import * as ParserRegistry from "./parsers/ParserRegistry.ts"
import * as ReplayRecord from "./replay/Record.ts"
import type * as OutputPaths from "./rollout/OutputPaths.ts"
import type * as ScheduleDataset from "./schedule/Dataset.ts"
import type * as Retention from "./schedule/Retention.ts"
import type * as SessionError from "./session/SessionError.ts"
import type * as Results from "./trainer/Results.ts"

export { EmbeddedEngine, type EmbeddedEngineOptions } from "../layers/engine/EmbeddedEngine.ts"
export {
  Engine,
  EngineError,
  type EngineErrorReason,
  type EngineShape,
  type PauseMode
} from "../layers/engine/Engine.ts"
export { Gateway } from "../layers/gateway/Gateway.ts"
export { LoraPublishError, LoraVersions, type PublishInput } from "../layers/lora/LoraVersions.ts"
export { memorySink, OutputWriteError, processSink, type Sink, Telemetry } from "../layers/observability/Telemetry.ts"
export * as FairScheduler from "../layers/platform/FairScheduler.ts"
export * as SimulationClock from "../layers/platform/SimulationClock.ts"
export {
  replay,
  ReplayInputError,
  type ReplayOptions,
  type ReplayReport,
  type SessionOutcome
} from "../layers/replay/Replay.ts"
export {
  rescore,
  RescoreError,
  type RescoreOptions,
  type RescoreReport,
  type StepSummary
} from "../layers/replay/Rescore.ts"
export { replayTimed, type TimedOptions, type TimedReport } from "../layers/replay/TimedReplay.ts"
export {
  type EvalDatasetResult,
  type EvalResult,
  Rollout,
  type RolloutError,
  type RolloutShape,
  type RunSummary,
  type StepResult
} from "../layers/rollout/Rollout.ts"
export { RolloutConfig } from "../layers/rollout/RolloutConfig.ts"
export { type DropReason, TooManyDroppedGroupsError } from "../layers/schedule/GroupPool.ts"
export { type InProcessAgent, type InProcessAgentInput, Supervisor } from "../layers/session/Supervisor.ts"
export {
  clientProtocol,
  makeClient as makeRpcClient,
  type RolloutRpcClient,
  RolloutRpcs,
  RolloutRpcServer,
  type RolloutRpcServerShape,
  type RpcClientOptions,
  rpcPath,
  RpcServeError,
  type RpcServerOptions
} from "../layers/trainer/RolloutRpc.ts"
export { type StreamOptions, TrainerService, type TrainerServiceShape } from "../layers/trainer/TrainerService.ts"
export { flagOf } from "./config/FlagTable.ts"
export { RolloutOptions, type RolloutOptionsInput } from "./config/RolloutOptions.ts"
export {
  capacity,
  defaultMaxConsecutiveDrops,
  evalConcurrency,
  resolve as resolveConfig,
  RolloutConfigError,
  type RolloutSettings
} from "./config/Settings.ts"
export { ContextLengthError } from "./engine/ContextLengthError.ts"
export { Advantage, Reward, Status, TrainingSample } from "./forest/TrainingSample.ts"
export { OutputPathError } from "./rollout/OutputPaths.ts"
export * as RunReport from "./rollout/RunReport.ts"
export * as Capacity from "./schedule/Capacity.ts"
export * as Dataset from "./schedule/Dataset.ts"
export { DatasetError } from "./schedule/Dataset.ts"
export * as Results from "./trainer/Results.ts"
export { RolloutCallError } from "./trainer/Results.ts"

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

/** Extras a program can give `makeRollout` besides the options. */
export interface MakeRolloutExtras {
  /** Run this Effect function per Session instead of spawning `--agent-command`. */
  readonly agent?: Supervisor.InProcessAgent | undefined
  /** Where event lines and the progress bar go (default: stdout, the bar on a TTY). */
  readonly telemetry?: Telemetry.Sink | undefined
  /** Embedded engine tuning (e.g. `EmbeddedEngine.instant` for tests); the policy and seed come from the options. */
  readonly embedded?: Omit<EmbeddedEngine.EmbeddedEngineOptions, "policy"> | undefined
  /** Directory hook paths (`--embedded-policy`, `--custom-rm-path`, ...) are relative to (default: `process.cwd()`). */
  readonly cwd?: string | undefined
}

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
 * The agent executor of these settings: `extras.agent` in-process, else `--agent-command` processes. Both get
 * `--agent-env` from the one parser (`AgentSpec.parseEnv`, through `RolloutSettings.agentEnvVars` and `AgentSpec.make`),
 * and `--agent-max-starting` limits how many of their agents start at once (`layers/session/StartLimit.ts`). `watch`
 * wraps the executor inside that limit (a rollout's process agents: `layers/session/SlowStartWatch.ts`).
 */
export const supervisorFromSettings = <R = never>(
  settings: Settings.RolloutSettings,
  baseUrl: string,
  extras: Pick<MakeRolloutExtras, "agent"> = {},
  watch?: (executor: Supervisor.SupervisorShape) => Effect.Effect<Supervisor.SupervisorShape, never, R>
): Effect.Effect<Supervisor.SupervisorShape, SessionError.AgentSpecError, R> =>
  executorFromSettings(settings, baseUrl, extras).pipe(
    Effect.flatMap((executor) => watch === undefined ? Effect.succeed(executor) : watch(executor)),
    Effect.flatMap((supervisor) =>
      settings.agentMaxStarting === undefined
        ? Effect.succeed(supervisor)
        : StartLimit.limit(supervisor, settings.agentMaxStarting)
    )
  )

const executorFromSettings = (
  settings: Settings.RolloutSettings,
  baseUrl: string,
  extras: Pick<MakeRolloutExtras, "agent">
): Effect.Effect<Supervisor.SupervisorShape, SessionError.AgentSpecError> =>
  extras.agent !== undefined
    ? Effect.succeed(Supervisor.Supervisor.inProcess(extras.agent, {
      baseUrl,
      timeoutSeconds: settings.agentTimeout,
      env: settings.agentEnvVars
    }))
    : Effect.map(
      Supervisor.resolveAgentSpec({
        command: settings.agentCommand,
        cwd: settings.agentCwd,
        env: settings.agentEnv,
        timeoutSeconds: settings.agentTimeout
      }),
      (spec) =>
        Supervisor.Supervisor.localProcess({
          spec,
          baseUrl,
          ...(settings.outputDir === undefined ? {} : { logDir: Path.resolve(settings.outputDir, "logs") }),
          keepLogs: settings.agenticKeepSessionLogs ? "all" : "failed"
        })
    )

/**
 * Cluster mode (docs/scale-out.md): how a process takes part. A controller (`rollout` / `serve` with
 * `--cluster-database-url`) runs its Groups' Sessions on the runners; a runner (`relax-agentic runner`) forwards
 * requests for Sessions it does not hold (`forwarder`) and tells its agents `agentBaseUrl` (`--gateway-public-url`).
 */
export interface ClusterRole {
  /** The controller's runner of Sessions (`layers/cluster/Remote.ts` over a client-only member). */
  readonly sessionRunner?:
    | Layer.Layer<
      SessionRunner.SessionRunner,
      ClusterJoin.JoinError,
      Credit.Credit | Engine.Engine | RolloutConfig.RolloutConfig
    >
    | undefined
  /** The controller's generation gate: a step boundary on every runner (`layers/cluster/Fleet.ts`). */
  readonly gate?:
    | ((
      mode: Retention.Mode
    ) => Layer.Layer<GenerationGate.GenerationGate, ClusterJoin.JoinError, Engine.Engine | RolloutConfig.RolloutConfig>)
    | undefined
  /** The controller's engine, whose weight changes every runner follows (`layers/cluster/Fleet.ts`). */
  readonly engine?:
    | (<E, R>(
      engine: Layer.Layer<Engine.Engine, E, R>
    ) => Layer.Layer<Engine.Engine, E | ClusterJoin.JoinError, R | RolloutConfig.RolloutConfig>)
    | undefined
  /**
   * With KV admission on: the coordinator attempts wait on, the fleet's single writer
   * (`layers/cluster/AdmissionWriter.ts` over this member's membership); default: this process's own.
   */
  readonly admissionCoordinator?:
    | Layer.Layer<Coordinator.Coordinator, ClusterJoin.JoinError, Engine.Engine | RolloutConfig.RolloutConfig>
    | undefined
  /**
   * With versioned LoRA: the fleet's version registry Sessions bind through, the single writer
   * (`layers/cluster/LoraWriter.ts` over this member's membership); default: this process's own.
   */
  readonly loraVersions?:
    | ((
      mode: LoraOptions.Mode
    ) => Layer.Layer<
      LoraVersions.LoraVersions,
      Engine.EngineError | ClusterJoin.JoinError,
      RolloutConfig.RolloutConfig
    >)
    | undefined
  /** A runner's gateway forwarding (`layers/cluster/Forward.ts` over the runner's membership). */
  readonly forwarder?: Layer.Layer<Forwarder.Forwarder, ClusterJoin.JoinError> | undefined
  /** What agents get as `RELAX_BASE_URL` instead of this process's own gateway URL. */
  readonly agentBaseUrl?: string | undefined
}

/**
 * The engine the settings name: SGLang (`--engine sglang`, its tokenizer checked against the local one) or the
 * embedded engine, with `--embedded-policy` loaded relative to `cwd`. `sglangDefaults` are SGLang options the
 * settings do not set (`relax-agentic check` waits 10 seconds, not 10 minutes, for a server still starting).
 */
export const engineLayer = <CE = never, CR = never>(
  settings: Settings.RolloutSettings,
  options: {
    readonly cwd: string
    readonly embedded?: EmbeddedEngine.EmbeddedEngineOptions | undefined
    readonly sglangDefaults?: Partial<SglangEngine.SglangEngineOptions> | undefined
    /** With admission on: the coordinator attempts wait on (a cluster runner's: the fleet's single writer). */
    readonly admissionCoordinator?: Layer.Layer<Coordinator.Coordinator, CE, Engine.Engine | CR> | undefined
  }
): Layer.Layer<
  Engine.Engine,
  Engine.EngineError | HookSpec.HookSpecError | Hooks.HookLoadError | CE,
  Tokenizer.Tokenizer | CR
> =>
  Admission.around<Engine.EngineError | HookSpec.HookSpecError | Hooks.HookLoadError, Tokenizer.Tokenizer, CE, CR>(
    settings.engine === "sglang"
      ? SglangEngine.SglangEngine.layerCheckingTokenizer({
        ...options.sglangDefaults,
        ...SglangEngine.SglangEngine.optionsOf(settings)
      })
      : Layer.unwrap(Effect.gen(function*() {
        const policy = settings.embeddedPolicy === undefined
          ? undefined
          : yield* EmbeddedEngine.EmbeddedEngine.loadPolicy(settings.embeddedPolicy, options.cwd)
        return EmbeddedEngine.EmbeddedEngine.layer({
          ...options.embedded,
          seed: settings.rolloutSeed,
          ...(settings.embeddedKvTokens === undefined ? {} : { kvTokens: settings.embeddedKvTokens }),
          ...(policy === undefined ? {} : { policy })
        })
      })),
    Settings.admission(settings),
    options.admissionCoordinator
  )

/**
 * Every service a rollout process runs Sessions with, composed from resolved settings: tokenizer, engine (embedded or
 * SGLang), Sessions, Forests, generation core, gateway, supervisor, credit, the Group pool and telemetry (what a
 * cluster runner runs, without the `Rollout` on top).
 */
export const servicesFromSettings = (
  settings: Settings.RolloutSettings,
  extras: MakeRolloutExtras = {},
  role: ClusterRole = {}
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
  const ownEngine = engineLayer(settings, {
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
      return yield* supervisorFromSettings(settings, role.agentBaseUrl ?? gateway.agentBaseUrl, extras, slowStart)
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
  extras: MakeRolloutExtras = {},
  role: ClusterRole = {}
): Layer.Layer<
  | Rollout.Rollout
  | GenerationGate.GenerationGate
  | RolloutConfig.RolloutConfig
  | Gateway.Gateway
  | Engine.Engine
  | Sessions.Sessions
  | Forests.Forests
  | Telemetry.Telemetry,
  RolloutStartupError
> => {
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

/**
 * Replay the recorded Sessions of a run's output directory or debug dump through today's code (docs/debugging.md
 * "Replay"), as a Promise: one outcome per Session, `identical` true when none diverged.
 */
export const runReplay = (path: string, options: Replay.ReplayOptions = {}): Promise<Replay.ReplayReport> =>
  Effect.runPromise(Replay.replay(path, options))

/**
 * Re-score a run's saved training samples (docs/debugging.md "Rescore"), as a Promise: a trainer can re-score a saved
 * step with another reward function or custom advantage.
 */
export const runRescore = (runDir: string, options: Rescore.RescoreOptions = {}): Promise<Rescore.RescoreReport> =>
  Effect.runPromise(Rescore.rescore(runDir, options))

/** Decode and check `options`, then compose every service of the rollout (see `layerFromSettings`). */
export const makeRollout = (
  options: RolloutOptions.RolloutOptionsInput,
  extras: MakeRolloutExtras = {}
): Layer.Layer<
  | Rollout.Rollout
  | RolloutConfig.RolloutConfig
  | Gateway.Gateway
  | Engine.Engine
  | Sessions.Sessions
  | Forests.Forests
  | Telemetry.Telemetry,
  RolloutStartupError
> => Layer.unwrap(Settings.resolve(options).pipe(Effect.map((settings) => layerFromSettings(settings, extras))))

/** Run the whole rollout (`--num-rollout` steps, Eval, output files) and tear everything down. */
export const runRollout = (options: RolloutOptions.RolloutOptionsInput, extras: MakeRolloutExtras = {}) =>
  Effect.gen(function*() {
    const rollout = yield* Rollout.Rollout
    return yield* rollout.run
  }).pipe(Effect.provide(makeRollout(options, extras)))

/** What `makeTrainer` provides: every service of a rollout and the `TrainerService` over it. */
export type TrainerServices =
  | TrainerService.TrainerService
  | Rollout.Rollout
  | RolloutConfig.RolloutConfig
  | Gateway.Gateway
  | Engine.Engine
  | Sessions.Sessions
  | Forests.Forests
  | Telemetry.Telemetry

/** `makeTrainer` from already resolved settings (what `relax-agentic serve` does). */
export const trainerFromSettings = (
  settings: Settings.RolloutSettings,
  extras: MakeRolloutExtras = {},
  role: ClusterRole = {}
): Layer.Layer<TrainerServices, RolloutStartupError> =>
  TrainerService.TrainerService.layer.pipe(Layer.provideMerge(layerFromSettings(settings, extras, role)))

/** Every service of a rollout (see `makeRollout`) plus the `TrainerService` a trainer drives it through. */
export const makeTrainer = (
  options: RolloutOptions.RolloutOptionsInput,
  extras: MakeRolloutExtras = {}
): Layer.Layer<TrainerServices, RolloutStartupError> =>
  Layer.unwrap(Settings.resolve(options).pipe(Effect.map((settings) => trainerFromSettings(settings, extras))))

/**
 * The rollout served to remote trainers: `makeTrainer` plus the RPC server (layers/trainer/RolloutRpc.ts) in front of its
 * `TrainerService`. `RolloutRpcServer.url` is where it listens; `shutdownRequested` completes on a `Shutdown` call.
 */
export const serveFromSettings = (
  settings: Settings.RolloutSettings,
  rpc: RolloutRpc.RpcServerOptions = {},
  extras: MakeRolloutExtras = {},
  role: ClusterRole = {}
): Layer.Layer<RolloutRpc.RolloutRpcServer | TrainerServices, RolloutStartupError | RolloutRpc.RpcServeError> =>
  RolloutRpc.RolloutRpcServer.layer(rpc).pipe(Layer.provideMerge(trainerFromSettings(settings, extras, role)))

/** The `TrainerService` with Promises, for TypeScript trainers that do not use Effect (see `createRollout`). */
export interface RolloutHandle {
  /** One training step: credited samples, metrics, micro-batches (with `--use-dynamic-batch-size`). */
  readonly step: (rolloutId: number) => Promise<Results.StepResult>
  /** Every Eval dataset after `rolloutId` training steps. */
  readonly evaluate: (rolloutId: number) => Promise<Results.EvalResult>
  /** New generations report `version` (default: the next integer); resolves to the version now in effect. */
  readonly updateWeights: (version?: string) => Promise<string>
  /** Stop generation for a weight push the trainer does itself (`abort` by default); see docs/trainer.md. */
  readonly pauseGeneration: (mode?: Engine.PauseMode) => Promise<void>
  /** Continue on `version` (default: SGLang's label after the push); resolves to the version now in effect. */
  readonly resumeGeneration: (version?: string) => Promise<string>
  /** The LoRA form of a weight update: publish an adapter directory (docs/lora.md); resolves to its version. */
  readonly publishAdapter: (input: LoraVersions.PublishInput) => Promise<Results.PublishedAdapter>
  /** What the rollout is doing now: activity, weight version, steps completed, engine, gateway URL. */
  readonly status: () => Promise<Results.RolloutStatus>
  /** Finished Groups, step after step, as the loop pulls them (`for await (const group of rollout.groups())`). */
  readonly groups: (options?: TrainerService.StreamOptions) => AsyncIterable<Results.FinishedGroup>
  /** Reap every agent and close the gateway; the handle is unusable afterwards. */
  readonly close: () => Promise<void>
  readonly [Symbol.asyncDispose]: () => Promise<void>
}

/**
 * Start a rollout and return its `TrainerService` as Promises. Resolves once the rollout is up (gateway listening,
 * datasets loaded); rejects with a `RolloutStartupError` otherwise. Call `close()` (or `await using`) when done.
 *
 * **Details**
 * ```ts
 * const rollout = await createRollout({
 *   promptData: "data/train.jsonl", rolloutBatchSize: 4, agentCommand: "bash run_agent_app.sh", agentCwd: "."
 * })
 * try {
 *   for (let step = 0; step < 2; step++) {
 *     const { samples } = await rollout.step(step)
 *     // train on samples, then:
 *     await rollout.updateWeights()
 *   }
 * } finally {
 *   await rollout.close()
 * }
 * ```
 * A failed call rejects with the Effect API's error (`TooManyDroppedGroupsError`, `EngineError`, ...): the same
 * object, with its `_tag` and `message`.
 */
export const createRollout = async (
  options: RolloutOptions.RolloutOptionsInput,
  extras: MakeRolloutExtras = {}
): Promise<RolloutHandle> => {
  const runtime = ManagedRuntime.make(makeTrainer(options, extras))
  const trainer = await runtime.runPromise(Effect.gen(function*() {
    return yield* TrainerService.TrainerService
  })).catch(async (error: unknown) => {
    await runtime.dispose()
    throw error
  })
  const close = () => runtime.dispose()
  return {
    step: (rolloutId) => runtime.runPromise(trainer.step(rolloutId)),
    evaluate: (rolloutId) => runtime.runPromise(trainer.evaluate(rolloutId)),
    updateWeights: (version) => runtime.runPromise(trainer.updateWeights(version)),
    pauseGeneration: (mode) => runtime.runPromise(trainer.pauseGeneration(mode)),
    resumeGeneration: (version) => runtime.runPromise(trainer.resumeGeneration(version)),
    publishAdapter: (input) => runtime.runPromise(trainer.publishAdapter(input)),
    status: () => runtime.runPromise(trainer.status),
    groups: (streamOptions) => Stream.toAsyncIterable(trainer.stream(streamOptions)),
    close,
    [Symbol.asyncDispose]: close
  }
}
