/**
 * Token ids kept in 3 bytes each instead of 4: every tokenizer's vocabulary is far below 2^24 ids (Qwen's 151,936,
 * Llama 3's 128,256, Gemma's 262,144), so a long-lived copy of a token sequence can take 3 bytes a token. The
 * SessionForest keeps its nodes' ids this way; the embedded engine's per-session prefix cache shares them.
 *
 * **Details**
 * The 3 bytes of each id are the chars of a one-byte (Latin-1) string: a string's header is 16 bytes of heap, where a
 * `Uint8Array` and its `ArrayBuffer` take ~184 whatever their length (the largest fixed cost of a forest node;
 * docs/performance.md, section 3). Packing falls back to an `Int32Array` (what such copies were before) when an id is
 * not an integer in [0, 2^24), so every reader ({@link at}, {@link unpack}, {@link commonPrefix}, …) sees the value an
 * `Int32Array` copy of the same ids would have held.
 */
import { Buffer } from "node:buffer"

/**
 * A packed id sequence: a one-byte string of 3 chars per id (the id's little-endian bytes), or an `Int32Array` when one
 * id does not fit in 3 bytes.
 */
export type PackedIds = string | Int32Array

const LIMIT = 1 << 24

/**
 * Whether `id` is an integer in [0, 2^24): keeping its low 24 bits gives it back exactly (a negative, fractional,
 * larger or NaN id changes; `-0` packs as 0, which is what an `Int32Array` holds for it).
 */
const fitsOne = (id: number): boolean => (id & (LIMIT - 1)) === id

// Where packing writes the bytes before they become a string: reused up to this size, so packing allocates only the
// string; a longer sequence gets a buffer of its own.
const SCRATCH_LIMIT = 1 << 20
let scratch = Buffer.allocUnsafeSlow(4096)

const bytesFor = (count: number): Buffer => {
  if (count <= scratch.length) return scratch
  if (count > SCRATCH_LIMIT) return Buffer.allocUnsafeSlow(count)
  scratch = Buffer.allocUnsafeSlow(Math.min(SCRATCH_LIMIT, Math.max(count, 2 * scratch.length)))
  return scratch
}

/** The first `count` bytes of `bytes` as a one-byte string of their own (char i = byte i). */
export const latin1 = (bytes: Uint8Array, count: number): string =>
  (bytes instanceof Buffer ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).toString(
    "latin1",
    0,
    count
  )

/**
 * The ids of `parts`, in order, in one packed sequence of its own.
 *
 * **Details**
 * One pass: the ids are checked while they are written in 3 bytes, and packed again in 4 only when one does not fit.
 */
export const pack = (...parts: ReadonlyArray<ArrayLike<number>>): PackedIds => {
  let total = 0
  for (const part of parts) total += part.length
  if (total === 0) return ""
  const bytes = bytesFor(total * 3)
  let b = 0
  for (const part of parts) {
    const n = part.length
    for (let i = 0; i < n; i++, b += 3) {
      const id = part[i] ?? -1
      if (!fitsOne(id)) return packWide(total, parts)
      bytes[b] = id
      bytes[b + 1] = id >>> 8
      bytes[b + 2] = id >>> 16
    }
  }
  return latin1(bytes, b)
}

const packWide = (total: number, parts: ReadonlyArray<ArrayLike<number>>): Int32Array => {
  const wide = new Int32Array(total)
  let offset = 0
  for (const part of parts) {
    wide.set(part, offset)
    offset += part.length
  }
  return wide
}

/** The id whose 3 bytes are the chars of `s` from `c`. */
const idAt = (s: string, c: number): number =>
  s.charCodeAt(c) | (s.charCodeAt(c + 1) << 8) | (s.charCodeAt(c + 2) << 16)

/** How many ids `packed` holds. */
export const length = (packed: PackedIds): number => (typeof packed === "string" ? packed.length / 3 : packed.length)

/** The id at `index` (`undefined` past the end). */
export const at = (packed: PackedIds, index: number): number | undefined => {
  if (typeof packed !== "string") return packed[index]
  const c = 3 * index
  if (index < 0 || c >= packed.length) return undefined
  return idAt(packed, c)
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
  if (typeof packed !== "string") {
    out.set(packed, offset)
    return offset + packed.length
  }
  const n = packed.length
  if (n < SHORT) {
    for (let c = 0; c < n; c += 3, offset++) out[offset] = idAt(packed, c)
    return offset
  }
  // The chars copied out as bytes in one native call (reading them one `charCodeAt` at a time is ~3× slower).
  const bytes = bytesOf(packed, 0, n)
  for (let b = 0; b < n; b += 3, offset++) out[offset] = bytes[b]! | (bytes[b + 1]! << 8) | (bytes[b + 2]! << 16)
  return offset
}

/** Below this many chars, a string is read one `charCodeAt` at a time. */
const SHORT = 96

/** The chars `from`–`to` of a one-byte string as the first bytes of the scratch buffer (or a buffer of their own). */
const bytesOf = (s: string, from: number, to: number): Buffer => {
  const bytes = bytesFor(to - from)
  bytes.write(from === 0 && to === s.length ? s : s.slice(from, to), 0, to - from, "latin1")
  return bytes
}

/** The ids as an `Int32Array` of their own. */
export const unpack = (packed: PackedIds): Int32Array => typeof packed === "string" ? concat([packed]) : packed.slice()

/**
 * How many leading ids `ids` and `packed` have in common; with `from`, the caller knows the first `from` agree (where
 * both reach), and only the ids after them are compared.
 */
export const commonPrefix = (ids: ArrayLike<number>, packed: PackedIds, from = 0): number => {
  const n = Math.min(ids.length, length(packed))
  const i = Math.max(0, Math.min(from, n))
  return typeof packed === "string" ? matchChars(ids, i, n, packed, 0) : matchWide(ids, i, n, packed, 0)
}

/** From `i`, how far (up to `n`) `ids[k]` equals the id of `packed` at `k - start`. */
const matchWide = (ids: ArrayLike<number>, i: number, n: number, packed: Int32Array, start: number): number => {
  while (i < n && ids[i] === packed[i - start]) i++
  return i
}

/** {@link matchWide} for a packed string. */
const matchChars = (ids: ArrayLike<number>, i: number, n: number, packed: string, start: number): number => {
  const from = 3 * (i - start)
  const to = 3 * (n - start)
  if (to - from < SHORT) {
    for (let c = from; i < n; i++, c += 3) if (ids[i] !== idAt(packed, c)) break
    return i
  }
  const bytes = bytesOf(packed, from, to)
  for (let b = 0; i < n; i++, b += 3) if (ids[i] !== (bytes[b]! | (bytes[b + 1]! << 8) | (bytes[b + 2]! << 16))) break
  return i
}

/**
 * A sequence of packed parts held as a chain, last part first: `ids` is the last part, `up` the parts before it (`null`
 * past the first). A SessionForest's lineage is one as it stands (each node's ids and its parent node), so a holder of a
 * prompt as the forest holds it (the embedded engine's prefix cache) keeps one reference to the lineage's last node:
 * no array of its parts per request.
 */
export interface Chain {
  readonly ids: PackedIds
  readonly up: Chain | null
}

/** How many ids the parts of `chain` hold together. */
export const chainLength = (chain: Chain | null): number => {
  let total = 0
  for (let at = chain; at !== null; at = at.up) total += length(at.ids)
  return total
}

// The links of a chain from where a compare starts, last first (reused: a compare calls nothing that compares again).
const links: Array<Chain> = []

/**
 * How many leading ids `ids` and the ids of `chain` (its parts in order, first to last, as one sequence) have in
 * common; with `from`, the caller knows the first `from` agree (where both reach), and only the ids after them are
 * compared.
 *
 * **Details**
 * Only the parts from the one holding id `from` on are visited in order (collected walking up from the last), so a
 * compare that the caller knows agrees up to the last part reads that part alone.
 */
export const commonPrefixOfChain = (ids: ArrayLike<number>, chain: Chain | null, from = 0): number => {
  const total = chainLength(chain)
  const n = Math.min(ids.length, total)
  let i = Math.max(0, Math.min(from, n))
  let start = total
  for (let at = chain; at !== null && start > i; at = at.up) {
    start -= length(at.ids)
    links.push(at)
  }
  let k = links.length - 1
  for (; k >= 0 && i < n; k--) {
    const part = links[k]!.ids
    const end = start + length(part)
    if (i < end) {
      const upTo = Math.min(end, n)
      i = typeof part === "string" ? matchChars(ids, i, upTo, part, start) : matchWide(ids, i, upTo, part, start)
      if (i < upTo) break
    }
    start = end
  }
  links.length = 0
  return i
}
