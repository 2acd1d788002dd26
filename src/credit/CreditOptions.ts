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
