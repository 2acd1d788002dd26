/**
 * Backend request ids. SGLang aborts every request whose rid *starts with* the given rid, so all rids have the same
 * length: then one can only be a prefix of another by being equal to it.
 */
import { randomBytes } from "node:crypto"

/** Length of every rid (32 lowercase hex characters, 128 random bits). */
export const length = 32

/** A fresh random rid. */
export const make = (): string => randomBytes(16).toString("hex")

/** Whether `rid` has the fixed rid shape. */
export const isValid = (rid: string): boolean => /^[0-9a-f]{32}$/.test(rid)
