/**
 * What every benchmark shares: side-by-side timing, the result shape `run.ts` prints, and a garbage collector for
 * memory deltas.
 *
 * **Details**
 * Candidates of one comparison run in alternating rounds (A, B, C, A, B, C, …) and report the median round, so a
 * noisy neighbour on the shared cores slows every candidate alike instead of skewing one ratio.
 */
import { Session } from "node:inspector"
import { performance } from "node:perf_hooks"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

/** One printed table: a title, rows of named cells, and one line per ratio saying what it means. */
export interface BenchResult {
  readonly title: string
  readonly rows: ReadonlyArray<Readonly<Record<string, string>>>
  readonly notes: ReadonlyArray<string>
}

/** How a benchmark run was asked for: `full` (`npm run bench full`) runs the larger sizes. */
export interface BenchOptions {
  readonly full: boolean
}

/** A benchmark: a short name (selectable on the command line) and how to run it. */
export interface Bench {
  readonly name: string
  readonly run: (options: BenchOptions) => Promise<BenchResult>
}

/** A synchronous operation to time; its return value is kept alive so the work cannot be optimized away. */
export interface Candidate {
  readonly name: string
  readonly run: () => unknown
}

let _sink: unknown
/** Keeps a value reachable (defeats dead-code elimination of benchmarked calls). */
export const consume = (value: unknown): void => {
  _sink = value
}

/** The median (mean of the middle two for an even count; 0 for none). */
export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] ?? 0 : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2
}

/** The `p`-th percentile (0–100, nearest rank; NaN for none). */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN
}

/**
 * Milliseconds per call of each candidate, measured side by side.
 *
 * **Details**
 * Each candidate is warmed up for `warmupMs`, its iteration count per round is sized so a round lasts about
 * `roundMs`, then `rounds` rounds alternate between candidates; the result is the median round's time per call.
 */
export const compare = (
  candidates: ReadonlyArray<Candidate>,
  options: { readonly rounds?: number; readonly roundMs?: number; readonly warmupMs?: number } = {}
): ReadonlyMap<string, number> => {
  const rounds = options.rounds ?? 5
  const roundMs = options.roundMs ?? 12
  const warmupMs = options.warmupMs ?? 25
  const iterations = new Map<string, number>()
  for (const candidate of candidates) {
    const start = performance.now()
    let calls = 0
    while (calls < 2 || performance.now() - start < warmupMs) {
      consume(candidate.run())
      calls++
    }
    const perCall = (performance.now() - start) / calls
    iterations.set(candidate.name, Math.max(1, Math.round(roundMs / perCall)))
  }
  const samples = new Map<string, Array<number>>(candidates.map((c) => [c.name, []]))
  for (let round = 0; round < rounds; round++) {
    for (const candidate of candidates) {
      const n = iterations.get(candidate.name) ?? 1
      const start = performance.now()
      for (let i = 0; i < n; i++) consume(candidate.run())
      samples.get(candidate.name)?.push((performance.now() - start) / n)
    }
  }
  return new Map(candidates.map((c) => [c.name, median(samples.get(c.name) ?? [])]))
}

/** A duration in milliseconds, printed with a unit that keeps three significant digits. */
export const formatMs = (ms: number): string => {
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`
  if (ms >= 1) return `${ms.toPrecision(3)} ms`
  return `${(ms * 1000).toPrecision(3)} µs`
}

/** A ratio as `12.3×`. */
export const formatRatio = (ratio: number): string =>
  `${ratio >= 100 ? ratio.toFixed(0) : ratio >= 10 ? ratio.toFixed(1) : ratio.toFixed(2)}×`

/** A byte count with a binary unit. */
export const formatBytes = (bytes: number): string => {
  if (Math.abs(bytes) >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
  if (Math.abs(bytes) >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`
  return `${bytes.toFixed(0)} B`
}

/**
 * A full garbage collection: `global.gc` when node runs with `--expose-gc`, otherwise the same function obtained by
 * enabling the flag at run time; `undefined` if neither works (memory numbers are then noisier).
 */
export const garbageCollector = (): (() => void) | undefined => {
  const exposed: unknown = Reflect.get(globalThis, "gc")
  if (typeof exposed === "function") return () => void Reflect.apply(exposed, undefined, [])
  try {
    setFlagsFromString("--expose-gc")
    const gc: unknown = runInNewContext("gc")
    if (typeof gc === "function") return () => void Reflect.apply(gc, undefined, [])
  } catch {
    // The flag cannot be set in this runtime: report without forced collections.
  }
  return undefined
}

/** Heap + off-heap bytes in use (typed-array backing stores live off the V8 heap). */
export const usedBytes = (): number => {
  const usage = process.memoryUsage()
  return usage.heapUsed + usage.external
}

/** Print a result as an aligned table followed by its notes. */
export const printResult = (result: BenchResult, elapsedMs: number): void => {
  const columns = [...new Set(result.rows.flatMap((row) => Object.keys(row)))]
  const widths = columns.map((column) =>
    Math.max(column.length, ...result.rows.map((row) => (row[column] ?? "").length))
  )
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join("  ")
  console.log(`\n## ${result.title}  (${formatMs(elapsedMs)})`)
  console.log(line(columns))
  console.log(line(widths.map((w) => "-".repeat(w))))
  for (const row of result.rows) console.log(line(columns.map((column) => row[column] ?? "")))
  for (const note of result.notes) console.log(`  · ${note}`)
}

/** Bytes allocated by `calls` calls of `run` (sampled every 256 bytes, objects collected meanwhile included). */
export const allocatedBytes = (run: () => unknown, calls: number): number => {
  const session = new Session()
  session.connect()
  let total = Number.NaN
  // An in-process inspector session answers synchronously.
  session.post("HeapProfiler.startSampling", {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true
  })
  for (let i = 0; i < calls; i++) run()
  session.post("HeapProfiler.stopSampling", (error, result) => {
    if (error !== null) return
    let sum = 0
    const walk = (node: { readonly selfSize: number; readonly children: ReadonlyArray<typeof node> }): void => {
      sum += node.selfSize
      for (const child of node.children) walk(child)
    }
    walk(result.profile.head)
    total = sum
  })
  session.disconnect()
  return total / calls
}
