/**
 * The JSON text of a `/generate` prompt's ids (`1,2,3`, without the brackets), kept per Session so that the next
 * prompt, which almost always extends the last one by the turn's new ids, writes only the digits of those.
 *
 * **Details**
 * A prompt is thousands of ids and its digits are written on every turn (src/engine/sglang/SglangWire.ts). Here the text of a
 * Session's last prompt is kept with the ids it encodes; a prompt that starts with those ids copies that text and
 * writes the rest. Whether it starts with them is decided in constant time when both are views of the same buffer at
 * the same offset and that buffer is one whose handed-out views never change (src/ids/StableIds.ts: the forest's
 * inference prefix), else by comparing the ids. Anything else (another branch, a shorter
 * prompt, an id outside 0–99,999,999) writes the whole text. What is kept (the texts and the ids they encode) is
 * bounded by `maxBytes` in all, least recently used first out; a Session's is dropped when it ends
 * ({@link IdsTextCache.forget}). The SGLang engine writes each prompt's text once, into the `/generate` body itself
 * ({@link IdsTextCache.head}, then src/engine/sglang/SglangWire.ts `encodeGenerateBody`), and keeps that view of the body
 * ({@link IdsTextCache.keep}); {@link IdsTextCache.text} gives a text of its own.
 */

import * as StableIds from "../../ids/StableIds.ts"

/** What is kept for one Session: the ids its last prompt had and their text. */
interface Kept {
  readonly ids: ArrayLike<number>
  readonly text: Uint8Array
  /** What it counts against the bound. */
  readonly weight: number
}

/**
 * Where a prompt's ids text starts: the kept text of its first `from` ids, the rest to be written after it
 * ({@link IdsTextCache.head}; `from` 0 and an empty text: the whole text is written).
 */
export interface Head {
  readonly text: Uint8Array
  readonly from: number
}

/** Two ASCII digits per value 0–99. */
const digitPairs = Uint8Array.from({ length: 200 }, (_, i) => 48 + (i % 2 === 0 ? Math.floor(i / 20) : (i >> 1) % 10))

/** Whether `value` is written digit by digit: an integer 0–99,999,999, a token id (-0 too, written "0" as JSON does). */
export const isPlainId = (value: number): boolean => value >= 0 && value <= 99_999_999 && Number.isInteger(value)

/** Write a plain id (see {@link isPlainId}) as ASCII digits at `at`, digit pair by digit pair; returns the end. */
export const writeId = (bytes: Uint8Array, at: number, value: number): number => {
  const length = value < 10 ? 1 : value < 100 ? 2 : value < 1_000 ? 3 : value < 10_000 ? 4 : value < 100_000 ?
    5 :
    value < 1_000_000
    ? 6
    : value < 10_000_000
    ? 7
    : 8
  let end = at + length
  let rest = value
  while (rest >= 100) {
    const quotient = Math.floor(rest / 100)
    const pair = (rest - quotient * 100) * 2
    bytes[--end] = digitPairs[pair + 1]!
    bytes[--end] = digitPairs[pair]!
    rest = quotient
  }
  if (rest >= 10) {
    bytes[--end] = digitPairs[rest * 2 + 1]!
    bytes[--end] = digitPairs[rest * 2]!
  } else bytes[--end] = 48 + rest
  return at + length
}

/**
 * The text of `ids[from..]` after `head` (the text of `ids[..from]`), or `undefined` when an id is not a plain one.
 */
const extend = (head: Uint8Array, ids: ArrayLike<number>, from: number): Uint8Array | undefined => {
  const bytes = new Uint8Array(head.length + (ids.length - from) * 9)
  bytes.set(head, 0)
  let at = head.length
  for (let i = from; i < ids.length; i++) {
    const id = ids[i]!
    if (!isPlainId(id)) return undefined
    if (i > 0) bytes[at++] = 44 // ,
    at = writeId(bytes, at, id)
  }
  return bytes.subarray(0, at)
}

const empty = new Uint8Array(0)

const noHead: Head = { text: empty, from: 0 }

/** Whether `ids` starts with every id of `kept`. */
const startsWith = (ids: ArrayLike<number>, kept: ArrayLike<number>): boolean => {
  if (ids.length < kept.length) return false
  // Views of one buffer whose handed-out views never change (src/ids/StableIds.ts), from the same offset.
  if (
    ids instanceof Int32Array && kept instanceof Int32Array && ids.buffer === kept.buffer &&
    ids.byteOffset === kept.byteOffset && StableIds.stampOf(ids) !== 0
  ) return true
  for (let i = 0; i < kept.length; i++) if (ids[i] !== kept[i]) return false
  return true
}

/** What a kept entry holds alive: its text, and its ids (4 bytes each, as the forest's buffer holds them). */
const weight = (ids: ArrayLike<number>, text: Uint8Array): number => text.length + ids.length * 4

/** The ids' text per Session (see the module's details). */
export class IdsTextCache {
  private readonly kept = new Map<string, Kept>()
  private bytes = 0

  private readonly maxBytes: number

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes
  }

  /**
   * The text of `ids` for Session `key` (`undefined`: no Session, nothing kept), reusing the text of its last prompt
   * when `ids` extends it; `undefined` when an id is not a plain one (the caller writes the whole body itself).
   */
  text(key: string | undefined, ids: ArrayLike<number>): Uint8Array | undefined {
    const last = key === undefined ? undefined : this.kept.get(key)
    const reuse = last !== undefined && startsWith(ids, last.ids)
    const text = reuse ? extend(last.text, ids, last.ids.length) : extend(empty, ids, 0)
    if (key === undefined) return text
    this.drop(key)
    if (text !== undefined) this.put(key, ids, text, weight(ids, text))
    return text
  }

  /**
   * What the text of `ids` for Session `key` starts with: the text of its last prompt when `ids` extends it, else
   * nothing. The caller writes the rest after it (src/engine/sglang/SglangWire.ts `encodeGenerateBody`) and hands the whole text
   * back with {@link keep}.
   */
  head(key: string | undefined, ids: ArrayLike<number>): Head {
    const last = key === undefined ? undefined : this.kept.get(key)
    return last !== undefined && startsWith(ids, last.ids) ? { text: last.text, from: last.ids.length } : noHead
  }

  /**
   * Keep `text`, the JSON text of `ids` (without brackets) as the caller wrote it, as Session `key`'s last prompt
   * (nothing for no Session). `text` may be a view of a larger buffer that is never written again (the `/generate`
   * body it was written into): it counts the whole buffer, which it holds alive.
   */
  keep(key: string | undefined, ids: ArrayLike<number>, text: Uint8Array): void {
    if (key === undefined) return
    this.drop(key)
    this.put(key, ids, text, text.buffer.byteLength + ids.length * 4)
  }

  private put(key: string, ids: ArrayLike<number>, text: Uint8Array, w: number): void {
    if (w > this.maxBytes) return
    // A stable view is kept as it is; any other array is copied, since its owner may rewrite it in place.
    this.kept.set(key, { ids: StableIds.stampOf(ids) !== 0 ? ids : Int32Array.from(ids), text, weight: w })
    this.bytes += w
    for (const [oldest, kept] of this.kept) {
      if (this.bytes <= this.maxBytes) break
      this.kept.delete(oldest)
      this.bytes -= kept.weight
    }
  }

  /** Drop what is kept for Session `key` (it ended). */
  forget(key: string): void {
    this.drop(key)
  }

  /** Bytes kept in all: the texts and their ids (tests). */
  get size(): number {
    return this.bytes
  }

  private drop(key: string): void {
    const kept = this.kept.get(key)
    if (kept === undefined) return
    this.kept.delete(key)
    this.bytes -= kept.weight
  }
}
