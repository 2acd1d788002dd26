/**
 * Backend request ids. SGLang aborts every request whose rid *starts with* the given rid, so all rids have the same
 * length: then one can only be a prefix of another by being equal to it.
 */
import { Buffer } from "node:buffer"
import { hash } from "node:crypto"

/** Length of every rid: `relax-` and 32 lowercase hex characters. */
export const length = 38

/** Which engine attempt of which model request a rid names. */
export interface RidInput {
  readonly sessionId: string
  /** The parent state hash the request generates from. */
  readonly parent: string
  /** 0-based index of the model request within the Session. */
  readonly turn: number
  /** 0 for the first attempt, n for the n-th resume after an engine abort. */
  readonly attempt: number
}

const prefix = "relax-"
/** Where a rid is written: the prefix once, the digits per rid (they are read out at once, so one buffer serves all). */
const text = Buffer.alloc(length)
text.write(prefix, 0, "latin1")

/**
 * The rid of one engine attempt: `relax-` and the first 32 hex digits of the SHA-256 of session, parent, turn and
 * (from the first resume on) attempt. Deterministic, so a retried request reuses its rid.
 */
export const forAttempt = (input: RidInput): string => {
  const hex = hash(
    "sha256",
    `${input.sessionId}\u0000${input.parent}\u0000${input.turn}${input.attempt === 0 ? "" : `\u0000${input.attempt}`}`,
    "hex"
  )
  // One flat string of its own, read out of a buffer that holds the prefix: `"relax-" + hex.slice(0, 32)` is a
  // concatenation over a slice that keeps the whole 64-digit hex string alive (144 bytes where this is 56), and a
  // forest's response keeps its rid. The digest as hex text and this buffer's two native calls cost what that
  // concatenation did; a digest `Buffer` and a buffer of its own per rid cost ~3× (docs/performance.md, "Issue 41,
  // seventh pass").
  text.write(hex, prefix.length, length - prefix.length, "latin1")
  return text.toString("latin1", 0, length)
}

/** Whether `rid` has the fixed rid shape. */
export const isValid = (rid: string): boolean => /^relax-[0-9a-f]{32}$/.test(rid)

/**
 * The rid of the `n`-th re-send (1–9) of an attempt whose rid SGLang still holds (a retry after a broken connection
 * that hits "Duplicate request ID detected"): `rid` + `-r<n>`. It starts with `rid`, so an abort of the attempt's rid
 * (prefix match) stops it too; of two retry rids neither is a prefix of the other.
 */
export const retry = (rid: string, n: number): string => `${rid}-r${Math.min(9, Math.max(1, n))}`
