/**
 * Per-step reward and metadata metrics, with the guide's names ("Metrics and Passrate").
 */
import { Result } from "effect"
import type * as TrainingSample from "../forest/TrainingSample.ts"
import * as CreditError from "./CreditError.ts"
import * as Reward from "./Reward.ts"

/** `mean`, `median`, `max`, `min` of a non-empty list (median of an even count: mean of the middle two). */
export const statistics = (
  values: ReadonlyArray<number>
): { mean: number; median: number; max: number; min: number } => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  const median = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
  return {
    mean: values.reduce((sum, value) => sum + value, 0) / values.length,
    median,
    max: sorted[sorted.length - 1]!,
    min: sorted[0]!
  }
}

/**
 * The unbiased pass@k estimate of one Group: `1 − C(n − c, k) / C(n, k)` for `n` tries with `c` successes
 * (computed as a product, as the reference does, to stay exact for large n).
 */
export const passAtK = (n: number, c: number, k: number): number => {
  if (n - c < k) return 1
  let product = 1
  for (let i = n - c + 1; i <= n; i++) product *= 1 - k / i
  return 1 - product
}

/** Top-level metadata keys that are bookkeeping, not metrics (the reference's skip list). */
export const METADATA_SKIP: ReadonlySet<string> = new Set([
  "agentic_trace",
  "id",
  "index",
  "sample_index",
  "group_index",
  "start_rollout_id",
  "rollout_turns"
])

const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

const addStatistics = (metrics: Record<string, number>, prefix: string, values: ReadonlyArray<number>): void => {
  if (values.length === 0) return
  const stats = statistics(values)
  metrics[`${prefix}/mean`] = stats.mean
  metrics[`${prefix}/median`] = stats.median
  metrics[`${prefix}/max`] = stats.max
  metrics[`${prefix}/min`] = stats.min
}

export interface MetricsOptions {
  /** The key of the primary value of an object reward (`--reward-key`, or `--eval-reward-key` in eval). */
  readonly rewardKey?: string | undefined
  /** `--log-passrate`. */
  readonly logPassrate: boolean
  /** Sessions per Group: pass@k is logged for k = 1, 2, 4, … up to it. */
  readonly groupSize: number
}

/**
 * The metrics of one step's samples.
 *
 * **Details**
 * - `rollout/raw_reward`: mean primary reward over the rows that carry a reward.
 * - `rollout/<field>/{mean,median,max,min}`: numeric helper fields of reward objects (numbers, or lists of numbers),
 *   except the primary key, `raw_reward` and keys starting with `_`.
 * - `rollout/passrate/pass@k` (with `logPassrate`, Groups of more than one Session): pass@k where success is a primary
 *   reward of exactly 1, averaged over Groups, with one representative context per Session (the first of its exports
 *   that carries a reward); a Group with fewer than k such Sessions does not count for that k.
 * - `<field>/{mean,median,max,min}`: top-level numeric metadata fields (finite numbers; booleans are not numbers),
 *   except keys starting with `_` and {@link METADATA_SKIP}; they never overwrite a metric computed above.
 */
export const step = (
  samples: ReadonlyArray<TrainingSample.TrainingSample>,
  options: MetricsOptions
): Result.Result<Record<string, number>, CreditError.RewardError> => {
  const metrics: Record<string, number> = {}
  const primary = new Map<TrainingSample.TrainingSample, number>()
  const helpers = new Map<string, Array<number>>()
  for (const sample of samples) {
    const reward = sample.reward
    if (reward === null) continue
    const value = Reward.primaryValue(reward, options.rewardKey)
    if (Result.isFailure(value)) {
      return Result.fail(
        new CreditError.RewardError({
          sessionId: sample.session_id,
          exportName: sample.export_name,
          detail: value.failure
        })
      )
    }
    primary.set(sample, value.success)
    if (typeof reward === "number") continue
    for (const [key, field] of Object.entries(reward)) {
      if (key.length === 0 || key === options.rewardKey || key === "raw_reward" || key.startsWith("_")) continue
      const numbers = Array.isArray(field) ? field.filter(isFiniteNumber) : isFiniteNumber(field) ? [field] : []
      if (numbers.length === 0) continue
      const list = helpers.get(key) ?? []
      list.push(...numbers)
      helpers.set(key, list)
    }
  }
  if (primary.size > 0) {
    const values = [...primary.values()]
    metrics["rollout/raw_reward"] = values.reduce((sum, value) => sum + value, 0) / values.length
  }
  for (const [key, values] of helpers) addStatistics(metrics, `rollout/${key}`, values)

  if (options.logPassrate && options.groupSize > 1 && primary.size > 0) {
    // Group → Session → the representative's primary value, in first-seen order.
    const groups = new Map<number, Map<string, number>>()
    for (const sample of samples) {
      const value = primary.get(sample)
      if (value === undefined) continue
      const sessions = groups.get(sample.group_index) ?? new Map<string, number>()
      if (!sessions.has(sample.session_id)) sessions.set(sample.session_id, value)
      groups.set(sample.group_index, sessions)
    }
    for (let k = 1; k <= options.groupSize; k *= 2) {
      const estimates: Array<number> = []
      for (const sessions of groups.values()) {
        const n = sessions.size
        if (n < k) continue
        const c = [...sessions.values()].filter((value) => value === 1).length
        estimates.push(passAtK(n, c, k))
      }
      if (estimates.length > 0) {
        metrics[`rollout/passrate/pass@${k}`] = estimates.reduce((sum, value) => sum + value, 0) / estimates.length
      }
    }
  }

  const fields = new Map<string, Array<number>>()
  for (const sample of samples) {
    for (const [key, value] of Object.entries(sample.metadata)) {
      if (key.length === 0 || key.startsWith("_") || METADATA_SKIP.has(key) || !isFiniteNumber(value)) continue
      const list = fields.get(key) ?? []
      list.push(value)
      fields.set(key, list)
    }
  }
  const metadataMetrics: Record<string, number> = {}
  for (const [key, values] of fields) addStatistics(metadataMetrics, key, values)
  for (const [name, value] of Object.entries(metadataMetrics)) {
    if (!Object.hasOwn(metrics, name)) metrics[name] = value
  }
  return Result.succeed(metrics)
}
