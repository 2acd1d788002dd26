/**
 * Schemas of the bulk of a dump (token ids, loss masks, logprobs, metadata), checked in one pass each.
 *
 * **Details**
 * A 10,000-Session dump holds millions of numbers; decoding each array element by element through a general
 * `Schema.Array(Schema.Int)` takes longer than parsing the JSON. These declarations check the same things (an array,
 * every element an integer or a finite number) in one pass, and fail with the expected type like any Schema.
 */
import { Schema } from "effect"

const everyInt = (u: unknown): u is ReadonlyArray<number> => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!Number.isInteger(u[i])) return false
  return true
}

const everyNumber = (u: unknown): u is ReadonlyArray<number> => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (typeof u[i] !== "number") return false
  return true
}

const isObject = (u: unknown): u is { readonly [key: string]: Schema.Json } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * A JSON object whose members are not read (a record's `metadata`: `JSON.parse` made it, so it is JSON; walking it
 * again member by member costs as much as the rest of the record).
 */
export const JsonObject = Schema.declare(isObject, { expected: "a JSON object" })

/** An array of integers (token ids, loss masks). */
export const Ints = Schema.declare(everyInt, { expected: "an array of integers" })

/** An array of numbers (logprobs). */
export const Numbers = Schema.declare(everyNumber, { expected: "an array of numbers" })
