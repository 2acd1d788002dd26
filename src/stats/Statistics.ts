/**
 * The sample statistics that metrics and reports share: the mean and numpy's linearly interpolated percentile
 * (`numpy.percentile`'s default method), so a figure means the same wherever it is printed. Both are 0 for an empty
 * list.
 */

/** Arithmetic mean; 0 for an empty list. */
export const mean = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length

/** The `fraction` (0–1) percentile, interpolated linearly between ranks as numpy does; 0 for an empty list. */
export const percentile = (values: ReadonlyArray<number>, fraction: number): number => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  const rank = (sorted.length - 1) * fraction
  const low = Math.floor(rank)
  const lower = sorted[low]!
  return lower + (sorted[Math.ceil(rank)]! - lower) * (rank - low)
}

/** The median (the mean of the middle two of an even count); 0 for an empty list. */
export const median = (values: ReadonlyArray<number>): number => percentile(values, 0.5)
