/**
 * The service a trainer drives the rollout through: one training step, a stream of finished Groups, Eval, weight
 * updates and status. `relax-agentic serve` exposes exactly this service over RPC (layers/trainer/RolloutRpc.ts), and
 * `createRollout` (src/index.ts) wraps it in Promises.
 *
 * **Details**
 * Steps and Eval run one at a time (a second call waits for the first): they share the agent slots and the engine.
 * `updateWeights` goes straight to the Engine port and does not wait for a running step: the engine aborts the
 * generations in flight, which resume on the new version (layers/engine/Engine.ts). `pauseGeneration` /
 * `resumeGeneration` are the two-phase form around a weight push the trainer does itself. Shutdown is the layer's scope: closing it
 * reaps every agent and closes the gateway.
 *
 * `stream` runs training steps as the consumer pulls and emits each step's Groups once the step is credited (with
 * `--fully-async` a step also delivers Groups it finished for the previous step). Its Groups come from one seam,
 * `finishedGroups` below: a rollout that hands out single Groups as they are credited would feed the stream there.
 */
import { Context, Effect, Layer, Ref, Semaphore, Stream } from "effect"
import * as WorkerEvents from "../../src/engine/WorkerEvents.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import type * as Results from "../../src/trainer/Results.ts"
import * as Engine from "../engine/Engine.ts"
import * as Gateway from "../gateway/Gateway.ts"
import * as LoraVersions from "../lora/LoraVersions.ts"
import * as Rollout from "../rollout/Rollout.ts"
import * as RolloutConfig from "../rollout/RolloutConfig.ts"
import * as GenerationGate from "../schedule/GenerationGate.ts"

/** Which training steps `stream` runs. */
export interface StreamOptions {
  /** The first step's `rolloutId` (default: the step after the last finished one, 0 at the start). */
  readonly from?: number | undefined
  /** How many steps (default: until the consumer stops pulling). */
  readonly steps?: number | undefined
}

export interface TrainerServiceShape {
  /**
   * One training step: Prepare → Runtime → Reward → Transfer until `--rollout-batch-size` Groups are accepted.
   * The credited samples, the step's metrics and, with `--use-dynamic-batch-size`, its micro-batches.
   */
  readonly step: (rolloutId: number) => Effect.Effect<Results.StepResult, Rollout.RolloutError>
  /** Finished Groups, step after step, as the consumer pulls (see {@link StreamOptions}). */
  readonly stream: (options?: StreamOptions) => Stream.Stream<Results.FinishedGroup, Rollout.RolloutError>
  /** Every Eval dataset after `rolloutId` training steps. */
  readonly evaluate: (rolloutId: number) => Effect.Effect<Results.EvalResult, Rollout.RolloutError>
  /**
   * Tell the engine its weights changed: new generations report `version` (default: the next integer). Returns
   * the version now in effect.
   */
  readonly updateWeights: (version?: string) => Effect.Effect<string, Engine.EngineError>
  /**
   * First phase of a weight push the trainer does itself (docs/trainer.md, "Weight updates"): stop generation
   * (`mode`, default `abort`: in-flight attempts are parked with their partial ids; `retract` / `in_place`: SGLang
   * keeps them), hold new attempts and stop the agents' active-time budgets. SSE heartbeats continue. Then the trainer
   * pushes its weights with their version into SGLang and calls `resumeGeneration`.
   */
  readonly pauseGeneration: (mode?: Engine.PauseMode) => Effect.Effect<void, Engine.EngineError>
  /** Second phase: generation continues on `version` (default: SGLang's label after the push); returns it. */
  readonly resumeGeneration: (version?: string) => Effect.Effect<string, Engine.EngineError>
  /**
   * The LoRA form of a weight update (docs/lora.md): publish the adapter directory at `path` (`digest`: its content's
   * id, default the files' SHA-256). In place, a two-phase update of the fixed adapter; versioned, a new version new
   * Sessions bind while running ones keep theirs. Fails before any worker is touched when `path` is no adapter.
   */
  readonly publishAdapter: (
    input: LoraVersions.PublishInput
  ) => Effect.Effect<Results.PublishedAdapter, LoraVersions.LoraPublishError>
  readonly status: Effect.Effect<Results.RolloutStatus>
  /** The SGLang workers not serving now (down, or waiting for weights); see docs/sglang.md "When a worker dies". */
  readonly workers: Effect.Effect<WorkerEvents.WorkerReport>
  /** SGLang worker events from now on: `WorkerDown`, `WorkerNeedsWeights` (push the weights there), `WorkerBack`. */
  readonly workerEvents: Stream.Stream<WorkerEvents.WorkerEvent>
}

/**
 * Split a step's samples into their Groups, in transfer order. A Group is keyed by its samples' `rollout_id` and
 * `group_index`: with `--fully-async` a step also transfers Groups still owed to the previous step, which carry that
 * step's `rollout_id` and come first.
 */
export const groupsOf = (step: Results.StepResult): Array<Results.FinishedGroup> => {
  const byGroup = new Map<string, Results.FinishedGroup & { readonly samples: Array<TrainingSample.TrainingSample> }>()
  for (const sample of step.samples) {
    const key = `${sample.rollout_id}:${sample.group_index}`
    const group = byGroup.get(key)
    if (group === undefined) {
      byGroup.set(key, { rolloutId: sample.rollout_id, groupIndex: sample.group_index, samples: [sample] })
    } else {
      group.samples.push(sample)
    }
  }
  return [...byGroup.values()]
}

const make = Effect.gen(function*() {
  const rollout = yield* Rollout.Rollout
  const engine = yield* Engine.Engine
  const gate = yield* GenerationGate.GenerationGate
  const settings = yield* RolloutConfig.RolloutConfig
  const gateway = yield* Gateway.Gateway
  const lock = yield* Semaphore.make(1)
  const activity = yield* Ref.make<Results.Activity>("idle")
  const finished = yield* Ref.make<{ readonly steps: number; readonly last: number | null }>({ steps: 0, last: null })
  const lora = yield* Effect.serviceOption(LoraVersions.LoraVersions)

  const exclusive = <A, E>(kind: Results.Activity, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    lock.withPermits(1)(
      Ref.set(activity, kind).pipe(
        Effect.andThen(effect),
        Effect.ensuring(Ref.set(activity, "idle"))
      )
    )

  const step = (rolloutId: number): Effect.Effect<Results.StepResult, Rollout.RolloutError> =>
    exclusive("step", rollout.runStep(rolloutId)).pipe(
      Effect.tap(() => Ref.update(finished, (f) => ({ steps: f.steps + 1, last: rolloutId })))
    )

  // Where finished Groups come from: the Groups a step transfers, once the step is credited (step-level credit and
  // micro-batches need the whole step). A rollout that credits single Groups as they finish would feed them here.
  const finishedGroups = (rolloutId: number): Stream.Stream<Results.FinishedGroup, Rollout.RolloutError> =>
    Stream.fromIterableEffect(Effect.map(step(rolloutId), groupsOf))

  const stream = (options: StreamOptions = {}): Stream.Stream<Results.FinishedGroup, Rollout.RolloutError> =>
    Stream.unwrap(Effect.gen(function*() {
      const from = options.from ?? ((yield* Ref.get(finished)).last ?? -1) + 1
      const ids = Stream.iterate(from, (id) => id + 1)
      return (options.steps === undefined ? ids : Stream.take(ids, options.steps)).pipe(Stream.flatMap(finishedGroups))
    }))

  return {
    step,
    stream,
    evaluate: (rolloutId) => exclusive("evaluate", rollout.runEval(rolloutId)),
    updateWeights: (version) => engine.updateWeights(version),
    // The engine first (attempts stop), then the budgets: the agents do not lose active time to the push.
    pauseGeneration: (mode = "abort") => Effect.andThen(engine.pauseGeneration(mode), gate.pauseBudgets),
    resumeGeneration: (version) => Effect.tap(engine.resumeGeneration(version), () => gate.resumeBudgets),
    publishAdapter: (input) =>
      lora._tag === "Some" ? lora.value.publish(input) : Effect.fail(
        new LoraVersions.LoraPublishError({
          reason: "disabled",
          detail: "LoRA publication is off: start the rollout with --lora-adapter-mode"
        })
      ),
    workers: engine.workers ?? Effect.succeed(WorkerEvents.allServing),
    workerEvents: engine.workerEvents ?? Stream.empty,
    status: Effect.gen(function*() {
      const done = yield* Ref.get(finished)
      const workers = yield* (engine.workers ?? Effect.succeed(WorkerEvents.allServing))
      return {
        ...(workers.down.length === 0 ? {} : { workersDown: workers.down }),
        ...(workers.needsWeights.length === 0 ? {} : { workersNeedingWeights: workers.needsWeights }),
        activity: yield* Ref.get(activity),
        weightVersion: yield* engine.weightVersion,
        stepsCompleted: done.steps,
        lastRolloutId: done.last,
        engine: settings.engine,
        gatewayUrl: gateway.agentBaseUrl
      }
    })
  } satisfies TrainerServiceShape
})

/** The trainer-facing service (see the module comment). */
export class TrainerService
  extends Context.Service<TrainerService, TrainerServiceShape>()("relax-agentic/TrainerService")
{
  /** The service over a running rollout. */
  static readonly layer: Layer.Layer<
    TrainerService,
    never,
    Rollout.Rollout | GenerationGate.GenerationGate | Engine.Engine | RolloutConfig.RolloutConfig | Gateway.Gateway
  > = Layer.effect(TrainerService, make)
}
