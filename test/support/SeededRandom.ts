/**
 * The one seeded pseudo-random source of the tests (mulberry32): the same seed gives the same sequence on every run
 * and machine, so a generated case that fails reproduces. Property tests with shrinking use fast-check instead.
 */
import * as Dataset from "../../src/schedule/Dataset.ts"

/** Numbers in [0, 1) from `seed` (the dataset shuffle's generator, src/schedule/Dataset.ts). */
export const floats = (seed: number): () => number => Dataset.seededRandom(seed)

/** Integers in [0, bound) from `seed`. */
export const ints = (seed: number): (bound: number) => number => {
  const next = floats(seed)
  return (bound) => Math.floor(next() * bound)
}

/** A source with the usual draws: a number in [0, 1), an integer below a bound, a chance, an item of a list. */
export const make = (seed: number) => {
  const next = floats(seed)
  const int = (below: number): number => Math.floor(next() * below)
  return {
    next,
    int,
    chance: (p: number): boolean => next() < p,
    pick: <A>(items: ReadonlyArray<A>): A => {
      const item = items[int(items.length)]
      if (item === undefined) throw new Error("pick from an empty list")
      return item
    }
  }
}
