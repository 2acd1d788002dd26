/**
 * The layers a program provides, from options or resolved settings: the rollout (`makeRollout`, `runRollout`), the
 * `TrainerService` over it (`makeTrainer`, `trainerFromSettings`) and its RPC server (`serveFromSettings`).
 */
import { Effect, Layer } from "effect"
import type * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as Rollout from "../rollout/Rollout.ts"
import * as RolloutRpc from "../trainer/RolloutRpc.ts"
import * as TrainerService from "../trainer/TrainerService.ts"
import type * as ClusterRole from "./ClusterRole.ts"
import type * as RolloutExtras from "./RolloutExtras.ts"
import * as ServicesFromSettings from "./ServicesFromSettings.ts"

/** Decode and check `options`, then compose every service of the rollout (see `layerFromSettings`). */
export const makeRollout = (
  options: RolloutOptions.RolloutOptionsInput,
  extras: RolloutExtras.MakeRolloutExtras = {}
): Layer.Layer<ServicesFromSettings.RolloutServices, ServicesFromSettings.RolloutStartupError> =>
  Layer.unwrap(
    Settings.resolve(options).pipe(Effect.map((settings) => ServicesFromSettings.layerFromSettings(settings, extras)))
  )

/** Run the whole rollout (`--num-rollout` steps, Eval, output files) and tear everything down. */
export const runRollout = (options: RolloutOptions.RolloutOptionsInput, extras: RolloutExtras.MakeRolloutExtras = {}) =>
  Effect.gen(function*() {
    const rollout = yield* Rollout.Rollout
    return yield* rollout.run
  }).pipe(Effect.provide(makeRollout(options, extras)))

/** What `makeTrainer` provides: every service of a rollout and the `TrainerService` over it. */
export type TrainerServices = TrainerService.TrainerService | ServicesFromSettings.RolloutServices

/** `makeTrainer` from already resolved settings (what `relax-agentic serve` does). */
export const trainerFromSettings = (
  settings: Settings.RolloutSettings,
  extras: RolloutExtras.MakeRolloutExtras = {},
  role: ClusterRole.ClusterRole = {}
): Layer.Layer<TrainerServices, ServicesFromSettings.RolloutStartupError> =>
  TrainerService.TrainerService.layer.pipe(
    Layer.provideMerge(ServicesFromSettings.layerFromSettings(settings, extras, role))
  )

/** Every service of a rollout (see `makeRollout`) plus the `TrainerService` a trainer drives it through. */
export const makeTrainer = (
  options: RolloutOptions.RolloutOptionsInput,
  extras: RolloutExtras.MakeRolloutExtras = {}
): Layer.Layer<TrainerServices, ServicesFromSettings.RolloutStartupError> =>
  Layer.unwrap(Settings.resolve(options).pipe(Effect.map((settings) => trainerFromSettings(settings, extras))))

/**
 * The rollout served to remote trainers: `makeTrainer` plus the RPC server (layers/trainer/RolloutRpc.ts) in front of its
 * `TrainerService`. `RolloutRpcServer.url` is where it listens; `shutdownRequested` completes on a `Shutdown` call.
 */
export const serveFromSettings = (
  settings: Settings.RolloutSettings,
  rpc: RolloutRpc.RpcServerOptions = {},
  extras: RolloutExtras.MakeRolloutExtras = {},
  role: ClusterRole.ClusterRole = {}
): Layer.Layer<
  RolloutRpc.RolloutRpcServer | TrainerServices,
  ServicesFromSettings.RolloutStartupError | RolloutRpc.RpcServeError
> => RolloutRpc.RolloutRpcServer.layer(rpc).pipe(Layer.provideMerge(trainerFromSettings(settings, extras, role)))
