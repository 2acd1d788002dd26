/**
 * A rollout step: Prepare → Runtime → Reward → Transfer, Eval, and the whole run (`numRollout` steps + Eval).
 *
 * **Details**
 * Each dataset row becomes a Group of `--n-samples-per-prompt` Sessions. A Session is registered with `Sessions`
 * (its `awaitLease` joins the Group's first-request barrier), gets an empty SessionForest, and runs its agent through
 * the `Supervisor` with an active-time budget started when the Group gets its Runtime lease. When the agent exits,
 * its exports (implicit leaf or explicit records) become training samples; `Credit` scores the Group (reward,
 * custom advantage or GRPO; a `null` hook result filters it). A Session that fails, an export that does not match
 * and a Reward error drop the Group; the Scheduler refills the demand and the step goes on, until
 * `--agentic-max-consecutive-drops` Groups were dropped in a row (training and Eval together): then every agent is
 * reaped and the rollout fails with `TooManyDroppedGroupsError`.
 * Transfer returns the samples to the caller (`runStep`) and, from `run`, writes `DIR/rollout_<id>.jsonl` and
 * `DIR/metrics.jsonl` atomically when `--output-dir` is set.
 */
import { Context, Data, Effect, Layer, Result } from "effect"
import { readFile } from "node:fs/promises"
import { join } from "node:path"
import * as CreditGroup from "../src/credit/Group.ts"
import * as Reward from "../src/credit/Reward.ts"
import { ExportError, ForestInvariantError, type ForestNotFound } from "../src/forest/errors.ts"
import * as Forest from "../src/forest/Forest.ts"
import * as Sample from "../src/forest/Sample.ts"
import type { TrainingSample } from "../src/forest/TrainingSample.ts"
import * as Dataset from "../src/schedule/Dataset.ts"
import type { AgentExecutionError, SessionInputError } from "../src/session/errors.ts"
import * as SessionInput from "../src/session/SessionInput.ts"
import * as RolloutConfig from "./Config.ts"
import { Credit, type CreditError } from "./Credit.ts"
import { Forests } from "./Forests.ts"
import * as Scheduler from "./Scheduler.ts"
import { emptyCounters, type RolloutMode, type SessionCounters, Sessions } from "./Sessions.ts"
import { Supervisor } from "./Supervisor.ts"
import { Telemetry } from "./Telemetry.ts"
import * as Telemetry_ from "./Telemetry.ts"
import { Tokenizer } from "./Tokenizer.ts"

/** A dataset file that cannot be read or parsed. */
export class DatasetLoadError extends Data.TaggedError("DatasetLoadError")<{
  readonly path: string
  readonly reason: string
}> {
  override get message(): string {
    return `cannot load dataset ${this.path}: ${this.reason}`
  }
}

/** The step could not deliver its samples (credit of the whole step, or writing the outputs). */
export type RolloutError =
  | DatasetLoadError
  | CreditError
  | Telemetry_.OutputWriteError
  | Scheduler.TooManyDroppedGroupsError

/** One Group as planned from the dataset. */
export interface PlannedGroup extends Scheduler.GroupLike {
  readonly seq: number
  readonly mode: RolloutMode
  /** Dataset row index. */
  readonly row: number
  readonly data: Dataset.Row
  /** Prompt index (Eval: position in the dataset; train: the Group's sequence number). */
  readonly promptIndex: number
  /** Sample index of the Group's first Session. */
  readonly firstIndex: number
}

/** The debug facts of one exported context (`--save-debug-rollout-data`). */
export interface ContextDebug {
  readonly view: Sample.DebugView
  readonly counters: SessionCounters
}

/** What a Session leaves behind: its exported samples (in export order) and their debug facts. */
export interface SessionResult {
  readonly sessionId: string
  readonly samples: ReadonlyArray<TrainingSample>
  readonly debug: ReadonlyArray<ContextDebug>
}

/** A scored Group. */
export interface GroupResult {
  readonly group: PlannedGroup
  readonly samples: ReadonlyArray<TrainingSample>
  readonly debug: ReadonlyArray<ContextDebug>
}

/** Why a Session or Group was dropped. */
export type GroupError =
  | AgentExecutionError
  | SessionInputError
  | ExportError
  | CreditError
  | ForestNotFound
  | ForestInvariantError

/** The result of one training step, as a trainer receives it. */
export interface StepResult {
  readonly rolloutId: number
  /** Credited samples, Group by Group (`group_index` order), Sessions in Group order. */
  readonly samples: ReadonlyArray<TrainingSample>
  readonly metrics: Readonly<Record<string, number>>
  /** Positions in `samples` per micro-batch under `--use-dynamic-batch-size`; otherwise null. */
  readonly microBatches: ReadonlyArray<ReadonlyArray<number>> | null
  readonly groups: { readonly accepted: number; readonly dropped: number; readonly filtered: number }
}

/** One Eval dataset's result (reference §6.7). */
export interface EvalDatasetResult {
  readonly name: string
  /** Primary reward per sample (by `--eval-reward-key` / `--reward-key`), `index` order; null when missing. */
  readonly rewards: ReadonlyArray<number | null>
  readonly truncated: ReadonlyArray<boolean>
  readonly samples: ReadonlyArray<TrainingSample>
  readonly metrics: Readonly<Record<string, number>>
  readonly dropped: number
}

export interface EvalResult {
  readonly rolloutId: number
  readonly datasets: ReadonlyArray<EvalDatasetResult>
}

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
  /** `--num-rollout` steps with Eval every `--eval-interval`, writing the outputs. */
  readonly run: Effect.Effect<RunSummary, RolloutError>
}

const loadRows = (path: string): Effect.Effect<ReadonlyArray<Dataset.Row>, DatasetLoadError> =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (error) => new DatasetLoadError({ path, reason: error instanceof Error ? error.message : String(error) })
  }).pipe(
    Effect.flatMap((text) => {
      const rows = Dataset.parse(text, path)
      return Result.isSuccess(rows)
        ? Effect.succeed(rows.success)
        : Effect.fail(new DatasetLoadError({ path, reason: rows.failure.message }))
    })
  )

const primaryReward = (sample: TrainingSample, key: string | undefined): number | null => {
  if (sample.reward === null) return null
  const value = Reward.primaryValue(sample.reward, key)
  return Result.isSuccess(value) ? value.success : null
}

/** Renumber a step's Groups: `group_index` = position in the step, `index` = `group_index * n + position`. */
const transferOrder = (
  results: ReadonlyArray<GroupResult>,
  rolloutId: number
): { readonly samples: Array<TrainingSample>; readonly debug: Array<ContextDebug> } => {
  const ordered = [...results].sort((a, b) => a.group.seq - b.group.seq)
  const samples: Array<TrainingSample> = []
  const debug: Array<ContextDebug> = []
  ordered.forEach((result, groupIndex) => {
    const sessionOrder = new Map<string, number>()
    for (const sample of result.samples) {
      if (!sessionOrder.has(sample.session_id)) sessionOrder.set(sample.session_id, sessionOrder.size)
      const position = sessionOrder.get(sample.session_id) ?? 0
      samples.push({
        ...sample,
        rollout_id: rolloutId,
        group_index: groupIndex,
        index: groupIndex * result.group.size + position
      })
    }
    debug.push(...result.debug)
  })
  return { samples, debug }
}

const debugRecords = (
  samples: ReadonlyArray<TrainingSample>,
  debug: ReadonlyArray<ContextDebug | undefined>,
  rolloutId: number | string
): Array<unknown> =>
  samples.map((sample, i) => {
    const facts = debug[i]
    return {
      rollout_id: rolloutId,
      session_id: sample.session_id,
      group_index: sample.group_index,
      index: sample.index,
      export_name: sample.export_name,
      terminal_status: facts?.view.terminal_status ?? sample.status,
      turn_count: facts?.view.turn_count ?? 0,
      leaf_state_hash: facts?.view.leaf_state_hash ?? null,
      state_hashes: facts?.view.state_hashes ?? [],
      turns: facts?.view.turns ?? [],
      abort_count: (facts?.view.turns ?? []).reduce((sum, t) => sum + t.abort_count, 0),
      request_count: facts?.counters.requests ?? 0,
      generation_count: facts?.counters.generations ?? 0,
      weight_versions: sample.weight_versions,
      reward: sample.reward,
      advantage: sample.advantage,
      response_length: sample.response_length,
      tokens: sample.tokens,
      prompt: sample.prompt,
      response: sample.response,
      label: sample.label,
      metadata: sample.metadata
    }
  })

const make = Effect.gen(function*() {
  const settings = yield* RolloutConfig.RolloutConfig
  const tokenizer = yield* Tokenizer
  const sessions = yield* Sessions
  const forests = yield* Forests
  const supervisor = yield* Supervisor
  const credit = yield* Credit
  const scheduler = yield* Scheduler.Scheduler
  const telemetry = yield* Telemetry

  const trainRows = yield* loadRows(settings.promptData)
  // Eval datasets are read at startup too, so a wrong path fails before any agent runs.
  const evalRows = new Map<string, ReadonlyArray<Dataset.Row>>()
  for (const d of settings.evalDatasets) evalRows.set(d.name, yield* loadRows(d.path))
  const inputOptions: SessionInput.InputOptions = {
    inputKey: settings.inputKey,
    metadataKey: settings.metadataKey,
    labelKey: settings.labelKey,
    multimodalKeys: settings.multimodalKeys
  }
  const decode = (ids: ReadonlyArray<number>) => tokenizer.decode(ids)

  /** Prepare + Runtime of one Session, then its exports as samples. */
  const runSession = (group: PlannedGroup, ticket: Scheduler.SessionTicket) =>
    Effect.scoped(Effect.gen(function*() {
      const prepared = yield* Effect.fromResult(SessionInput.fromRow(group.data, group.row, inputOptions))
      const { sessionId } = ticket
      const eval_ = group.mode === "eval"
      // Registered before anything is created, so an interruption between the steps below cannot leak the Session's
      // forest or registry entry (both removals are no-ops for what does not exist yet).
      yield* Effect.addFinalizer(() => sessions.close(sessionId).pipe(Effect.andThen(forests.remove(sessionId))))
      yield* forests.create(sessionId, {
        groupIndex: group.promptIndex,
        index: group.firstIndex + ticket.position,
        label: prepared.label ?? null,
        metadata: prepared.metadata,
        chatTemplateKwargs: settings.applyChatTemplateKwargs
      })
      const counters = emptyCounters()
      yield* sessions.register({
        sessionId,
        groupId: group.groupId,
        mode: group.mode,
        sampling: eval_
          ? RolloutConfig.evalSampling(settings, ticket.position)
          : RolloutConfig.trainSampling(settings, ticket.position),
        maxContextLen: eval_ ? RolloutConfig.evalMaxContextLen(settings) : settings.rolloutMaxContextLen,
        rolloutId: ticket.rolloutId,
        awaitLease: ticket.awaitLease,
        counters
      })
      const budget = yield* supervisor.makeBudget
      yield* Effect.forkScoped(ticket.leased.pipe(Effect.andThen(budget.start)))
      const outcome = yield* supervisor.run({
        sessionId,
        groupId: group.groupId,
        rolloutMode: group.mode,
        input: prepared,
        budget
      })
      yield* sessions.close(sessionId)
      for (const warning of outcome.warnings) yield* telemetry.warn(warning)
      const forest = yield* forests.get(sessionId)
      const exported = outcome.output.kind === "implicit"
        ? Forest.exportImplicit(forest, {
          ...(outcome.output.metadata === undefined ? {} : { metadata: outcome.output.metadata }),
          ...(outcome.output.reward === undefined ? {} : { reward: outcome.output.reward })
        })
        : Forest.exportExplicit(forest, outcome.output.records, undefined, { strict: settings.strictMatch })
      if (exported instanceof ExportError) return yield* exported
      const contexts = exported
      // Sample.build throws ForestInvariantError on a broken lineage; anything else it throws is a bug (a defect).
      const samples = yield* Effect.try({
        try: () =>
          contexts.map((c) =>
            Sample.build(forest, c.hash, decode, {
              rolloutId: ticket.rolloutId(),
              exportName: c.name,
              reward: c.reward,
              metadata: c.metadata
            })
          ),
        catch: (error) => error
      }).pipe(
        Effect.catch((error) => error instanceof ForestInvariantError ? Effect.fail(error) : Effect.die(error))
      )
      const debug = contexts.map((c): ContextDebug => ({ view: Sample.debugView(forest, c.hash), counters }))
      return { sessionId, samples, debug } satisfies SessionResult
    }))

  const reward = (group: PlannedGroup, outcomes: ReadonlyArray<SessionResult>) =>
    credit.scoreGroup(
      {
        groupIndex: group.promptIndex,
        sessions: outcomes.map((o): CreditGroup.Session => ({ sessionId: o.sessionId, exports: o.samples }))
      },
      group.mode
    ).pipe(
      Effect.map((scored): Scheduler.Verdict<GroupResult> =>
        scored === "filtered"
          ? Scheduler.filtered()
          : Scheduler.accepted({ group, samples: scored, debug: outcomes.flatMap((o) => o.debug) })
      )
    )

  const runner: Scheduler.GroupRunner<PlannedGroup, SessionResult, GroupResult, GroupError> = {
    session: runSession,
    reward
  }
  const describeError = (error: GroupError) => ({ type: error._tag, detail: error.message })
  // One streak for the whole rollout: a broken agent fails Eval Groups as surely as training ones.
  const dropStreak = Scheduler.dropStreak(settings.agenticMaxConsecutiveDrops)

  // The training data source: seeded shuffling per epoch, epochs wrap.
  let cursor = Dataset.cursor(trainRows.length, { shuffle: settings.rolloutShuffle, seed: settings.rolloutSeed })
  let trainSeq = 0
  const nextTrainGroup = Effect.sync((): PlannedGroup => {
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

  const trainPool = yield* scheduler.pool({
    capacity: settings.agenticConcurrency,
    prelaunch: settings.agenticPrelaunch,
    mode: "train",
    next: nextTrainGroup,
    runner,
    sessionId: sessions.newSessionId,
    describeError,
    dropStreak
  })

  const writeDebug = (rolloutId: number | string, samples: ReadonlyArray<TrainingSample>, debug: ReadonlyArray<ContextDebug>) =>
    settings.saveDebugRolloutData === undefined
      ? Effect.void
      : Telemetry_.writeFileAtomic(
        Telemetry_.debugDumpPath(settings.saveDebugRolloutData, rolloutId),
        Telemetry_.jsonl(debugRecords(samples, debug, rolloutId))
      )

  const runStep = (rolloutId: number): Effect.Effect<StepResult, RolloutError> =>
    Effect.scoped(Effect.gen(function*() {
      const n = settings.nSamplesPerPrompt
      const debt = settings.rolloutBatchSize
      yield* telemetry.event("accounting_start", {
        rollout: rolloutId,
        sessions: debt * n,
        groups: debt,
        final_backfill: false
      })
      const progress = yield* telemetry.progress({
        description: `Rollout ${rolloutId} generation`,
        total: debt * n,
        unit: "session",
        showPrepared: settings.agenticPrelaunch
      })
      const outcome = yield* trainPool.runStep({
        rolloutId,
        debt,
        surplus: settings.overSamplingBatchSize - settings.rolloutBatchSize,
        nextStep: rolloutId + 1 < settings.numRollout,
        refill: true,
        progress
      })
      const { samples, debug } = transferOrder(outcome.accepted.map((a) => a.value), rolloutId)
      const first = samples[0]
      if (first !== undefined) {
        yield* telemetry.info(
          `First rollout sample: ${JSON.stringify([first.prompt + first.response])}, label: ` +
            `${JSON.stringify(first.label).slice(0, 100)}, reward: ${JSON.stringify(first.reward)}`
        )
      }
      const step = yield* credit.finishStep(samples, "train")
      const last = step.samples.at(-1)
      if (last !== undefined) {
        yield* telemetry.info(
          `Finish rollout: ${JSON.stringify([last.prompt + last.response])}, label: ` +
            `${JSON.stringify(last.label).slice(0, 100)}, reward: ${JSON.stringify(last.reward)}`
        )
      }
      yield* writeDebug(rolloutId, step.samples, debug)
      yield* telemetry.event("accounting_end", {
        rollout: rolloutId,
        groups: outcome.accepted.length,
        rows: step.samples.length,
        debt: 0,
        resident_groups: outcome.residentGroups,
        interrupted_groups: 0
      })
      return {
        rolloutId,
        samples: step.samples,
        metrics: {
          ...step.metrics,
          "rollout/groups_dropped": outcome.dropped,
          "rollout/groups_filtered": outcome.filtered
        },
        microBatches: step.microBatches === null ? null : step.microBatches.map((b) => [...b.indices]),
        groups: { accepted: outcome.accepted.length, dropped: outcome.dropped, filtered: outcome.filtered }
      }
    }))

  const evalDataset = (
    dataset: RolloutConfig.RolloutSettings["evalDatasets"][number],
    rolloutId: number
  ): Effect.Effect<EvalDatasetResult, RolloutError> =>
    Effect.scoped(Effect.gen(function*() {
      const rows = evalRows.get(dataset.name) ?? (yield* loadRows(dataset.path))
      const g = dataset.nSamplesPerEvalPrompt
      const concurrency = RolloutConfig.evalConcurrency(settings, g)
      // With a Group RM the Runtime Group is the whole prompt Group; otherwise every sample is its own Group.
      const groupSize = settings.groupRm ? g : 1
      const capacity = settings.groupRm ? concurrency : concurrency * g
      const scope = Dataset.evalScope(dataset.name, rolloutId)
      const planned: Array<PlannedGroup> = []
      rows.forEach((_, prompt) => {
        for (let k = 0; k < g; k += groupSize) {
          const seq = planned.length
          planned.push({
            ...Dataset.group(scope, seq, rows, prompt, groupSize),
            mode: "eval",
            promptIndex: prompt,
            firstIndex: prompt * g + k
          })
        }
      })
      let position = 0
      const pool = yield* scheduler.pool({
        capacity,
        prelaunch: false,
        mode: "eval",
        next: Effect.sync(() => planned[position++]!),
        runner,
        sessionId: sessions.newSessionId,
        describeError,
        dropStreak
      })
      const progress = yield* telemetry.progress({
        description: `Eval ${dataset.name}`,
        total: rows.length * g,
        unit: "sample",
        showPrepared: false
      })
      const outcome = yield* pool.runStep({ rolloutId, debt: planned.length, surplus: 0, nextStep: false, refill: false, progress })
      const pairs = outcome.accepted
        .flatMap((a) => a.value.samples.map((sample, i) => ({ sample, debug: a.value.debug[i] })))
        .sort((a, b) => a.sample.index - b.sample.index)
      const samples = pairs.map((p) => p.sample)
      const first = samples[0]
      if (first !== undefined) {
        yield* telemetry.info(
          `eval_rollout_single_dataset example data: ${JSON.stringify([first.prompt + first.response])} ` +
            `reward=${JSON.stringify(first.reward)}`
        )
      }
      const finished = yield* credit.finishStep(samples, "eval", g)
      const key = settings.evalRewardKey ?? settings.rewardKey
      if (settings.saveDebugRolloutData !== undefined) {
        yield* Telemetry_.writeFileAtomic(
          Telemetry_.debugDumpPath(settings.saveDebugRolloutData, `eval_${rolloutId}_${dataset.name}`),
          Telemetry_.jsonl(debugRecords(samples, pairs.map((p) => p.debug), `eval_${rolloutId}`))
        )
      }
      return {
        name: dataset.name,
        rewards: samples.map((s) => primaryReward(s, key)),
        truncated: samples.map((s) => s.status === "truncated"),
        samples,
        metrics: Object.fromEntries(Object.entries(finished.metrics).map(([k, v]) => [`eval/${dataset.name}/${k}`, v])),
        dropped: outcome.dropped + outcome.filtered
      }
    }))

  const runEval = (rolloutId: number): Effect.Effect<EvalResult, RolloutError> =>
    Effect.forEach(settings.evalDatasets, (d) => evalDataset(d, rolloutId)).pipe(
      Effect.map((datasets) => ({ rolloutId, datasets }))
    )

  const run: Effect.Effect<RunSummary, RolloutError> = Effect.gen(function*() {
    const files: Array<string> = []
    const metricLines: Array<unknown> = []
    const evalLines: Array<unknown> = []
    const dir = settings.outputDir
    let evals = 0
    const doEval = (afterSteps: number) =>
      Effect.gen(function*() {
        const result = yield* runEval(afterSteps)
        evals += 1
        for (const d of result.datasets) {
          const reward = d.rewards.filter((r): r is number => r !== null)
          const passrate = d.rewards.filter((r) => r === 1).length
          yield* telemetry.info(
            `eval ${d.name}: rollout=${afterSteps} samples=${d.samples.length} ` +
              `reward=${reward.length === 0 ? "n/a" : (reward.reduce((a, b) => a + b, 0) / reward.length).toFixed(4)} ` +
              `passrate=${d.rewards.length === 0 ? "n/a" : (passrate / d.rewards.length).toFixed(4)}`
          )
          if (dir !== undefined) {
            const path = join(dir, `eval_${afterSteps}_${d.name}.jsonl`)
            yield* Telemetry_.writeFileAtomic(path, Telemetry_.jsonl(d.samples))
            files.push(path)
          }
          evalLines.push({ rollout_id: afterSteps, dataset: d.name, metrics: d.metrics, dropped: d.dropped })
        }
        if (dir !== undefined) {
          const path = join(dir, "eval_metrics.jsonl")
          yield* Telemetry_.writeFileAtomic(path, Telemetry_.jsonl(evalLines))
          if (!files.includes(path)) files.push(path)
        }
      })
    const evalEnabled = settings.evalInterval !== undefined && settings.evalDatasets.length > 0
    if (evalEnabled && !settings.skipEvalBeforeTrain) yield* doEval(0)
    for (let rolloutId = 0; rolloutId < settings.numRollout; rolloutId++) {
      const step = yield* runStep(rolloutId)
      metricLines.push({ rollout_id: rolloutId, ...step.groups, metrics: step.metrics })
      if (dir !== undefined) {
        const path = join(dir, `rollout_${rolloutId}.jsonl`)
        yield* Telemetry_.writeFileAtomic(path, Telemetry_.jsonl(step.samples))
        files.push(path)
        const metricsPath = join(dir, "metrics.jsonl")
        yield* Telemetry_.writeFileAtomic(metricsPath, Telemetry_.jsonl(metricLines))
        if (!files.includes(metricsPath)) files.push(metricsPath)
      }
      const done = rolloutId + 1
      if (evalEnabled && (done % (settings.evalInterval ?? 1) === 0 || done === settings.numRollout)) yield* doEval(done)
    }
    return { steps: settings.numRollout, evals, files }
  })

  return { runStep, runEval, run } satisfies RolloutShape
})

/** The rollout service. */
export class Rollout extends Context.Service<Rollout, RolloutShape>()("relax-agentic/Rollout") {
  /**
   * Build the rollout (loads the training dataset, starts the resident pool); the pool and every agent live as long
   * as the layer.
   */
  static readonly layer: Layer.Layer<
    Rollout,
    DatasetLoadError,
    | RolloutConfig.RolloutConfig
    | Tokenizer
    | Sessions
    | Forests
    | Supervisor
    | Credit
    | Scheduler.Scheduler
    | Telemetry
  > = Layer.effect(Rollout, make)
}
