/**
 * Event-loop stalls with their cause: every gap above a threshold between two turns of a 5 ms timer, and how much of
 * it the garbage collector took (PerformanceObserver "gc" entries overlapping the gap). What is not GC is JavaScript
 * and Node's own I/O work on the main thread (accepting, parsing, writing); a CPU profile splits those.
 *
 * **Details**
 * The timer and the GC entries use the same clock (`performance.now`). A GC entry's duration counts only the part
 * inside the gap. Minor GCs (scavenges) run on the main thread too and count as GC.
 */
import { constants, type PerformanceEntry, PerformanceObserver, performance } from "node:perf_hooks"

/** One gap between timer turns longer than the threshold. */
export interface Stall {
  readonly startMs: number
  readonly durationMs: number
  /** Milliseconds of the gap spent in garbage collection (all kinds). */
  readonly gcMs: number
  /** Of which major (mark-compact) collections. */
  readonly majorGcMs: number
}

export interface StallWatch {
  /** Forget earlier stalls and GC entries. */
  readonly reset: () => void
  /** Stalls since the last reset, longest first (GC entries are delivered asynchronously: await a turn first). */
  readonly stalls: () => ReadonlyArray<Stall>
  readonly stop: () => void
}

const TICK_MS = 5

export const watchStalls = (thresholdMs = 50): StallWatch => {
  let gaps: Array<{ readonly startMs: number; readonly durationMs: number }> = []
  let gcs: Array<{ readonly startMs: number; readonly endMs: number; readonly major: boolean }> = []
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    // The timer was due TICK_MS after the last turn; anything beyond that is time the loop did not come round.
    if (now - last - TICK_MS > thresholdMs) gaps.push({ startMs: last, durationMs: now - last - TICK_MS })
    last = now
  }, TICK_MS)
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries() as Array<PerformanceEntry & { readonly detail?: { readonly kind?: number } }>) {
      gcs.push({
        startMs: entry.startTime,
        endMs: entry.startTime + entry.duration,
        major: entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR
      })
    }
  })
  observer.observe({ entryTypes: ["gc"] })
  return {
    reset: () => {
      gaps = []
      gcs = []
      last = performance.now()
    },
    stalls: () =>
      gaps.map((gap) => {
        const end = gap.startMs + gap.durationMs + TICK_MS
        let gcMs = 0
        let majorGcMs = 0
        for (const gc of gcs) {
          const overlap = Math.min(end, gc.endMs) - Math.max(gap.startMs, gc.startMs)
          if (overlap > 0) {
            gcMs += overlap
            if (gc.major) majorGcMs += overlap
          }
        }
        return { ...gap, gcMs, majorGcMs }
      }).sort((a, b) => b.durationMs - a.durationMs),
    stop: () => {
      clearInterval(timer)
      observer.disconnect()
    }
  }
}

/** "3 stalls > 50 ms, longest 120 ms (GC 80 ms, of it major 70 ms); all together 300 ms, GC 150 ms". */
export const describeStalls = (stalls: ReadonlyArray<Stall>, thresholdMs = 50): string => {
  const [longest] = stalls
  if (longest === undefined) return `none > ${thresholdMs} ms`
  const total = stalls.reduce((sum, s) => sum + s.durationMs, 0)
  const gc = stalls.reduce((sum, s) => sum + s.gcMs, 0)
  const ms = (value: number) => `${value.toFixed(0)} ms`
  return `${stalls.length} > ${thresholdMs} ms; longest ${ms(longest.durationMs)} (GC ${ms(longest.gcMs)}, major ` +
    `${ms(longest.majorGcMs)}); all ${ms(total)}, GC ${ms(gc)}`
}
