/**
 * What the engine continues from at a state of a SessionForest: the token ids of every delta along the lineage (a
 * resumed attempt's pending output after them) and the lineage's images (docs/sessionforest.md).
 *
 * **Details**
 * A conversation going on asks for the prefix of a child of the state it asked for last, so the forest keeps the last
 * prefix ({@link PrefixCache}, on `Forest.prefix`) and extends it in place instead of joining the whole lineage again;
 * {@link copy} is the plain join it replaced, the reference its tests compare with.
 */
import * as PackedIds from "../ids/PackedIds.ts"
import * as StableIds from "../ids/StableIds.ts"
import * as Forest from "./Forest.ts"
import * as Nodes from "./Nodes.ts"

/**
 * @internal A forest's inference prefix, kept between requests ({@link ids}): the ids from the root through
 * `end` are the first `count` of the buffer `ids` holds, whose length is its capacity.
 *
 * **Details**
 * Every view handed out covers at most the first `lent` ids of a buffer stamped `stamp` (src/ids/StableIds.ts), and
 * those are never written with other values again: a call whose ids differ from what a view may hold there writes into
 * a new buffer with a new stamp instead (copy on write), so a prefix a request still holds (an engine waiting with it)
 * stays what it was when asked for, whatever branch asks next. The buffer is held weakly (4 bytes a token and a quarter
 * more room, beside the nodes' own 3): strongly only by the request that holds a view of it, so an idle Session's is
 * garbage to the next full collection, and no forced collection finds it (docs/performance.md, section 3). `end`,
 * `count`, `lent` and `stamp` stay, so the next request's buffer, built again from the lineage, carries on the stamp
 * when it extends `end` (the engine then compares only the new ids).
 */
export interface PrefixCache {
  end: Forest.Node
  count: number
  ids: WeakRef<Int32Array>
  lent: number
  stamp: number
}

const noTail: ArrayLike<number> = []

/** Room for `total` ids and the next ones a request may add in place (a resumed attempt's pending output). */
const prefixRoom = (total: number): number => total + (total >> 2) + 16

/**
 * The token ids the engine continues from at `hash`: every delta along the lineage, in order, followed by `tail` (a
 * resumed attempt's pending output), as one `Int32Array`.
 *
 * **Details**
 * The forest keeps the prefix it last handed out ({@link PrefixCache}, weakly) and extends it in place: a request at a
 * child of the last state asked for (a conversation going on) writes only the new nodes' ids after it, a request on another branch keeps the ids of the states the two share and writes the rest. The result is a
 * view of that buffer; its ids never change after (copy on write: ids a view may hold are never written with other
 * values), but it is the forest's, so a caller must not write into it. Once a collection took it, the buffer is built
 * again from the lineage, under the same stamp when nothing handed out under it can differ (see {@link PrefixCache}). The
 * same ids as {@link copy} (a property test compares the two over random trees).
 */
export const ids = (forest: Forest.Forest, hash: string, tail: ArrayLike<number> = noTail): Int32Array => {
  const leaf = Forest.node(forest, hash)
  const cache = forest.prefix
  const kept = cache?.ids.deref()
  // The nodes from where the kept prefix and `leaf`'s lineage part, down to `leaf` (leaf first), and the ids shared;
  // with no buffer kept, the whole lineage (and whether it goes through the last state asked for).
  const path: Array<Forest.Node> = []
  let keep = 0
  let extendsEnd = false
  if (cache === undefined || kept === undefined) {
    for (let at: Forest.Node | null = leaf; at !== null; at = at.up) {
      if (at === cache?.end) extendsEnd = true
      path.push(at)
    }
  } else {
    let at: Forest.Node | null = leaf
    while (at !== null && at !== cache.end) {
      path.push(at)
      at = at.up
    }
    if (at === cache.end) keep = cache.count
    else {
      // Another branch: walk both up to the deepest state they share.
      path.length = 0
      let a: Forest.Node = leaf
      let b: Forest.Node = cache.end
      let da = Forest.depth(a)
      let db = Forest.depth(b)
      keep = cache.count
      for (; da > db; da--) {
        path.push(a)
        a = a.up!
      }
      for (; db > da; db--) {
        keep -= PackedIds.length(b.ids)
        b = b.up!
      }
      while (a !== b) {
        path.push(a)
        a = a.up!
        keep -= PackedIds.length(b.ids)
        b = b.up!
      }
    }
  }
  let count = keep
  for (const n of path) count += PackedIds.length(n.ids)
  const total = count + tail.length
  let ids = kept
  let lent = cache === undefined ? 0 : cache.lent
  let stamp = cache === undefined ? 0 : cache.stamp
  if (ids === undefined) {
    ids = new Int32Array(prefixRoom(total))
    // What was handed out under the stamp is the last state's lineage ids (no tail past it), and this lineage begins
    // with them: the views agree as far as both reach, so the stamp carries on. Otherwise a stamp of its own.
    if (cache !== undefined && extendsEnd && cache.lent <= cache.count) StableIds.markAs(ids, stamp)
    else {
      StableIds.mark(ids)
      stamp = StableIds.stampOf(ids)
      lent = 0
    }
  } else if (total > ids.length || differs(ids, keep, Math.min(lent, total), path, tail)) {
    // Marked stable: the views it hands out never change (what an engine may rely on to skip comparing them).
    const fresh = StableIds.mark(new Int32Array(prefixRoom(total)))
    if (keep > 0) fresh.set(ids.subarray(0, keep))
    ids = fresh
    stamp = StableIds.stampOf(fresh)
    lent = 0
  }
  let offset = keep
  for (let i = path.length - 1; i >= 0; i--) offset = PackedIds.unpackInto(path[i]!.ids, ids, offset)
  for (let i = 0; i < tail.length; i++) ids[offset + i] = tail[i]!
  lent = Math.max(lent, total)
  if (cache === undefined) forest.prefix = { end: leaf, count, ids: new WeakRef(ids), lent, stamp }
  else {
    if (ids !== kept) cache.ids = new WeakRef(ids)
    cache.end = leaf
    cache.count = count
    cache.lent = lent
    cache.stamp = stamp
  }
  return ids.subarray(0, total)
}

/**
 * Whether writing the ids of `path` (leaf first) and then `tail` into `ids` from `from` would change one of `ids` before
 * `limit` (ids a view handed out may hold).
 */
const differs = (
  ids: Int32Array,
  from: number,
  limit: number,
  path: ReadonlyArray<Forest.Node>,
  tail: ArrayLike<number>
): boolean => {
  let offset = from
  for (let i = path.length - 1; i >= 0 && offset < limit; i--) {
    const part = path[i]!.ids
    const n = Math.min(PackedIds.length(part), limit - offset)
    if (PackedIds.commonPrefix(ids.subarray(offset, offset + n), part) < n) return true
    offset += n
  }
  for (let i = 0; i < tail.length && offset < limit; i++, offset++) if (ids[offset] !== (tail[i]! | 0)) return true
  return false
}

/**
 * {@link ids} as a new `Int32Array` of its own every call ({@link PackedIds.concat} of the lineage's ids):
 * what it was before the forest kept the prefix, kept as the reference its tests compare with.
 */
export const copy = (forest: Forest.Forest, hash: string, tail?: ArrayLike<number>): Int32Array =>
  PackedIds.concat(Forest.lineage(forest, hash).map((node) => node.ids), tail)

/**
 * The ids of {@link ids} at `hash` (and `tail`) as the forest holds them, as a chain ({@link PackedIds.Chain}): the node
 * at `hash` itself (its ids, and its parent's before them, up to the root's: the nodes' own, which never change), or
 * with a tail, one link of `tail` packed after it. What an engine that keeps a prompt after its request keeps instead
 * of a copy (the embedded engine's prefix cache, `Engine.GenerateRequest.inputChain`): one reference, no array of the
 * lineage's parts.
 */
export const chain = (forest: Forest.Forest, hash: string, tail: ArrayLike<number> = noTail): PackedIds.Chain => {
  const leaf: PackedIds.Chain = Forest.node(forest, hash)
  return tail.length > 0 ? { ids: PackedIds.pack(tail), up: leaf } : leaf
}

/**
 * The media the engine needs with {@link ids} at `hash` (SGLang `image_data`): the `image_url` URLs of
 * every observation along the lineage, in prompt order (the reference's `backend_image_data` of the execution prefix).
 */
export const media = (forest: Forest.Forest, hash: string): ReadonlyArray<string> => {
  const leaf = Forest.node(forest, hash)
  const free = forest.mediaFree
  let count = 0
  // Up to the root, or to the state known to have no image along its lineage (none above it either).
  for (let at: Forest.Node | null = leaf; at !== null && at !== free; at = at.up) {
    if (at instanceof Nodes.Observation) count += at.media.length
  }
  if (count === 0) {
    forest.mediaFree = leaf
    return Nodes.noStrings
  }
  const out = new Array<string>(count)
  for (let at: Forest.Node | null = leaf; at !== null; at = at.up) {
    if (!(at instanceof Nodes.Observation)) continue
    const media = at.media
    for (let i = media.length - 1; i >= 0; i--) out[--count] = media[i] as string
  }
  return out
}
