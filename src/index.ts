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
export { supervisorFromSettings } from "../layers/compose/AgentsFromSettings.ts"
export { type ClusterRole } from "../layers/compose/ClusterRole.ts"
export { engineLayer } from "../layers/compose/EngineFromSettings.ts"
export { createRollout, type RolloutHandle, runReplay, runRescore } from "../layers/compose/PromiseApi.ts"
export { type MakeRolloutExtras } from "../layers/compose/RolloutExtras.ts"
export {
  creditOptions,
  layerFromSettings,
  type RolloutStartupError,
  servicesFromSettings
} from "../layers/compose/ServicesFromSettings.ts"
export {
  makeRollout,
  makeTrainer,
  runRollout,
  serveFromSettings,
  trainerFromSettings,
  type TrainerServices
} from "../layers/compose/TrainerLayers.ts"
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
