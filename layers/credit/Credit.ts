/**
 * Credit: loads the `--custom-rm-path` and `--agentic-custom-advantage-path` hooks at startup and turns each finished
 * Group into scored samples (reward + base advantage), then each step into whitened samples, metrics and micro-batches.
 *
 * **Details**
 * Per Group (`scoreGroup`): the export rules are checked; exported rewards are kept and an ordinary custom RM scores only
 * rows without one (and, as in the reference, not at all in training when a custom advantage hook gives the credit),
 * while a Group RM scores every exported row; then, in training only, the custom advantage hook (which may filter the
 * Group) or GRPO fills `advantage`, and the `--dynamic-sampling-filter-path` hook may filter the Group (its drop
 * reasons are counted in the step's metrics). Eval leaves `advantage` null and is never filtered. Per step
 * (`finishStep`): optional whitening, the guide's metrics, and token-budget micro-batches under
 * `--use-dynamic-batch-size`.
 */
import { Context, Effect, Layer, Result } from "effect"
import * as Batching from "../../src/credit/Batching.ts"
import * as CreditError from "../../src/credit/CreditError.ts"
import * as CreditOptions from "../../src/credit/CreditOptions.ts"
import * as CustomAdvantage from "../../src/credit/CustomAdvantage.ts"
import * as DynamicFilter from "../../src/credit/DynamicFilter.ts"
import * as Group from "../../src/credit/Group.ts"
import * as Grpo from "../../src/credit/Grpo.ts"
import * as Metrics from "../../src/credit/Metrics.ts"
import * as Reward from "../../src/credit/Reward.ts"
import * as Whitening from "../../src/credit/Whitening.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import type * as HookSpec from "../../src/hooks/HookSpec.ts"
import type * as AgentSpec from "../../src/session/AgentSpec.ts"
import * as Thrown from "../../src/Thrown.ts"
import * as Hooks from "../platform/Hooks.ts"

/** Everything `scoreGroup` / `finishStep` can fail with. */
export type { CreditError } from "../../src/credit/CreditError.ts"

/** What building the service can fail with: a bad hook value, a module that does not load, a bad option. */
export type CreditStartupError = HookSpec.HookSpecError | Hooks.HookLoadError | CreditError.CreditConfigError

/** A step after credit: its samples (whitened when asked), its metrics, and its micro-batches when dynamic. */
export interface StepCredit {
  readonly samples: ReadonlyArray<TrainingSample.TrainingSample>
  readonly metrics: Readonly<Record<string, number>>
  /** Positions in `samples` per micro-batch; null without `--use-dynamic-batch-size` and in eval. */
  readonly microBatches: ReadonlyArray<Batching.MicroBatch> | null
}

export interface CreditShape {
  readonly options: CreditOptions.CreditOptions
  /** Reward and credit for one finished Group: its rows in Group order, or `"filtered"` when the hook drops it. */
  readonly scoreGroup: (
    group: Group.Group,
    mode: AgentSpec.RolloutMode
  ) => Effect.Effect<ReadonlyArray<TrainingSample.TrainingSample> | "filtered", CreditError.CreditError>
  /**
   * Whitening (train, `--normalize-advantages`), metrics and micro-batches for one step's scored rows.
   * `groupSize` overrides the Group size pass@k is logged up to (eval: `--n-samples-per-eval-prompt`).
   */
  readonly finishStep: (
    samples: ReadonlyArray<TrainingSample.TrainingSample>,
    mode: AgentSpec.RolloutMode,
    groupSize?: number
  ) => Effect.Effect<StepCredit, CreditError.CreditError>
}

export interface CreditSettings {
  /** Directory the hook paths are relative to (default: the process working directory). */
  readonly cwd?: string
  /** The `config` argument passed to the custom RM (default: the credit options). */
  readonly rmConfig?: unknown
}

/** Call a user hook, sync or async; a throw or a rejection becomes the error `onError` builds. */
const callHook = <E>(
  hook: Hooks.HookFunction,
  args: ReadonlyArray<unknown>,
  onError: (reason: string) => E
): Effect.Effect<unknown, E> =>
  Effect.tryPromise({
    try: async () => await hook(...args),
    catch: (error) => onError(`the hook threw: ${Thrown.messageOf(error)}`)
  })

/** Check the options that can be checked before any Group exists. */
export const validateOptions = (
  options: CreditOptions.CreditOptions
): Result.Result<void, CreditError.CreditConfigError> => {
  if (!Number.isInteger(options.nSamplesPerPrompt) || options.nSamplesPerPrompt < 1) {
    return Result.fail(
      new CreditError.CreditConfigError({
        detail: `--n-samples-per-prompt must be a positive integer, got ${options.nSamplesPerPrompt}`
      })
    )
  }
  const combination = CreditOptions.problem(options)
  if (combination !== undefined) {
    return Result.fail(new CreditError.CreditConfigError({ detail: `${combination.flag} ${combination.reason}` }))
  }
  if (
    options.maxTokensPerGpu !== undefined && (!Number.isInteger(options.maxTokensPerGpu) || options.maxTokensPerGpu < 1)
  ) {
    return Result.fail(
      new CreditError.CreditConfigError({
        detail: `--max-tokens-per-gpu must be a positive integer, got ${options.maxTokensPerGpu}`
      })
    )
  }
  return Result.void
}

/** Build the service: validate the options and load the hooks they name. */
export const make = (
  options: CreditOptions.CreditOptions,
  settings: CreditSettings = {}
): Effect.Effect<CreditShape, CreditStartupError> =>
  Effect.gen(function*() {
    yield* Effect.fromResult(validateOptions(options))
    const cwd = settings.cwd ?? process.cwd()
    const rmConfig = "rmConfig" in settings ? settings.rmConfig : options
    const rm = options.customRmPath === undefined
      ? undefined
      : yield* Hooks.load("--custom-rm-path", options.customRmPath, cwd)
    const advantageHook = options.customAdvantagePath === undefined
      ? undefined
      : yield* Hooks.load("--agentic-custom-advantage-path", options.customAdvantagePath, cwd)
    const filterHook = options.dynamicSamplingFilterPath === undefined
      ? undefined
      : yield* Hooks.load("--dynamic-sampling-filter-path", options.dynamicSamplingFilterPath, cwd)
    /** Training Groups the filter dropped since the last `finishStep`, by reason. */
    const filterDrops = new Map<string, number>()

    const rewardKeyFor = (mode: AgentSpec.RolloutMode): string | undefined =>
      mode === "eval" ? (options.evalRewardKey ?? options.rewardKey) : options.rewardKey

    const scoreRow = (
      sample: TrainingSample.TrainingSample
    ): Effect.Effect<TrainingSample.TrainingSample, CreditError.RewardError> =>
      Effect.gen(function*() {
        if (rm === undefined || sample.reward !== null) return sample
        const fail = (reason: string) =>
          new CreditError.RewardError({
            sessionId: sample.session_id,
            exportName: sample.export_name,
            detail: `--custom-rm-path: ${reason}`
          })
        const value = yield* callHook(rm, [sample, rmConfig], fail)
        const reward = Reward.fromRm(value)
        if (Result.isFailure(reward)) return yield* fail(reward.failure)
        return { ...sample, reward: reward.success }
      })

    const scoreRewards = (
      group: Group.Group,
      mode: AgentSpec.RolloutMode
    ): Effect.Effect<Group.Group, CreditError.CreditError> =>
      Effect.gen(function*() {
        const rows = Group.rows(group)
        if (rm !== undefined && options.groupRm) {
          const fail = (reason: string) =>
            new CreditError.GroupRewardError({ groupIndex: group.groupIndex, detail: reason })
          const value = yield* callHook(rm, [rows, rmConfig], fail)
          const rewards = Reward.fromGroupRm(value, rows.length)
          if (Result.isFailure(rewards)) return yield* fail(rewards.failure)
          return Group.withRows(group, rows.map((sample, index) => ({ ...sample, reward: rewards.success[index]! })))
        }
        // The reference skips the ordinary RM when custom advantage provides the training credit.
        if (rm === undefined || (mode === "train" && advantageHook !== undefined)) return group
        const scored = yield* Effect.forEach(rows, scoreRow, { concurrency: "unbounded" })
        return Group.withRows(group, scored)
      })

    const grpo = (
      group: Group.Group
    ): Effect.Effect<ReadonlyArray<TrainingSample.TrainingSample>, CreditError.CreditError> =>
      Effect.gen(function*() {
        const rows = Group.rows(group)
        if (rows.length !== options.nSamplesPerPrompt) {
          return yield* new CreditError.NormalizationError({
            detail: `Group ${group.groupIndex} has ${rows.length} samples, expected --n-samples-per-prompt ` +
              `${options.nSamplesPerPrompt}; GRPO normalizes over complete Groups`
          })
        }
        const rewards: Array<number> = []
        for (const sample of rows) {
          const fail = (reason: string) =>
            new CreditError.RewardError({
              sessionId: sample.session_id,
              exportName: sample.export_name,
              detail: reason
            })
          if (sample.reward === null) {
            return yield* fail(
              `the context has no reward; write reward in the agent output, or configure --custom-rm-path`
            )
          }
          const value = Reward.primaryValue(sample.reward, options.rewardKey)
          if (Result.isFailure(value)) return yield* fail(value.failure)
          rewards.push(value.success)
        }
        const advantages = Grpo.normalizeGroup(rewards, options)
        return rows.map((sample, index) => ({ ...sample, advantage: advantages[index]! }))
      })

    /** Training credit: the custom advantage hook (which may filter the Group), else GRPO. */
    const credit = (
      rewarded: Group.Group
    ): Effect.Effect<ReadonlyArray<TrainingSample.TrainingSample> | "filtered", CreditError.CreditError> =>
      Effect.gen(function*() {
        if (advantageHook === undefined) return yield* grpo(rewarded)
        const fail = (reason: string) =>
          new CreditError.AdvantageError({ groupIndex: rewarded.groupIndex, detail: reason })
        const result = yield* callHook(advantageHook, [CustomAdvantage.hookInput(rewarded)], fail)
        const applied = CustomAdvantage.apply(result, rewarded)
        if (Result.isFailure(applied)) return yield* applied.failure
        return applied.success === "filtered" ? "filtered" : Group.rows(applied.success)
      })

    /** `--dynamic-sampling-filter-path`: keep the credited rows, or filter the Group and count the reason. */
    const dynamicFilter = (
      groupIndex: number,
      rows: ReadonlyArray<TrainingSample.TrainingSample>
    ): Effect.Effect<ReadonlyArray<TrainingSample.TrainingSample> | "filtered", CreditError.FilterError> =>
      Effect.gen(function*() {
        if (filterHook === undefined) return rows
        const fail = (reason: string) => new CreditError.FilterError({ groupIndex, detail: reason })
        const decision = DynamicFilter.decide(yield* callHook(filterHook, [rows, rmConfig], fail))
        if (Result.isFailure(decision)) return yield* fail(decision.failure)
        if (decision.success.keep) return rows
        const reason = decision.success.reason
        if (reason !== undefined) {
          const metric = DynamicFilter.dropMetric(reason)
          filterDrops.set(metric, (filterDrops.get(metric) ?? 0) + 1)
        }
        return "filtered"
      })

    const scoreGroup = (
      group: Group.Group,
      mode: AgentSpec.RolloutMode
    ): Effect.Effect<ReadonlyArray<TrainingSample.TrainingSample> | "filtered", CreditError.CreditError> =>
      Effect.gen(function*() {
        yield* Effect.fromResult(Group.validateExports(group, options))
        const rewarded = yield* scoreRewards(group, mode)
        if (mode === "eval") return Group.rows(rewarded)
        const credited = yield* credit(rewarded)
        return credited === "filtered" ? credited : yield* dynamicFilter(group.groupIndex, credited)
      }).pipe(Effect.withSpan("Credit.scoreGroup", { attributes: { groupIndex: group.groupIndex, mode } }))

    const finishStep = Effect.fn("Credit.finishStep")(
      function*(
        samples: ReadonlyArray<TrainingSample.TrainingSample>,
        mode: AgentSpec.RolloutMode,
        groupSize?: number
      ): Effect.fn.Return<StepCredit, CreditError.CreditError> {
        const credited = mode === "train" && options.normalizeAdvantages
          ? yield* Effect.fromResult(Whitening.whiten(samples))
          : samples
        const metrics = yield* Effect.fromResult(Metrics.step(credited, {
          rewardKey: rewardKeyFor(mode),
          logPassrate: options.logPassrate,
          groupSize: groupSize ?? options.nSamplesPerPrompt
        }))
        const microBatches = mode === "train" && options.useDynamicBatchSize && options.maxTokensPerGpu !== undefined
          ? yield* Effect.fromResult(Batching.pack(credited, options.maxTokensPerGpu))
          : null
        const drops = mode === "train" ? Object.fromEntries(filterDrops) : {}
        if (mode === "train") filterDrops.clear()
        return { samples: credited, metrics: { ...metrics, ...drops }, microBatches }
      }
    )

    return { options, scoreGroup, finishStep }
  })

/** Credit assignment for finished Groups and steps. */
export class Credit extends Context.Service<Credit, CreditShape>()("relax-agentic/Credit") {
  /** Validate `options` and load the hooks they name; fails at startup, before any Session runs. */
  static readonly layer = (
    options: CreditOptions.CreditOptions,
    settings: CreditSettings = {}
  ): Layer.Layer<Credit, CreditStartupError> => Layer.effect(Credit, make(options, settings))
}
