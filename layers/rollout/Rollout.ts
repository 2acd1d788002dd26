/**
 * The rollout's orchestration: a training step (Prepare → Runtime → Reward → Transfer), Eval (layers/rollout/Eval.ts),
 * and the whole run (`numRollout` steps + Eval every `--eval-interval`) (docs/runtime.md "Steps", "Eval").
 *
 * **Details**
 * Each dataset row becomes a Group of `--n-samples-per-prompt` Sessions; `SessionRunner` runs one Group's Sessions and
 * Reward, and the Group pools decide when Groups start and get their lease. A dropped Group is refilled and the
 * step goes on, until `--agentic-max-consecutive-drops` Groups were dropped in a row (training and Eval together):
 * then every agent is reaped and the rollout fails with `TooManyDroppedGroupsError`.
 * Transfer returns the samples to the caller (`runStep`) and, from `run`, `Outputs` writes `DIR/rollout_<id>.jsonl`
 * and `DIR/metrics.jsonl` atomically when `--output-dir` is set. The records and log lines are shaped by
 * `src/rollout/Records.ts`.
 */
import { Clock, Context, Effect, Layer, Result } from "effect"
import { readFile } from "node:fs/promises"
import * as Settings from "../../src/config/Settings.ts"
import * as Timeline from "../../src/replay/Timeline.ts"
import type * as OutputPaths from "../../src/rollout/OutputPaths.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as RolloutStats from "../../src/rollout/RolloutStats.ts"
import type * as RunReport from "../../src/rollout/RunReport.ts"
import * as Dataset from "../../src/schedule/Dataset.ts"
import * as Partitions from "../../src/schedule/Partitions.ts"
import * as Retention from "../../src/schedule/Retention.ts"
import * as Thrown from "../../src/Thrown.ts"
import type * as Results from "../../src/trainer/Results.ts"
import * as Credit from "../credit/Credit.ts"
import * as Engine from "../engine/Engine.ts"
import * as Forests from "../generation/Forests.ts"
import * as Telemetry from "../observability/Telemetry.ts"
import * as GenerationGate from "../schedule/GenerationGate.ts"
import * as GroupPool from "../schedule/GroupPool.ts"
import * as Sessions from "../schedule/Sessions.ts"
import * as Supervisor from "../session/Supervisor.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as Eval from "./Eval.ts"
import * as Outputs from "./Outputs.ts"
import * as RolloutConfig from "./RolloutConfig.ts"
import * as SessionRunner from "./SessionRunner.ts"

/** The step could not deliver its samples (credit of the whole step, or writing the outputs). */
export type RolloutError =
  | Dataset.DatasetError
  | Credit.CreditError
  | Telemetry.OutputWriteError
  | GroupPool.TooManyDroppedGroupsError
  | Engine.EngineError

/** The result of one training step, as a trainer receives it (its Schema: `src/trainer/Results.ts`). */
export type StepResult = Results.StepResult

/** One Eval dataset's result (docs/runtime.md "Eval"). */
export type EvalDatasetResult = Results.EvalDatasetResult

/** Every Eval dataset's result after `rolloutId` training steps. */
export type EvalResult = Results.EvalResult

/** What `run` did. */
export interface RunSummary {
  readonly steps: number
  readonly evals: number
  /** Files written under `--output-dir` (empty without it). */
  readonly files: ReadonlyArray<string>
}

export interface RolloutShape {
  /** One training step: Prepare → Runtime → Reward → Transfer until `--rollout-batch-size` Groups are accepted. */
  readonly runStep: (rolloutId: number) => Effect.Effect<StepResult, RolloutError>
  /** Every Eval dataset, serially, with Eval sampling and concurrency. */
  readonly runEval: (rolloutId: number) => Effect.Effect<EvalResult, RolloutError>
  /**
   * `--num-rollout` steps with Eval every `--eval-interval`, writing the outputs. A write that fails stops it at the
   * end of the step with `OutputWriteError` (the content saved to a fallback file, docs/outputs.md).
   */
  readonly run: Effect.Effect<RunSummary, RolloutError>
  /** Where `run` is and what it wrote (the line an interrupted `rollout` ends with: `RunReport.interruptedLine`). */
  readonly progress: Effect.Effect<RunReport.Progress>
}

/** Read and parse a dataset file (a read failure is a `DatasetError` with reason `unreadable`). */
const loadRows = (path: string): Effect.Effect<ReadonlyArray<Dataset.Row>, Dataset.DatasetError> =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (error) =>
      new Dataset.DatasetError({ path, reason: "unreadable", detail: Thrown.messageOf(error), cause: error })
  }).pipe(Effect.flatMap((text) => Effect.fromResult(Dataset.parse(text, path))))

const make = Effect.gen(function*() {
  const settings = yield* RolloutConfig.RolloutConfig
  const sessions = yield* Sessions.Sessions
  const credit = yield* Credit.Credit
  const groupPools = yield* GroupPool.GroupPool
  const telemetry = yield* Telemetry.Telemetry
  const engine = yield* Engine.Engine
  const runner = yield* SessionRunner.SessionRunner
  const outputs = yield* Outputs.Outputs
  const gate = yield* GenerationGate.GenerationGate
  const mode = Settings.retentionMode(settings)
  // Transfer partitions: with fully async a step may leave Groups owed to its partition for the next step.
  let partitions = Partitions.empty
  let activity: RunReport.Activity = { _tag: "Starting" }

  if (settings.overSamplingBatchSize > settings.rolloutBatchSize && !mode.partialRollout && !mode.fullyAsync) {
    yield* telemetry.warn(
      `--over-sampling-batch-size ${settings.overSamplingBatchSize} is above --rollout-batch-size ` +
        `${settings.rolloutBatchSize} without --partial-rollout or --fully-async: the over-sampled Groups still running ` +
        `when a step closes are stopped and their work is discarded`
    )
  }
  const trainRows = yield* loadRows(settings.promptData)
  // Eval datasets are read at startup too, so a wrong path fails before any agent runs.
  const evalRows = new Map<string, ReadonlyArray<Dataset.Row>>()
  for (const d of settings.evalDatasets) evalRows.set(d.name, yield* loadRows(d.path))

  // One streak for the whole rollout: a broken agent fails Eval Groups as surely as training ones.
  const dropStreak = GroupPool.dropStreak(settings.agenticMaxConsecutiveDrops)

  // The training data source: seeded shuffling per epoch, epochs wrap.
  let cursor = Dataset.cursor(trainRows.length, { shuffle: settings.rolloutShuffle, seed: settings.rolloutSeed })
  let trainSeq = 0
  const nextTrainGroup = Effect.sync((): SessionRunner.PlannedGroup => {
    const [draws, next] = Dataset.take(cursor, 1)
    cursor = next
    const row = draws[0]?.row ?? 0
    const seq = trainSeq++
    return {
      ...Dataset.group(Dataset.trainScope, seq, trainRows, row, settings.nSamplesPerPrompt),
      mode: "train",
      promptIndex: seq,
      firstIndex: seq * settings.nSamplesPerPrompt
    }
  })

  const trainPool = yield* groupPools.pool({
    capacity: settings.agenticConcurrency,
    prelaunch: settings.agenticPrelaunch,
    mode: "train",
    next: nextTrainGroup,
    runner,
    sessionId: sessions.newSessionId,
    describeError: runner.describeError,
    dropStreak,
    ...(mode.partialRollout || mode.fullyAsync
      ? {
        interruption: {
          isSessionInterrupted: gate.isInterrupted,
          // Only a fully-async step's close depends on interrupted Groups: only then do changes wake the step loop.
          onChange: mode.fullyAsync ? gate.onChange : undefined
        }
      }
      : {})
  })

  /**
   * Route accepted Groups to the partitions they pay (the previous one first), in acceptance order, with the number
   * of Groups each partition had delivered before (its late Groups continue its `group_index` numbering).
   */
  const route = (accepted: ReadonlyArray<SessionRunner.GroupResult>) =>
    Effect.gen(function*() {
      const byPartition = new Map<
        number,
        { readonly delivered: number; readonly groups: Array<SessionRunner.GroupResult> }
      >()
      const deliveredBefore = (rolloutId: number) =>
        [partitions.previous, partitions.current].find((p) => p?.rolloutId === rolloutId)?.accepted ?? 0
      for (const group of accepted) {
        const routed = Partitions.accept(partitions)
        // The Group pool accepts Groups only while the partitions' debt is unpaid: a failure here is a bug.
        if (Result.isFailure(routed)) return yield* Effect.die(routed.failure)
        const entry = byPartition.get(routed.success.rolloutId) ??
          { delivered: deliveredBefore(routed.success.rolloutId), groups: [] }
        entry.groups.push(group)
        byPartition.set(routed.success.rolloutId, entry)
        partitions = routed.success.partitions
      }
      return [...byPartition.entries()].sort((a, b) => a[0] - b[0])
    })

  /** A step or Eval after an output write failed does not start: the rollout stops rather than lose outputs. */
  const stopAfterWriteFailure = Effect.flatMap(
    outputs.failed,
    (failed) => failed === undefined ? Effect.void : Effect.fail(failed)
  )

  const runStep = Effect.fn("Rollout.runStep")(function*(rolloutId: number) {
    yield* Effect.annotateCurrentSpan("rolloutId", rolloutId)
    yield* stopAfterWriteFailure
    const startedAt = yield* Clock.currentTimeMillis
    return yield* Effect.scoped(Effect.gen(function*() {
      const n = settings.nSamplesPerPrompt
      // Fully async: the extra step rollout_id == num_rollout opens no partition and drains what is still owed.
      const finalBackfill = Retention.isFinalBackfill(mode, rolloutId, settings.numRollout)
      if (!finalBackfill) {
        const opened = Partitions.open(partitions, rolloutId, settings.rolloutBatchSize)
        if (Result.isFailure(opened)) return yield* Effect.die(opened.failure)
        partitions = opened.success
      }
      const debt = Partitions.debt(partitions)
      const weightVersion = yield* engine.weightVersion
      yield* telemetry.event("accounting_start", {
        rollout: rolloutId,
        sessions: debt * n,
        groups: debt,
        final_backfill: finalBackfill
      })
      const progress = yield* telemetry.progress({
        description: `Rollout ${rolloutId} generation`,
        total: debt * n,
        unit: "session",
        showPrepared: settings.agenticPrelaunch
      })
      // Groups retained by the last step continue: their parked requests resume, their budgets count again.
      yield* gate.resumeStep(rolloutId)
      const retain = Retention.retainsAcrossSteps(mode, finalBackfill) &&
        rolloutId + 1 < Retention.stepCount(mode, settings.numRollout)
      const outcome = yield* trainPool.runStep({
        rolloutId,
        debt,
        surplus: finalBackfill ? 0 : settings.overSamplingBatchSize - settings.rolloutBatchSize,
        nextStep: rolloutId + 1 < settings.numRollout,
        refill: true,
        retain,
        // Only this step's own partition may stay owed; the previous one is paid first.
        maxCarriedDebt: Retention.closesWithInterrupted(mode, finalBackfill) ? settings.rolloutBatchSize : 0,
        progress
      })
      // Retained Groups' generations are aborted and parked until the next step; their budgets stop.
      if (retain) yield* gate.pause
      const interruptedGroups = retain ? yield* trainPool.interruptedRetained : outcome.interruptedGroups
      const transferred = (yield* route(outcome.accepted.map(({ value }) => value))).map(([partition, routed]) =>
        Records.transferOrder(
          routed.groups.map((value) => ({
            seq: value.group.seq,
            size: value.group.size,
            samples: value.samples,
            debug: value.debug
          })),
          partition,
          routed.delivered
        )
      )
      partitions = Partitions.produced(partitions).partitions
      const samples = transferred.flatMap((t) => t.samples)
      const debug = transferred.flatMap((t) => t.debug)
      const first = samples[0]
      if (first !== undefined) yield* telemetry.info(Records.firstSampleLine(first))
      const step = yield* credit.finishStep(samples, "train")
      const last = step.samples.at(-1)
      if (last !== undefined) yield* telemetry.info(Records.finishLine(last))
      yield* outputs.writeDebug(rolloutId, rolloutId, step.samples, debug)
      yield* telemetry.event("accounting_end", {
        rollout: rolloutId,
        groups: outcome.accepted.length,
        rows: step.samples.length,
        debt: outcome.debt,
        resident_groups: outcome.residentGroups,
        interrupted_groups: interruptedGroups
      })
      return {
        rolloutId,
        weightVersion,
        samples: step.samples,
        metrics: {
          ...step.metrics,
          ...RolloutStats.withPrefix(
            "rollout/",
            RolloutStats.compute(step.samples, { staleness: mode.partialRollout || mode.fullyAsync })
          ),
          "perf/rollout_time": ((yield* Clock.currentTimeMillis) - startedAt) / 1000,
          // With debug dumps: where the Sessions' time went (docs/debugging.md "Where the time went").
          ...Timeline.stepMetrics(debug.flatMap((d) => d.replay ?? [])),
          // Relax's step key: the x axis of a dashboard's rollout/ panels.
          "rollout/step": rolloutId,
          ...Records.parserFailureMetrics(yield* runner.takeParserFailures, settings.agenticToolCallParser),
          ...Records.driftMetrics(yield* runner.takeDrift),
          ...(yield* engine.takeStepMetrics),
          "rollout/groups_dropped": outcome.dropped,
          "rollout/groups_filtered": outcome.filtered
        },
        microBatches: step.microBatches === null ? null : step.microBatches.map((b) => [...b.indices]),
        groups: { accepted: outcome.accepted.length, dropped: outcome.dropped, filtered: outcome.filtered }
      } satisfies StepResult
    }))
  })

  const evalRun = yield* Eval.make({
    rows: (dataset) => {
      const rows = evalRows.get(dataset.name)
      return rows === undefined ? loadRows(dataset.path) : Effect.succeed(rows)
    },
    dropStreak
  })
  const runEval = (rolloutId: number) => Effect.andThen(stopAfterWriteFailure, evalRun(rolloutId))

  const run = Effect.gen(function*() {
    const files = yield* outputs.openRun()
    let evals = 0
    const doEval = Effect.fn("Rollout.eval")(function*(afterSteps: number) {
      activity = { _tag: "Eval", afterSteps, writing: false }
      const result = yield* runEval(afterSteps)
      evals += 1
      activity = { _tag: "Eval", afterSteps, writing: true }
      for (const d of result.datasets) {
        yield* telemetry.info(Records.evalSummaryLine(d.name, afterSteps, d.samples.length, d.rewards))
        yield* files.evalDataset(
          afterSteps,
          d.name,
          d.samples,
          Records.evalMetricLine(afterSteps, d.name, d.metrics, d.dropped)
        )
      }
      yield* files.evalMetrics()
      yield* stopAfterWriteFailure
      activity = { _tag: "Between", lastStep: afterSteps === 0 ? undefined : afterSteps - 1 }
    })
    const evalEnabled = settings.evalInterval !== undefined && settings.evalDatasets.length > 0
    if (evalEnabled && !settings.skipEvalBeforeTrain) yield* doEval(0)
    // Fully async adds the final backfill: step call num_rollout, which drains what the last step left owed.
    for (let rolloutId = 0; rolloutId < Retention.stepCount(mode, settings.numRollout); rolloutId++) {
      activity = { _tag: "Step", rolloutId, writing: false }
      const step = yield* runStep(rolloutId)
      activity = { _tag: "Step", rolloutId, writing: true }
      yield* files.step(rolloutId, step.samples, Records.stepMetricLine(rolloutId, step.groups, step.metrics))
      yield* stopAfterWriteFailure
      activity = { _tag: "Between", lastStep: rolloutId }
      // Without a trainer, the command still advances the policy version between steps, so every sample's
      // weight_versions shows which step's policy generated it (a trainer calls Engine.updateWeights itself).
      if (rolloutId + 1 < Retention.stepCount(mode, settings.numRollout)) yield* engine.updateWeights()
      const done = rolloutId + 1
      if (
        evalEnabled && rolloutId < settings.numRollout &&
        (done % (settings.evalInterval ?? 1) === 0 || done === settings.numRollout)
      ) {
        yield* doEval(done)
      }
    }
    return { steps: settings.numRollout, evals, files: files.files() } satisfies RunSummary
  }).pipe(Effect.withSpan("Rollout.run"))

  const progress = Effect.map(outputs.report, (report): RunReport.Progress => ({ activity, ...report }))

  return { runStep, runEval, run, progress } satisfies RolloutShape
})

/** The training generation gate in the configured cross-step mode (`Settings.retentionMode` of the RolloutConfig). */
export const gateLayer: Layer.Layer<GenerationGate.GenerationGate, never, RolloutConfig.RolloutConfig | Engine.Engine> =
  Layer.unwrap(
    Effect.gen(function*() {
      const settings = yield* RolloutConfig.RolloutConfig
      return GenerationGate.GenerationGate.layer(Settings.retentionMode(settings))
    })
  )

/** The rollout service. */
export class Rollout extends Context.Service<Rollout, RolloutShape>()("relax-agentic/Rollout") {
  /**
   * Build the rollout (loads the training dataset, starts the resident pool); the pool and every agent live as long
   * as the layer.
   */
  static readonly layer: Layer.Layer<
    Rollout | GenerationGate.GenerationGate,
    Dataset.DatasetError | OutputPaths.OutputPathError,
    | RolloutConfig.RolloutConfig
    | Tokenizer.Tokenizer
    | Sessions.Sessions
    | Forests.Forests
    | Supervisor.Supervisor
    | Credit.Credit
    | GroupPool.GroupPool
    | Telemetry.Telemetry
    | Engine.Engine
  > = Layer.effect(Rollout, make).pipe(
    Layer.provide(Layer.merge(SessionRunner.SessionRunner.layer, Outputs.Outputs.layer)),
    Layer.provideMerge(gateLayer)
  )

  /**
   * The rollout with another way to run a Group's Sessions (cluster mode: on the runner owning the Group,
   * `layers/cluster/Remote.ts`) and, optionally, another generation gate (cluster mode: the step boundary on every
   * runner, `layers/cluster/Fleet.ts`); planning, the step ledger, credit and Transfer stay here.
   */
  static readonly layerWith = <E, R, E2, R2>(
    sessionRunner: Layer.Layer<SessionRunner.SessionRunner, E, R>,
    gate: Layer.Layer<GenerationGate.GenerationGate, E2, R2>
  ) =>
    Layer.effect(Rollout, make).pipe(
      Layer.provide(Layer.merge(sessionRunner, Outputs.Outputs.layer)),
      Layer.provideMerge(gate)
    )
}
