/**
 * Token ids kept in 3 bytes each instead of 4: every tokenizer's vocabulary is far below 2^24 ids (Qwen's 151,936,
 * Llama 3's 128,256, Gemma's 262,144), so a long-lived copy of a token sequence can take 3 bytes a token. The
 * SessionForest keeps its nodes' ids this way, and the embedded engine its per-session prefix-cache sequence.
 *
 * **Details**
 * Packing falls back to an `Int32Array` (what such copies were before) when an id is not an integer in [0, 2^24),
 * so every reader ({@link at}, {@link unpack}, {@link commonPrefix}, …) sees the value an `Int32Array` copy of the
 * same ids would have held.
 */

/** A packed id sequence: 3 little-endian bytes per id, or 4 (`Int32Array`) when one id does not fit in 3. */
export type PackedIds = Uint8Array | Int32Array

const LIMIT = 1 << 24

/**
 * Whether `id` is an integer in [0, 2^24): keeping its low 24 bits gives it back exactly (a negative, fractional,
 * larger or NaN id changes; `-0` packs as 0, which is what an `Int32Array` holds for it).
 */
const fitsOne = (id: number): boolean => (id & (LIMIT - 1)) === id

/** Whether every id of `ids` packs in 3 bytes. */
export const fits = (ids: ArrayLike<number>): boolean => {
  const n = ids.length
  for (let i = 0; i < n; i++) if (!fitsOne(ids[i] ?? -1)) return false
  return true
}

/** The bytes {@link packInto} takes for `count` ids, 3 or 4 a token as `narrow` (the result of {@link fits}). */
export const byteLength = (count: number, narrow: boolean): number => count * (narrow ? 3 : 4)

/**
 * The ids of `parts`, in order, as a view of `buffer` at `byteOffset` (a multiple of 4 when not `narrow`), where
 * {@link byteLength} bytes are free; `narrow` must be what {@link fits} says of every part.
 */
export const packInto = (
  buffer: ArrayBuffer,
  byteOffset: number,
  narrow: boolean,
  parts: ReadonlyArray<ArrayLike<number>>
): PackedIds => {
  let total = 0
  for (const part of parts) total += part.length
  if (!narrow) {
    const wide = new Int32Array(buffer, byteOffset, total)
    let offset = 0
    for (const part of parts) {
      wide.set(part, offset)
      offset += part.length
    }
    return wide
  }
  const bytes = new Uint8Array(buffer, byteOffset, total * 3)
  let b = 0
  for (const part of parts) b = writeNarrow(bytes, b, part)
  return bytes
}

/** Write `ids` (each one {@link fitsOne}) 3 bytes each into `bytes` from `b`; returns where they end. */
const writeNarrow = (bytes: Uint8Array, b: number, ids: ArrayLike<number>): number => {
  const n = ids.length
  for (let i = 0; i < n; i++, b += 3) {
    const id = ids[i]!
    bytes[b] = id
    bytes[b + 1] = id >>> 8
    bytes[b + 2] = id >>> 16
  }
  return b
}

/**
 * The ids of `parts`, in order, in one packed sequence of its own.
 *
 * **Details**
 * One pass: the ids are checked ({@link fits}) while they are written in 3 bytes, and packed again in 4 only when
 * one does not fit.
 */
export const pack = (...parts: ReadonlyArray<ArrayLike<number>>): PackedIds => {
  let total = 0
  for (const part of parts) total += part.length
  const bytes = new Uint8Array(total * 3)
  let b = 0
  for (const part of parts) {
    const n = part.length
    for (let i = 0; i < n; i++, b += 3) {
      const id = part[i] ?? -1
      if (!fitsOne(id)) return packInto(new ArrayBuffer(byteLength(total, false)), 0, false, parts)
      bytes[b] = id
      bytes[b + 1] = id >>> 8
      bytes[b + 2] = id >>> 16
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

/**
 * The ids of `parts`, in order, followed by `tail`, as one `Int32Array` of their own: what an engine request sends
 * (4 bytes an id, where a `number[]` takes 8).
 */
export const concat = (parts: ReadonlyArray<PackedIds>, tail: ArrayLike<number> = noIds): Int32Array => {
  let total = tail.length
  for (const part of parts) total += length(part)
  const out = new Int32Array(total)
  let offset = 0
  for (const part of parts) offset = unpackInto(part, out, offset)
  for (let i = 0; i < tail.length; i++) out[offset + i] = tail[i]!
  return out
}

const noIds: ArrayLike<number> = []

/** Write the ids of `packed` into `out` from `offset` (room for them there); returns where they end. */
export const unpackInto = (packed: PackedIds, out: Int32Array, offset: number): number => {
  const n = packed.length
  if (packed instanceof Int32Array) {
    out.set(packed, offset)
    return offset + n
  }
  for (let b = 0; b < n; b += 3, offset++) out[offset] = packed[b]! | (packed[b + 1]! << 8) | (packed[b + 2]! << 16)
  return offset
}

/** The ids as an `Int32Array` of their own. */
export const unpack = (packed: PackedIds): Int32Array => {
  if (packed instanceof Int32Array) return packed.slice()
  const out = new Int32Array(packed.length / 3)
  for (let b = 0, i = 0; b < packed.length; b += 3, i++) {
    out[i] = (packed[b] ?? 0) | ((packed[b + 1] ?? 0) << 8) | ((packed[b + 2] ?? 0) << 16)
  }
  return out
}

/**
 * How many leading ids `ids` and `packed` have in common; with `from`, the caller knows the first `from` agree (where
 * both reach), and only the ids after them are compared.
 */
export const commonPrefix = (ids: ArrayLike<number>, packed: PackedIds, from = 0): number => {
  const n = Math.min(ids.length, length(packed))
  let i = Math.max(0, Math.min(from, n))
  if (packed instanceof Int32Array) {
    while (i < n && ids[i] === packed[i]) i++
    return i
  }
  for (let b = 3 * i; i < n; i++, b += 3) {
    if (ids[i] !== (packed[b]! | (packed[b + 1]! << 8) | (packed[b + 2]! << 16))) break
  }
  return i
}

/**
 * A packed sequence with room at its end: its ids are the first `count` of `packed`, whose length is its capacity.
 * What a sequence that is rewritten from some position on (the embedded engine's per-session prefix cache) keeps, so
 * that each rewrite copies only what changed ({@link rewrite}).
 */
export interface Growable {
  readonly packed: PackedIds
  readonly count: number
}

/** The ids of `sequence` as a packed sequence (a view of its buffer: valid until the next {@link rewrite}). */
export const view = (sequence: Growable): PackedIds =>
  sequence.packed instanceof Int32Array
    ? sequence.packed.subarray(0, sequence.count)
    : sequence.packed.subarray(0, sequence.count * 3)

/**
 * The first `keep` ids of `sequence` (none without one) followed by the ids of `parts`: written in place when its
 * buffer has room and holds them at the same width, else into a new buffer with a quarter more room (the `keep` ids
 * copied; a first sequence, none given, exactly as long as its ids). `sequence` is not to be used after. Every reader sees what {@link pack} of the same ids would hold.
 */
export const rewrite = (
  sequence: Growable | undefined,
  keep: number,
  parts: ReadonlyArray<ArrayLike<number>>
): Growable => {
  const kept = sequence === undefined ? 0 : Math.max(0, Math.min(keep, sequence.count))
  let added = 0
  let narrowParts = true
  for (const part of parts) {
    added += part.length
    if (narrowParts && !fits(part)) narrowParts = false
  }
  const count = kept + added
  const old = sequence?.packed
  const narrow = narrowParts && !(old instanceof Int32Array)
  const capacity = old === undefined ? 0 : old instanceof Int32Array ? old.length : old.length / 3
  let packed: PackedIds
  if (old !== undefined && count <= capacity && narrow === !(old instanceof Int32Array)) {
    packed = old
  } else {
    // A first sequence exactly (a Session that holds one turn keeps no room), a grown one with a quarter more.
    const room = sequence === undefined ? count : count + (count >> 2) + 16
    if (narrow) {
      const bytes = new Uint8Array(room * 3)
      if (old !== undefined && !(old instanceof Int32Array)) bytes.set(old.subarray(0, kept * 3))
      packed = bytes
    } else {
      const wide = new Int32Array(room)
      if (old instanceof Int32Array) wide.set(old.subarray(0, kept))
      else if (old !== undefined) wide.set(unpack(old.subarray(0, kept * 3)))
      packed = wide
    }
  }
  if (packed instanceof Int32Array) {
    let offset = kept
    for (const part of parts) {
      packed.set(part, offset)
      offset += part.length
    }
  } else {
    let b = kept * 3
    for (const part of parts) b = writeNarrow(packed, b, part)
  }
  return { packed, count }
}
