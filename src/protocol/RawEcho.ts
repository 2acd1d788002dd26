/**
 * A Chat request's history by its raw bytes: where its `messages` array's last element ends in the body, and whether
 * the body repeats the previous request's history byte for byte (docs/sessionforest.md, "Matching a request").
 *
 * **Details**
 * An agent sends its whole conversation on every request, usually the previous request's messages followed by the
 * answer and one new message, serialized the same way. A {@link Mark} records, for one body, the byte offset just
 * after the last element of its `messages` array, the number of elements before it, and a SHA-256 digest of every
 * byte before that offset. The next body of the Session that has the same bytes up to that offset (same digest)
 * followed by `,` or `]` holds the same first elements, so they canonicalize to the same messages: the gateway reuses
 * them (src/protocol/Canonical.ts `KnownPrefix`) instead of canonicalizing and matching the whole history again, and
 * the SessionForest checks that reuse by identity (`Matching.match`'s `known`). Any difference falls back to full
 * canonicalization.
 *
 * The scanner does not validate: strings are skipped to their closing quote, nesting is counted, and the last
 * top-level `messages` key wins, as `JSON.parse` decides between duplicates (keys are compared after unescaping). A
 * body whose `messages` is not a non-empty array gets no mark. It ends on any bytes and its mark describes a body that
 * `JSON.parse` accepts; the gateway reads a body before parsing it (so src/protocol/EchoBody.ts can parse it without
 * its repeated history) and keeps a mark only for a body that parsed and decoded.
 */
import { createHash, type Hash } from "node:crypto"

/**
 * Where one body's history is: its `messages` array opens at byte `open` (the `[`) and holds `count` elements, the
 * last one ending at byte `end`.
 */
export interface Mark {
  readonly open: number
  readonly end: number
  readonly count: number
  /** SHA-256 (base64) of the body's bytes `[0, end)`. */
  readonly digest: string
}

/** What scanning a body found: its own mark, and whether it starts with the previous mark's bytes. */
export interface Reading {
  readonly mark: Mark | undefined
  /** The body's first `previous.count` messages are byte for byte the previous body's. */
  readonly repeats: boolean
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d

const isSpace = (b: number | undefined): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09

const skipSpace = (bytes: Uint8Array, at: number): number => {
  while (at < bytes.length && isSpace(bytes[at])) at++
  return at
}

/** The end of the string whose opening quote is at `at` (just after its closing quote); -1 when unterminated. */
const skipString = (bytes: Uint8Array, at: number): number => {
  let from = at + 1
  for (;;) {
    const quote = bytes.indexOf(QUOTE, from)
    if (quote < 0) return -1
    let backslashes = 0
    for (let i = quote - 1; i > at && bytes[i] === BACKSLASH; i--) backslashes++
    if (backslashes % 2 === 0) return quote + 1
    from = quote + 1
  }
}

/** The end of the JSON value that starts at `at`; -1 when the body ends first. */
const skipValue = (bytes: Uint8Array, at: number): number => {
  const first = bytes[at]
  if (first === QUOTE) return skipString(bytes, at)
  if (first === OPEN_OBJECT || first === OPEN_ARRAY) {
    let depth = 0
    let i = at
    while (i < bytes.length) {
      const b = bytes[i]
      if (b === QUOTE) {
        i = skipString(bytes, i)
        if (i < 0) return -1
        continue
      }
      if (b === OPEN_OBJECT || b === OPEN_ARRAY) depth++
      else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
        depth--
        if (depth === 0) return i + 1
      }
      i++
    }
    return -1
  }
  let i = at
  while (i < bytes.length) {
    const b = bytes[i]
    if (b === COMMA || b === CLOSE_OBJECT || b === CLOSE_ARRAY || isSpace(b)) break
    i++
  }
  return i > at ? i : -1
}

const MESSAGES = Buffer.from("messages")

/** Whether the key string at `[start, end)` (quotes included) reads `messages` once unescaped. */
const isMessagesKey = (bytes: Uint8Array, start: number, end: number): boolean => {
  if (end - start === MESSAGES.length + 2) {
    for (let i = 0; i < MESSAGES.length; i++) if (bytes[start + 1 + i] !== MESSAGES[i]) return false
    return true
  }
  if (bytes.subarray(start, end).indexOf(BACKSLASH) < 0) return false
  try {
    return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString("utf8")) === "messages"
  } catch {
    return false
  }
}

/** The elements of an array from `at` (after `[`, or after `count` elements ending at `lastEnd`) to its `]`. */
const scanElements = (
  bytes: Uint8Array,
  at: number,
  count: number,
  lastEnd: number
): { readonly count: number; readonly lastEnd: number; readonly close: number } | undefined => {
  let i = skipSpace(bytes, at)
  for (;;) {
    if (bytes[i] === CLOSE_ARRAY) return { count, lastEnd, close: i + 1 }
    if (count > 0) {
      if (bytes[i] !== COMMA) return undefined
      i = skipSpace(bytes, i + 1)
    }
    const end = skipValue(bytes, i)
    if (end < 0) return undefined
    count++
    lastEnd = end
    i = skipSpace(bytes, end)
  }
}

/**
 * The members of the top-level object from `at` (after `{`, or after a member) to its `}`: `onMessages` is called with
 * where each `messages` value starts and returns where it ends (-1: give up); every other value is skipped.
 */
const scanMembers = (
  bytes: Uint8Array,
  at: number,
  first: boolean,
  onMessages: (valueAt: number) => number
): boolean => {
  let i = skipSpace(bytes, at)
  for (;;) {
    if (bytes[i] === CLOSE_OBJECT) return true
    if (!first) {
      if (bytes[i] !== COMMA) return false
      i = skipSpace(bytes, i + 1)
    }
    first = false
    if (bytes[i] !== QUOTE) return false
    const keyEnd = skipString(bytes, i)
    if (keyEnd < 0) return false
    const messages = isMessagesKey(bytes, i, keyEnd)
    i = skipSpace(bytes, keyEnd)
    if (bytes[i] !== COLON) return false
    i = skipSpace(bytes, i + 1)
    const end = messages ? onMessages(i) : skipValue(bytes, i)
    if (end < 0) return false
    i = skipSpace(bytes, end)
  }
}

const digestOf = (hash: Hash): string => hash.digest("base64")

/** The mark of a body scanned from its start (no previous mark to continue from). */
const markWhole = (bytes: Uint8Array): Mark | undefined => {
  const open = skipSpace(bytes, 0)
  if (bytes[open] !== OPEN_OBJECT) return undefined
  let found: { readonly count: number; readonly lastEnd: number; readonly open: number } | undefined
  const whole = scanMembers(bytes, open + 1, true, (valueAt) => {
    if (bytes[valueAt] !== OPEN_ARRAY) {
      found = undefined
      return skipValue(bytes, valueAt)
    }
    const elements = scanElements(bytes, valueAt + 1, 0, -1)
    if (elements === undefined) return -1
    found = elements.count > 0 ? { count: elements.count, lastEnd: elements.lastEnd, open: valueAt } : undefined
    return elements.close
  })
  if (!whole || found === undefined) return undefined
  return {
    open: found.open,
    end: found.lastEnd,
    count: found.count,
    digest: digestOf(createHash("sha256").update(bytes.subarray(0, found.lastEnd)))
  }
}

/**
 * Scan a body that `JSON.parse` accepted: its {@link Mark}, and whether it repeats `previous`'s bytes (then only the
 * bytes after them are scanned; the digest of the repeated bytes is one native SHA-256 pass).
 */
export const read = (bytes: Uint8Array, previous: Mark | undefined): Reading => {
  if (previous !== undefined && bytes.length > previous.end) {
    const next = bytes[skipSpace(bytes, previous.end)]
    if (next === COMMA || next === CLOSE_ARRAY) {
      const hash = createHash("sha256").update(bytes.subarray(0, previous.end))
      if (digestOf(hash.copy()) === previous.digest) {
        const elements = scanElements(bytes, previous.end, previous.count, previous.end)
        // A later top-level `messages` key would be the one JSON.parse keeps: then nothing is reused.
        const last = elements !== undefined && scanMembers(bytes, elements.close, false, () => -1)
        if (elements !== undefined && last) {
          hash.update(bytes.subarray(previous.end, elements.lastEnd))
          return {
            mark: { open: previous.open, end: elements.lastEnd, count: elements.count, digest: digestOf(hash) },
            repeats: true
          }
        }
        return { mark: undefined, repeats: false }
      }
    }
  }
  return { mark: markWhole(bytes), repeats: false }
}
