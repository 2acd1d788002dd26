/**
 * The checking primitives of canonicalization (src/protocol/Canonical.ts): its error, a checked result, the first
 * failure of a walk, and the Python-shaped views of client JSON the reference's texts name.
 *
 * **Details**
 * Type names in messages are Python's (`<class 'dict'>`) because agents and tests compare the texts
 * (docs/requests.md "Canonical messages").
 */
import { Data, Result, type Schema } from "effect"
import * as JsonValue from "../json/Json.ts"

/**
 * A request whose messages, tools or template kwargs cannot be canonicalized.
 *
 * **Details**
 * `message` is the reference's exact text (e.g. `"messages[2].content must not be empty"`), which gateways return
 * as a 400 body; `param` is the offending field path (`"messages[2].content"`).
 */
export class CanonicalError extends Data.TaggedError("CanonicalError")<{
  readonly message: string
  readonly param: string | null
}> {}

export type Checked<A> = Result.Result<A, CanonicalError>

export const fail = (message: string, param: string | null): Checked<never> =>
  Result.fail(new CanonicalError({ message, param }))

/** `f` over `items` in order; the first failure wins and stops the walk. */
export const traverse = <A, B>(
  items: ReadonlyArray<A>,
  f: (item: A, index: number) => Checked<B>
): Checked<Array<B>> => {
  const out: Array<B> = []
  for (let i = 0; i < items.length; i++) {
    const checked = f(items[i] as A, i)
    if (Result.isFailure(checked)) return Result.fail(checked.failure)
    out.push(checked.success)
  }
  return Result.succeed(out)
}

export type Dict = { readonly [key: string]: unknown }

export const isDict = (value: unknown): value is Dict =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/** Python's `type(value)` text for a JSON-ish JS value: `<class 'dict'>`, `<class 'NoneType'>`, ... */
export const pythonType = (value: unknown): string => `<class '${pythonTypeName(value)}'>`

export const pythonTypeName = (value: unknown): string => {
  if (value === null || value === undefined) return "NoneType"
  if (typeof value === "boolean") return "bool"
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float"
  if (typeof value === "bigint") return "int"
  if (typeof value === "string") return "str"
  if (Array.isArray(value)) return "list"
  if (typeof value === "object") return "dict"
  return typeof value
}

export const has = (dict: Dict, key: string): boolean => Object.prototype.hasOwnProperty.call(dict, key)
export const get = (dict: Dict, key: string): unknown => (has(dict, key) ? dict[key] : undefined)

/** Deep copy of a JSON value given by a client (decoding boundary: the body came from `JSON.parse`). */
export const copyJson = (value: unknown): Schema.Json => JsonValue.copy(value) as Schema.Json
