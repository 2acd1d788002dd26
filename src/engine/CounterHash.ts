/**
 * Counter-based hashing for the embedded model: every random quantity is a pure function of (seed, keys), so a
 * generation can be replayed, scored or resumed without carrying generator state.
 */

/** 32-bit avalanche mix (murmur3 finalizer). */
const fmix32 = (h: number): number => {
  let x = h >>> 0
  x ^= x >>> 16
  x = Math.imul(x, 0x85ebca6b)
  x ^= x >>> 13
  x = Math.imul(x, 0xc2b2ae35)
  x ^= x >>> 16
  return x >>> 0
}

/** An unsigned 32-bit hash of `seed` and `keys` (integers; non-integers are truncated to 32 bits). */
export const hash32 = (seed: number, ...keys: ReadonlyArray<number>): number => {
  let h = fmix32((seed | 0) ^ 0x9e3779b9)
  for (const key of keys) {
    h = fmix32(h ^ Math.imul((key | 0) ^ 0x7f4a7c15, 0x27d4eb2d))
    // Large keys (e.g. 53-bit seeds) also contribute their high bits.
    const high = Math.floor(key / 0x1_0000_0000)
    if (high !== 0) h = fmix32(h ^ Math.imul(high | 0, 0x165667b1))
  }
  return h
}

/** A uniform number in [0, 1) with 53 random bits, a pure function of `seed` and `keys`. */
export const uniform = (seed: number, ...keys: ReadonlyArray<number>): number => {
  const hi = hash32(seed, ...keys, 0x51ed27) >>> 5 // 27 bits
  const lo = hash32(seed, ...keys, 0x2f6b1d) >>> 6 // 26 bits
  return (hi * 67108864 + lo) / 9007199254740992
}

/** A 32-bit hash of a string (FNV-1a), for deriving seeds from names. */
export const hashString = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return fmix32(h)
}
