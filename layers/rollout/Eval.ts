/**
 * Eval (docs/runtime.md "Eval"): every `--eval-prompt-data` dataset run once, one after the other, through its own
 * Group pool, with Eval sampling, Eval concurrency and no refill.
 *
 * **Details**
 * Every prompt is run `--n-samples-per-eval-prompt` times (per dataset); with `--group-rm` a prompt's samples are one
 * Runtime Group, otherwise every sample is its own Group. Concurrency is the guide's `C_d` (`Settings.evalConcurrency`);
 * Eval sampling and context limit fall back to the rollout flags (`Settings.evalSampling`, `Settings.evalMaxContextLen`,
 * applied per Session by `SessionRunner`). A dropped Eval Group is not replaced (the step's debt shrinks), and counts
 * toward the rollout's one drop streak. When Eval runs (`--eval-interval`, `--skip-eval-before-train`) is `Rollout.run`'s
 * choice; which training Sessions stay resident meanwhile is the capacity table's (`Settings.capacity`).
 */
import { Effect } from "effect"
import * as Settings from "../../src/config/Settings.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as RolloutStats from "../../src/rollout/RolloutStats.ts"
import * as Dataset from "../../src/schedule/Dataset.ts"
import type * as Results from "../../src/trainer/Results.ts"
import * as Credit from "../credit/Credit.ts"
import * as Telemetry from "../observability/Telemetry.ts"
import * as GroupPool from "../schedule/GroupPool.ts"
import * as Sessions from "../schedule/Sessions.ts"
import * as Outputs from "./Outputs.ts"
import * as RolloutConfig from "./RolloutConfig.ts"
import * as SessionRunner from "./SessionRunner.ts"

/** What Eval needs of the rollout. */
export interface EvalOptions<E> {
  /** A dataset's rows (read at startup, so a wrong path fails before any agent runs). */
  readonly rows: (dataset: Settings.EvalDataset) => Effect.Effect<ReadonlyArray<Dataset.Row>, E>
  /** The rollout's one drop streak (training and Eval together). */
  readonly dropStreak: GroupPool.DropStreak
}

/** Build Eval: a function running every Eval dataset after `rolloutId` training steps. */
export const make = Effect.fnUntraced(function*<E>(options: EvalOptions<E>) {
  const settings = yield* RolloutConfig.RolloutConfig
  const sessions = yield* Sessions.Sessions
  const credit = yield* Credit.Credit
  const groupPools = yield* GroupPool.GroupPool
  const telemetry = yield* Telemetry.Telemetry
  const runner = yield* SessionRunner.SessionRunner
  const outputs = yield* Outputs.Outputs

  const evalDataset = Effect.fn("Rollout.evalDataset")(function*(
    dataset: Settings.EvalDataset,
    rolloutId: number
  ) {
    return yield* Effect.scoped(Effect.gen(function*() {
      const rows = yield* options.rows(dataset)
      const g = dataset.nSamplesPerEvalPrompt
      const concurrency = Settings.evalConcurrency(settings, g)
      // With a Group RM the Runtime Group is the whole prompt Group; otherwise every sample is its own Group.
      const groupSize = settings.groupRm ? g : 1
      const capacity = settings.groupRm ? concurrency : concurrency * g
      const scope = Dataset.evalScope(dataset.name, rolloutId)
      const planned: Array<SessionRunner.PlannedGroup> = []
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
      const pool = yield* groupPools.pool({
        capacity,
        prelaunch: false,
        mode: "eval",
        next: Effect.sync(() => planned[position++]!),
        runner,
        sessionId: sessions.newSessionId,
        describeError: runner.describeError,
        dropStreak: options.dropStreak
      })
      const progress = yield* telemetry.progress({
        description: `Eval ${dataset.name}`,
        total: rows.length * g,
        unit: "sample",
        showPrepared: false
      })
      const outcome = yield* pool.runStep({
        rolloutId,
        debt: planned.length,
        surplus: 0,
        nextStep: false,
        refill: false,
        progress
      })
      const pairs = outcome.accepted
        .flatMap((a) => a.value.samples.map((sample, i) => ({ sample, debug: a.value.debug[i] })))
        .sort((a, b) => a.sample.index - b.sample.index)
      const samples = pairs.map((p) => p.sample)
      const first = samples[0]
      if (first !== undefined) yield* telemetry.info(Records.evalExampleLine(first))
      const finished = yield* credit.finishStep(samples, "eval", g)
      const key = settings.evalRewardKey ?? settings.rewardKey
      yield* outputs.writeDebug(
        `eval_${rolloutId}_${dataset.name}`,
        `eval_${rolloutId}`,
        samples,
        pairs.map((p) => p.debug)
      )
      return {
        name: dataset.name,
        rewards: samples.map((s) => Records.primaryReward(s, key)),
        truncated: samples.map((s) => s.status === "truncated"),
        samples,
        metrics: {
          ...Records.evalMetrics(dataset.name, {
            ...finished.metrics,
            ...RolloutStats.compute(samples, { staleness: false })
          }),
          // Relax's step key of the eval/ panels: the training steps done before this Eval.
          "eval/step": rolloutId
        },
        dropped: outcome.dropped + outcome.filtered
      } satisfies Results.EvalDatasetResult
    }))
  })

  return Effect.fn("Rollout.runEval")(function*(rolloutId: number) {
    const datasets = yield* Effect.forEach(settings.evalDatasets, (d) => evalDataset(d, rolloutId))
    return { rolloutId, datasets } satisfies Results.EvalResult
  })
})
