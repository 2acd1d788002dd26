/**
 * The one seeded pseudo-random source of the tests (mulberry32): the same seed gives the same sequence on every run
 * and machine, so a generated case that fails reproduces. Property tests with shrinking use fast-check instead.
 */

/** Numbers in [0, 1) from `seed`. */
export const floats = (seed: number): () => number => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

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
