/**
 * Token-by-token decoding with the embedded model: sampling a next token, and teacher-forced scoring of given ids.
 *
 * **Details**
 * The uniform draw for the token at sequence position `i` (its index in prompt ++ output) is `CounterHash.uniform(seed, i)`,
 * so a generation is a pure function of (model, prompt, sampling, seed): replaying it, recomputing its logprobs or
 * resuming it from prompt ++ partial output needs no generator state.
 */
import type * as BigramModel from "./BigramModel.ts"
import * as CounterHash from "./CounterHash.ts"
import * as Sampling from "./Sampling.ts"

export interface Step {
  readonly id: number
  /** Log-probability under the temperature-scaled distribution (see Sampling). */
  readonly logprob: number
}

/**
 * The last temperature-scaled form of each distribution (the model keeps its distributions per previous id, so the
 * same objects come back): `Sampling.scale` is a pure function of the distribution and the temperature, and scaling
 * allocates several arrays, once per generated or scored token without this.
 */
const scaledCache = new WeakMap<
  BigramModel.Distribution,
  { readonly temperature: number; readonly scaled: Sampling.Scaled }
>()

/** `Sampling.scale` of the distribution following `prev`, memoized per distribution and temperature. */
export const scaledAfter = (model: BigramModel.Model, prev: number, temperature: number): Sampling.Scaled => {
  const distribution = model.distribution(prev)
  const cached = scaledCache.get(distribution)
  if (cached !== undefined && Object.is(cached.temperature, temperature)) return cached.scaled
  const scaled = Sampling.scale(distribution, temperature)
  scaledCache.set(distribution, { temperature, scaled })
  return scaled
}

/** The token at sequence position `position` (prompt length + output index), following `prev`. */
export const next = (
  model: BigramModel.Model,
  params: Sampling.SamplingParams,
  seed: number,
  prev: number,
  position: number
): Step => {
  const scaled = scaledAfter(model, prev, Sampling.effective(params).temperature)
  const id = Sampling.sample(scaled, params, CounterHash.uniform(seed, position))
  return { id, logprob: Sampling.logprob(scaled, id) }
}

/** Logprobs of `ids` generated after `prev` (teacher forcing), under the same scaled distributions. */
export const score = (
  model: BigramModel.Model,
  params: Sampling.SamplingParams,
  prev: number,
  ids: ReadonlyArray<number>
): ReadonlyArray<number> => {
  const temperature = Sampling.effective(params).temperature
  const out: Array<number> = []
  let previous = prev
  for (const id of ids) {
    out.push(Sampling.logprob(scaledAfter(model, previous, temperature), id))
    previous = id
  }
  return out
}

/** The per-request seed: the engine seed mixed with the request's seed or, without one, a request counter. */
export const requestSeed = (engineSeed: number, seed: number | undefined, counter: number): number =>
  seed === undefined ? CounterHash.hash32(engineSeed, 1, counter) : CounterHash.hash32(engineSeed, 0, seed)
