/**
 * Token ids kept in 3 bytes each instead of 4: every tokenizer's vocabulary is far below 2^24 ids (Qwen's 151,936,
 * Llama 3's 128,256, Gemma's 262,144), so a long-lived copy of a token sequence can take 3 bytes a token.
 *
 * **Details**
 * {@link pack} falls back to an `Int32Array` (what such copies were before) when an id is not an integer in
 * [0, 2^24), so {@link at} and {@link commonPrefix} always see the value an `Int32Array` would have kept.
 */

/** A packed id sequence: 3 little-endian bytes per id, or 4 (`Int32Array`) when one id does not fit in 3. */
export type PackedIds = Uint8Array | Int32Array

const LIMIT = 1 << 24

const fits = (ids: ArrayLike<number>): boolean => {
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] ?? -1
    if (!(id >= 0 && id < LIMIT && Number.isInteger(id))) return false
  }
  return true
}

/** The ids of `parts`, in order, in one packed sequence. */
export const pack = (...parts: ReadonlyArray<ArrayLike<number>>): PackedIds => {
  const total = parts.reduce((sum, part) => sum + part.length, 0)
  if (!parts.every(fits)) {
    const wide = new Int32Array(total)
    let offset = 0
    for (const part of parts) {
      wide.set(part, offset)
      offset += part.length
    }
    return wide
  }
  const bytes = new Uint8Array(total * 3)
  let at = 0
  for (const part of parts) {
    for (let i = 0; i < part.length; i++) {
      const id = part[i] ?? 0
      bytes[at] = id & 0xff
      bytes[at + 1] = (id >>> 8) & 0xff
      bytes[at + 2] = id >>> 16
      at += 3
    }
  }
  return bytes
}

/** How many ids `packed` holds. */
export const length = (packed: PackedIds): number => (packed instanceof Int32Array ? packed.length : packed.length / 3)

/** The id at `index` (`undefined` past the end). */
export const at = (packed: PackedIds, index: number): number | undefined => {
  if (packed instanceof Int32Array) return packed[index]
  const b = 3 * index
  if (index < 0 || b >= packed.length) return undefined
  return (packed[b] ?? 0) | ((packed[b + 1] ?? 0) << 8) | ((packed[b + 2] ?? 0) << 16)
}

/** How many leading ids `ids` and `packed` have in common. */
export const commonPrefix = (ids: ArrayLike<number>, packed: PackedIds): number => {
  const n = Math.min(ids.length, length(packed))
  let i = 0
  if (packed instanceof Int32Array) {
    while (i < n && ids[i] === packed[i]) i++
    return i
  }
  for (let b = 0; i < n; i++, b += 3) {
    const id = (packed[b] ?? 0) | ((packed[b + 1] ?? 0) << 8) | ((packed[b + 2] ?? 0) << 16)
    if (ids[i] !== id) break
  }
  return i
}
