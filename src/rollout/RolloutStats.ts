/**
 * The rollout statistics a Relax user already has on their dashboard, computed from one step's (or one Eval
 * dataset's) samples: stop-reason buckets, turn-count percentiles, truncation, response length, prefix-cache hits,
 * images and staleness (docs/outputs.md "Rollout statistics").
 *
 * **Details**
 * Keys come without a prefix (`stop_reason/completed/count`, `num_turn/p90`, ...): a training step logs them under
 * `rollout/`, an Eval dataset under `eval/<dataset>/` ({@link withPrefix}). The rules follow Relax's
 * `test_rollout_metadata_stats`: all 13 stop-reason buckets are always present; `metadata.rollout_stop_reason` wins
 * over `metadata.stop_reason`; a stripped value matches a bucket exactly, `env_error:...` counts as `env_error`, another
 * string as `other`, and a missing, non-string or blank value as `unknown`. `num_turn` reads `metadata.rollout_turns`
 * (a non-negative integer, else 1). Prefix-cache statistics sum the per-turn `cached_tokens` / `prompt_tokens` that
 * `metadata.agentic_trace.turns` carries when the engine reported them (SGLang's `cached_tokens`); without any they
 * are left out. Staleness (`rollout_id − start_rollout_id`) is reported only when asked (partial rollout, fully async).
 */
import type * as TrainingSample from "../forest/TrainingSample.ts"
import * as Json from "../json/Json.ts"
import * as Statistics from "../stats/Statistics.ts"

/** Relax's stop-reason buckets, in its order. */
export const STOP_REASON_BUCKETS = [
  "budget_exhausted",
  "completed",
  "context_exhausted",
  "discarded_by_pipeline",
  "env_done",
  "env_error",
  "finish_abort",
  "finish_length",
  "format_error",
  "llm_unavailable",
  "max_turns",
  "other",
  "unknown"
] as const
export type StopReasonBucket = typeof STOP_REASON_BUCKETS[number]

const BUCKETS: ReadonlySet<string> = new Set(STOP_REASON_BUCKETS)

/** The bucket of a sample's metadata (`rollout_stop_reason` first, then `stop_reason`). */
export const stopReasonBucket = (metadata: Readonly<Record<string, unknown>>): StopReasonBucket => {
  const raw = metadata["rollout_stop_reason"] ?? metadata["stop_reason"]
  if (typeof raw !== "string") return "unknown"
  const value = raw.trim()
  if (value.length === 0) return "unknown"
  if (BUCKETS.has(value)) return value as StopReasonBucket
  if (value.startsWith("env_error:")) return "env_error"
  return "other"
}

const turnCount = (metadata: Readonly<Record<string, unknown>>): number => {
  const value = metadata["rollout_turns"]
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : 1
}

/** The summed `cached_tokens` / `prompt_tokens` of a sample's turns, or undefined when no turn reports them. */
export const prefixCacheOf = (
  sample: TrainingSample.TrainingSample
): { readonly cachedTokens: number; readonly promptTokens: number } | undefined => {
  const trace = sample.metadata["agentic_trace"]
  const turns = Json.isObject(trace) ? trace["turns"] : undefined
  if (!Array.isArray(turns)) return undefined
  let cachedTokens = 0
  let promptTokens = 0
  let reported = false
  for (const turn of turns) {
    if (!Json.isObject(turn)) continue
    const cached = turn["cached_tokens"]
    const prompt = turn["prompt_tokens"]
    if (typeof cached !== "number" || typeof prompt !== "number") continue
    cachedTokens += cached
    promptTokens += prompt
    reported = true
  }
  return reported ? { cachedTokens, promptTokens } : undefined
}

export interface StatsOptions {
  /** Report `staleness/{avg,min,max}` (`--partial-rollout` or `--fully-async`). */
  readonly staleness: boolean
}

/**
 * The statistics of one step's or one Eval dataset's samples, unprefixed. Empty for no samples.
 *
 * **Details**
 * `stop_reason/<bucket>/{count,ratio}` (all buckets), `num_turn/{min,mean,max,p50,p90,p95,p99}`, `truncated_ratio`
 * (status `truncated`), `response_len/mean` (`response_length`), `prefix_cache_hit_rate` (Σ cached / Σ prompt tokens)
 * and `avg_cached_tokens_per_sample` (Σ cached / samples) when any turn reports them, `image_count/max`
 * (`multimodal_inputs.images`), `global_batch_size` (the samples), and `staleness/{avg,min,max}` when asked.
 */
export const compute = (
  samples: ReadonlyArray<TrainingSample.TrainingSample>,
  options: StatsOptions
): Record<string, number> => {
  const metrics: Record<string, number> = {}
  const n = samples.length
  if (n === 0) return metrics
  const counts = new Map<StopReasonBucket, number>(STOP_REASON_BUCKETS.map((b) => [b, 0]))
  for (const sample of samples) {
    const bucket = stopReasonBucket(sample.metadata)
    counts.set(bucket, (counts.get(bucket) ?? 0) + 1)
  }
  for (const bucket of STOP_REASON_BUCKETS) {
    const count = counts.get(bucket) ?? 0
    metrics[`stop_reason/${bucket}/count`] = count
    metrics[`stop_reason/${bucket}/ratio`] = count / n
  }
  const turns = samples.map((s) => turnCount(s.metadata))
  metrics["num_turn/min"] = Math.min(...turns)
  metrics["num_turn/mean"] = Statistics.mean(turns)
  metrics["num_turn/max"] = Math.max(...turns)
  for (const q of [50, 90, 95, 99]) metrics[`num_turn/p${q}`] = Statistics.percentile(turns, q / 100)
  metrics["truncated_ratio"] = samples.filter((s) => s.status === "truncated").length / n
  metrics["response_len/mean"] = Statistics.mean(samples.map((s) => s.response_length))
  let cached = 0
  let prompt = 0
  let reported = false
  for (const sample of samples) {
    const info = prefixCacheOf(sample)
    if (info === undefined) continue
    cached += info.cachedTokens
    prompt += info.promptTokens
    reported = true
  }
  if (reported) {
    metrics["prefix_cache_hit_rate"] = prompt === 0 ? 0 : cached / prompt
    metrics["avg_cached_tokens_per_sample"] = cached / n
  }
  metrics["image_count/max"] = Math.max(...samples.map((s) => s.multimodal_inputs?.images.length ?? 0))
  metrics["global_batch_size"] = n
  if (options.staleness) {
    const staleness = samples.map((s) => {
      const start = s.metadata["start_rollout_id"]
      return typeof start === "number" ? s.rollout_id - start : 0
    })
    metrics["staleness/avg"] = Statistics.mean(staleness)
    metrics["staleness/min"] = Math.min(...staleness)
    metrics["staleness/max"] = Math.max(...staleness)
  }
  return metrics
}

/** The same metrics under a prefix (`rollout/`, `eval/<dataset>/`). */
export const withPrefix = (prefix: string, metrics: Readonly<Record<string, number>>): Record<string, number> =>
  Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`${prefix}${k}`, v]))
