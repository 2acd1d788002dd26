/**
 * Buffers of token ids whose views never change once handed out: the forest's kept inference prefix
 * (src/forest/Forest.ts `inferencePrefix`) writes into such a buffer copy on write, so ids a view may hold are never
 * written with other values. A reader that kept a view of one can tell that a later view of the same buffer from the
 * same offset holds the same ids as far as both reach, without comparing them (the embedded engine's prefix cache).
 *
 * **Details**
 * A marked buffer gets a stamp, a number no earlier buffer got, so a reader keeps the stamp (no reference to the
 * buffer: the forest holds its own weakly, for a collection to take an idle Session's). The writer may give a later buffer
 * the same stamp ({@link markAs}) when its ids agree with every view handed out under that stamp as far as each
 * reaches, so a view of either from the same offset agrees with the other's as far as both reach. Only the writer that
 * keeps that promise marks a buffer; any other array (a `number[]`, an `Int32Array` of a caller's own) has no stamp,
 * and a reader compares its ids as before.
 */

const stamps = new WeakMap<ArrayBufferLike, number>()
let stamped = 0

/** Mark the buffer of `ids` as one whose handed-out views never change; returns `ids`. */
export const mark = (ids: Int32Array): Int32Array => {
  stamps.set(ids.buffer, ++stamped)
  return ids
}

/**
 * Mark the buffer of `ids` with `stamp`, an earlier buffer's: only for a buffer whose ids agree with every view handed
 * out under that stamp, from the same offset, as far as each reaches (and stay so); returns `ids`.
 */
export const markAs = (ids: Int32Array, stamp: number): Int32Array => {
  stamps.set(ids.buffer, stamp)
  return ids
}

/** The stamp of the buffer `ids` is a view of: a number of its own when marked by {@link mark}, else 0. */
export const stampOf = (ids: ArrayLike<number>): number => ids instanceof Int32Array ? (stamps.get(ids.buffer) ?? 0) : 0
