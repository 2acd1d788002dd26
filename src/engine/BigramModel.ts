/**
 * The embedded engine's language model: a seeded bigram categorical model over a tokenizer's whole vocabulary.
 *
 * **Details**
 * `p(next | prev) = α · favoured(prev)[next] + β · [next = eos] + γ / V` with `α = 1 − β − γ`:
 * - `favoured(prev)` is a Zipf distribution over `favouredCount` distinct ids drawn from `favouredPool` by a hash of
 *   `(seed, prev)` (the pool is usually the word-like tokens, so sampled text reads like words);
 * - `β` (`eosProbability`) is the end-of-turn probability per step;
 * - `γ / V` (`floorProbability` spread uniformly) gives every id of the vocabulary a non-zero probability, so any
 *   text, e.g. a policy's output, has a finite log-probability.
 *
 * A distribution is sparse: a few "elevated" ids (favoured ids and eos) and one shared floor probability for all the
 * others, which lets temperature, top-k and top-p be applied exactly without materializing the vocabulary.
 */
import * as CounterHash from "./CounterHash.ts"

export interface ModelOptions {
  readonly seed: number
  readonly vocabSize: number
  readonly eosTokenId: number
  /** Ids the favoured sets are drawn from (default: every id but eos). */
  readonly favouredPool?: ReadonlyArray<number> | undefined
  /** Size of each favoured set (default 24). */
  readonly favouredCount?: number | undefined
  /** End-of-turn probability per step (default 0.03). */
  readonly eosProbability?: number | undefined
  /** Probability mass spread uniformly over the vocabulary (default 0.02). */
  readonly floorProbability?: number | undefined
  /** Zipf exponent of the favoured distribution (default 1.1). */
  readonly zipfExponent?: number | undefined
}

/** A sparse next-token distribution. */
export interface Distribution {
  /** Elevated ids, by probability descending (ties: id ascending). */
  readonly ids: ReadonlyArray<number>
  readonly probs: ReadonlyArray<number>
  /** The probability of every id not in `ids`. */
  readonly floor: number
  /** How many ids have the floor probability (`vocabSize − ids.length`). */
  readonly floorCount: number
}

export interface Model {
  readonly seed: number
  readonly vocabSize: number
  readonly eosTokenId: number
  /** The distribution of the token following `prev`. */
  readonly distribution: (prev: number) => Distribution
}

/** Probability of `id` under `distribution`. */
export const probability = (distribution: Distribution, id: number): number => {
  const index = distribution.ids.indexOf(id)
  return index === -1 ? distribution.floor : (distribution.probs[index] ?? distribution.floor)
}

/** The model's (temperature 1) log-probability of `id` following `prev`. */
export const logProbability = (model: Model, prev: number, id: number): number =>
  Math.log(probability(model.distribution(prev), id))

const cacheLimit = 8192

/** Build a model; throws a `RangeError` on inconsistent options (a programming error, not user input). */
export const make = (options: ModelOptions): Model => {
  const { seed, vocabSize, eosTokenId } = options
  const eosProbability = options.eosProbability ?? 0.03
  const floorProbability = options.floorProbability ?? 0.02
  const zipf = options.zipfExponent ?? 1.1
  if (!(vocabSize > 1) || eosTokenId < 0 || eosTokenId >= vocabSize) {
    throw new RangeError(`model: eosTokenId ${eosTokenId} must be inside a vocabulary of size ${vocabSize}`)
  }
  if (!(eosProbability >= 0 && floorProbability > 0 && eosProbability + floorProbability < 1)) {
    throw new RangeError("model: need eosProbability >= 0, floorProbability > 0 and their sum < 1")
  }
  const pool = (options.favouredPool ?? Array.from({ length: vocabSize }, (_, id) => id))
    .filter((id) => id !== eosTokenId && id >= 0 && id < vocabSize)
  const count = Math.min(options.favouredCount ?? 24, pool.length)
  const weights = Array.from({ length: count }, (_, rank) => Math.pow(rank + 1, -zipf))
  const weightSum = weights.reduce((a, b) => a + b, 0)
  const favouredMass = 1 - eosProbability - floorProbability
  const floor = floorProbability / vocabSize
  const cache = new Map<number, Distribution>()

  const compute = (prev: number): Distribution => {
    const chosen = new Set<number>()
    for (let attempt = 0; chosen.size < count; attempt++) {
      const id = pool[CounterHash.hash32(seed, prev, attempt) % pool.length]
      if (id !== undefined) chosen.add(id)
    }
    const entries: Array<readonly [number, number]> = [...chosen].map((id, rank) => [
      id,
      favouredMass * (weights[rank] ?? 0) / weightSum + floor
    ])
    if (eosProbability > 0) entries.push([eosTokenId, eosProbability + floor])
    entries.sort((a, b) => b[1] - a[1] || a[0] - b[0])
    return {
      ids: entries.map((e) => e[0]),
      probs: entries.map((e) => e[1]),
      floor,
      floorCount: vocabSize - entries.length
    }
  }

  return {
    seed,
    vocabSize,
    eosTokenId,
    distribution: (prev) => {
      let found = cache.get(prev)
      if (found === undefined) {
        if (cache.size >= cacheLimit) cache.clear()
        found = compute(prev)
        cache.set(prev, found)
      }
      return found
    }
  }
}
