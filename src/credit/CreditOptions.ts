/**
 * The options credit assignment reads, as plain data (the config maps the CLI flags onto it).
 */
import { Schema } from "effect"

export const CreditOptions = Schema.Struct({
  /** `--reward-key`: the primary value of an object reward. */
  rewardKey: Schema.optionalKey(Schema.String),
  /** `--eval-reward-key`: the same for eval; falls back to `rewardKey`. */
  evalRewardKey: Schema.optionalKey(Schema.String),
  /** `--custom-rm-path`: `module#export` of `(sample, config) => reward` (with `groupRm`: `(samples, config) => rewards`). */
  customRmPath: Schema.optionalKey(Schema.String),
  /** `--group-rm`: score every exported row of a Group in one call. */
  groupRm: Schema.Boolean,
  /** `--agentic-custom-advantage-path`: `module#export` of the custom advantage function. */
  customAdvantagePath: Schema.optionalKey(Schema.String),
  /** `--dynamic-sampling-filter-path`: `module#export` of `(samples, config) => boolean | { keep, reason? }`. */
  dynamicSamplingFilterPath: Schema.optionalKey(Schema.String),
  /** `--disable-grpo-std-normalization`. */
  disableGrpoStdNormalization: Schema.Boolean,
  /** `--disable-rewards-normalization`. */
  disableRewardsNormalization: Schema.Boolean,
  /** `--normalize-advantages`: whiten the step's advantages over its loss-masked tokens. */
  normalizeAdvantages: Schema.Boolean,
  /** `--n-samples-per-prompt`: Sessions per Group. */
  nSamplesPerPrompt: Schema.Int,
  /** `--log-passrate`. */
  logPassrate: Schema.Boolean,
  /** `--use-dynamic-batch-size`. */
  useDynamicBatchSize: Schema.Boolean,
  /** `--max-tokens-per-gpu`: the token budget of one micro-batch. */
  maxTokensPerGpu: Schema.optionalKey(Schema.Int)
})
export type CreditOptions = typeof CreditOptions.Type

/** The defaults of every flag (no hooks, GRPO with std normalization, one Session per Group). */
export const defaults: CreditOptions = {
  groupRm: false,
  disableGrpoStdNormalization: false,
  disableRewardsNormalization: false,
  normalizeAdvantages: false,
  nSamplesPerPrompt: 1,
  logPassrate: false,
  useDynamicBatchSize: false
}

/** A combination of credit flags that cannot run: the flag to change and why. */
export interface OptionsProblem {
  /** The flag the user has to add or change (`--max-tokens-per-gpu`). */
  readonly flag: string
  readonly reason: string
}

/**
 * The rules that tie credit flags together, in one place: `Settings.resolveSettings` reports them against the command line and
 * `Credit.make` against a trainer's options.
 */
export const problem = (options: {
  readonly useDynamicBatchSize: boolean
  readonly maxTokensPerGpu?: number | undefined
  readonly groupRm: boolean
  readonly customRmPath?: string | undefined
}): OptionsProblem | undefined => {
  if (options.useDynamicBatchSize && options.maxTokensPerGpu === undefined) {
    return {
      flag: "--max-tokens-per-gpu",
      reason: "is required with --use-dynamic-batch-size (the token budget of one micro-batch)"
    }
  }
  if (options.groupRm && options.customRmPath === undefined) {
    return { flag: "--group-rm", reason: "requires --custom-rm-path (the function that scores a whole Group)" }
  }
  return undefined
}
