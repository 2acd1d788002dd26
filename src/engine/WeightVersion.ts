/** Weight versions as the engines report them after a weight update. */

/**
 * The version after an update without an explicit one: an integer version counts up (`"3"` → `"4"`); any other
 * version is replaced by the number of updates so far.
 */
export const next = (current: string, updates: number): string => {
  const n = Number(current)
  return Number.isSafeInteger(n) && String(n) === current ? String(n + 1) : String(updates)
}
