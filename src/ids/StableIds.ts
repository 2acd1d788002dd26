/**
 * Buffers of token ids whose views never change once handed out: the forest's kept inference prefix
 * (src/forest/Forest.ts `inferencePrefix`) writes into such a buffer copy on write, so ids a view may hold are never
 * written with other values. A reader that kept a view of one can tell that a later view of the same buffer from the
 * same offset holds the same ids as far as both reach, without comparing them (the embedded engine's prefix cache).
 *
 * **Details**
 * Only the writer that keeps that promise marks a buffer; any other array (a `number[]`, an `Int32Array` of a caller's
 * own) is not stable, and a reader compares its ids as before.
 */

const stable = new WeakSet<ArrayBufferLike>()

/** Mark the buffer of `ids` as one whose handed-out views never change; returns `ids`. */
export const mark = (ids: Int32Array): Int32Array => {
  stable.add(ids.buffer)
  return ids
}

/** Whether `ids` is a view of a buffer marked by {@link mark}. */
export const isStable = (ids: ArrayLike<number>): ids is Int32Array =>
  ids instanceof Int32Array && stable.has(ids.buffer)
