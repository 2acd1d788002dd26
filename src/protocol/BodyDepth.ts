/**
 * The nesting limit of a request body (`maxJsonDepth`): where a parsed body nests deeper than the limit, checked
 * without allocating for the bodies that stay within it (every request's body is checked).
 *
 * **Details**
 * {@link pathBeyondDepth} gives what `Json.pathBeyondDepth` gives. It first walks the value with two reused stacks and
 * no allocation per value (`Json.pathBeyondDepth` keeps a record per value with its parent and key; figures:
 * docs/performance.md, "Figures behind code comments"); only a value that nests too deep is walked again by
 * `Json.pathBeyondDepth` for its path.
 */
import * as Json from "../json/Json.ts"

// Reused by every call (the walk is synchronous) and emptied before it returns, so no body stays reachable.
const values: Array<object> = []
const depths: Array<number> = []

/** Whether `value` holds an object or array more than `limit` levels deep (an object or array is one level). */
const nestsBeyond = (value: unknown, limit: number): boolean => {
  if (value === null || typeof value !== "object") return false
  values.push(value)
  depths.push(1)
  let beyond = false
  while (values.length > 0) {
    const item = values.pop()!
    const depth = depths.pop()!
    if (depth > limit) {
      beyond = true
      break
    }
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) {
        const child: unknown = item[i]
        if (child !== null && typeof child === "object") {
          values.push(child)
          depths.push(depth + 1)
        }
      }
    } else {
      // Decoding boundary: an object from `JSON.parse` (own enumerable string keys; `for…in` also visits inherited
      // enumerable keys, which can only make this check say "beyond" where the exact walk below then decides).
      const record = item as Readonly<Record<string, unknown>>
      for (const key in record) {
        const child = record[key]
        if (child !== null && typeof child === "object") {
          values.push(child)
          depths.push(depth + 1)
        }
      }
    }
  }
  values.length = 0
  depths.length = 0
  return beyond
}

/**
 * Where a parsed JSON value nests deeper than `limit` levels: the path of the first value found beyond the limit
 * (keys and indices from the root), or `undefined` when it stays within; the same as `Json.pathBeyondDepth`.
 */
export const pathBeyondDepth = (value: unknown, limit: number): ReadonlyArray<string | number> | undefined =>
  nestsBeyond(value, limit) ? Json.pathBeyondDepth(value, limit) : undefined
