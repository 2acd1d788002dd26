/**
 * What a thrown value says: its message and its Node error code, for a value caught as `unknown`.
 *
 * **Details**
 * A leaf: it imports nothing of the project, so any module can use it without importing the error index
 * (src/errors.ts) and, through it, every concern's errors.
 */

/** The text of a thrown value: an `Error`'s message, anything else as `String` writes it. */
export const messageOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** The `code` of a Node error (`ENOENT`, `ERR_MODULE_NOT_FOUND`, …), or `undefined` when it has none. */
export const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined
