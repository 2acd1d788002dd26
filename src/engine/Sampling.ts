/**
 * Sampling from a sparse {@link BigramModel.Distribution} with SGLang's semantics: temperature, then top-k, then top-p.
 *
 * **Details**
 * - `temperature < 1e-6` is greedy: SGLang rewrites it to `temperature = 1, top_k = 1`.
 * - `topK <= 0` (SGLang's `-1`) keeps the whole vocabulary.
 * - top-p keeps the smallest prefix (by probability, ties by id) whose mass reaches `topP` of the top-k mass.
 * - The reported logprob is `log q(id)` where `q ∝ p^(1/T)` is the temperature-scaled distribution over the whole
 *   vocabulary, before top-k/top-p truncation: SGLang's default (`log(probs)` of the sampler's softmax of
 *   `logits / T`). At temperature 1 (and greedy) it is the model's own log-probability.
 */
import { Result } from "effect"
import type * as BigramModel from "./BigramModel.ts"

export interface SamplingParams {
  readonly temperature: number
  readonly topP: number
  /** `-1` (or 0) disables top-k. */
  readonly topK: number
}

/**
 * The sampling of one generate request (the engine port's `SamplingParams`): the distribution's knobs plus the
 * length, the stops and the seed. Pure data, so the configuration (src/config/Settings.ts) derives it without the port.
 */
export interface RequestSampling extends SamplingParams {
  readonly maxNewTokens: number
  readonly stop: ReadonlyArray<string>
  readonly stopTokenIds: ReadonlyArray<number>
  readonly seed?: number | undefined
}

/** A temperature-scaled distribution over the whole vocabulary. */
export interface Scaled {
  readonly ids: ReadonlyArray<number>
  readonly probs: ReadonlyArray<number>
  readonly floor: number
  readonly floorCount: number
  /** `ids` sorted ascending: the ids the floor range skips. */
  readonly elevatedAscending: ReadonlyArray<number>
}

const greedyThreshold = 1e-6

/** The effective (temperature, topK) after SGLang's greedy rewrite. */
export const effective = (params: SamplingParams): { readonly temperature: number; readonly topK: number } =>
  params.temperature < greedyThreshold
    ? { temperature: 1, topK: 1 }
    : { temperature: params.temperature, topK: params.topK }

/** Apply temperature `t` (already past the greedy rewrite) to `distribution`. */
export const scale = (distribution: BigramModel.Distribution, temperature: number): Scaled => {
  const logFloor = Math.log(distribution.floor) / temperature
  const logs = distribution.probs.map((p) => Math.log(p) / temperature)
  const max = logs.reduce((a, b) => Math.max(a, b), logFloor)
  const weights = logs.map((l) => Math.exp(l - max))
  const floorWeight = Math.exp(logFloor - max)
  const total = weights.reduce((a, b) => a + b, 0) + floorWeight * distribution.floorCount
  return {
    ids: distribution.ids,
    probs: weights.map((w) => w / total),
    floor: floorWeight / total,
    floorCount: distribution.floorCount,
    elevatedAscending: [...distribution.ids].sort((a, b) => a - b)
  }
}

/** `log q(id)` under a scaled distribution. */
export const logprob = (scaled: Scaled, id: number): number => {
  const index = scaled.ids.indexOf(id)
  return Math.log(index === -1 ? scaled.floor : (scaled.probs[index] ?? scaled.floor))
}

/** The `j`-th (0-based) id, ascending, among the ids that are not elevated. */
const floorId = (scaled: Scaled, j: number): number => {
  let id = j
  for (const e of scaled.elevatedAscending) {
    if (e <= id) id++
    else break
  }
  return id
}

/** Which part of the sorted vocabulary survives top-k and top-p: a prefix of `ids` plus the first floor ids. */
export interface Kept {
  readonly elevated: number
  readonly floor: number
  readonly mass: number
}

export const truncate = (scaled: Scaled, topK: number, topP: number): Kept => {
  const size = scaled.ids.length + scaled.floorCount
  const k = topK <= 0 ? size : Math.min(topK, size)
  let elevated = Math.min(k, scaled.ids.length)
  let floor = Math.max(0, k - elevated)
  let mass = 0
  for (let i = 0; i < elevated; i++) mass += scaled.probs[i] ?? 0
  mass += floor * scaled.floor
  if (topP >= 1) return { elevated, floor, mass }
  const target = topP * mass
  let cumulative = 0
  for (let i = 0; i < elevated; i++) {
    cumulative += scaled.probs[i] ?? 0
    if (cumulative >= target) return { elevated: i + 1, floor: 0, mass: cumulative }
  }
  const needed = Math.max(1, Math.ceil((target - cumulative) / scaled.floor))
  floor = Math.min(floor, needed)
  return { elevated, floor, mass: cumulative + floor * scaled.floor }
}

/** Sample an id with a uniform `u ∈ [0, 1)`. */
export const sample = (scaled: Scaled, params: SamplingParams, u: number): number => {
  const { topK } = effective(params)
  const kept = truncate(scaled, topK, params.topP)
  const target = u * kept.mass
  let cumulative = 0
  for (let i = 0; i < kept.elevated; i++) {
    cumulative += scaled.probs[i] ?? 0
    if (target < cumulative) return scaled.ids[i] ?? 0
  }
  if (kept.floor === 0) return scaled.ids[kept.elevated - 1] ?? 0
  const j = Math.min(kept.floor - 1, Math.max(0, Math.floor((target - cumulative) / scaled.floor)))
  return floorId(scaled, j)
}

/**
 * SGLang's `SamplingParams.verify` checks: fails with SGLang's message for the first invalid parameter.
 */
export const verify = (params: {
  readonly maxNewTokens: number
  readonly temperature: number
  readonly topP: number
  readonly topK: number
}): Result.Result<void, string> => {
  if (!(params.temperature >= 0)) return Result.fail(`temperature must be non-negative, got ${params.temperature}.`)
  if (!(params.topP > 0 && params.topP <= 1)) return Result.fail(`top_p must be in (0, 1], got ${params.topP}.`)
  if (!(params.topK === -1 || params.topK === 0 || params.topK >= 1) || !Number.isInteger(params.topK)) {
    return Result.fail(`top_k must be -1 (disable), or at least 1, got ${params.topK}.`)
  }
  if (!(params.maxNewTokens >= 0) || !Number.isInteger(params.maxNewTokens)) {
    return Result.fail(`max_new_tokens must be at least 0, got ${params.maxNewTokens}.`)
  }
  return Result.void
}
