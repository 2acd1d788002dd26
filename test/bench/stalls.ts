/**
 * Event-loop stalls with their cause: every gap above a threshold between two turns of a 5 ms timer, and how much of
 * it the garbage collector took (PerformanceObserver "gc" entries overlapping the gap). What is not GC is JavaScript
 * and Node's own I/O work on the main thread (accepting, parsing, writing); a CPU profile splits those.
 *
 * **Details**
 * The timer and the GC entries use the same clock (`performance.now`). A GC entry's duration counts only the part
 * inside the gap. Minor GCs (scavenges) run on the main thread too and count as GC. The main thread's own CPU time
 * during the gap (`process.threadCpuUsage`) tells a busy loop from a process the OS did not run (the 2 shared cores
 * of the benchmark machine): `offCpuMs` is the part of the gap the main thread spent off the CPU.
 */
import { constants, performance, type PerformanceEntry, PerformanceObserver } from "node:perf_hooks"

/** One gap between timer turns longer than the threshold. */
export interface Stall {
  readonly startMs: number
  readonly durationMs: number
  /** Milliseconds of the gap spent in garbage collection (all kinds). */
  readonly gcMs: number
  /** Of which major (mark-compact) collections. */
  readonly majorGcMs: number
  /** Milliseconds of the gap the main thread was not on a CPU (descheduled, or blocked in a system call). */
  readonly offCpuMs: number
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
  let gaps: Array<{ readonly startMs: number; readonly durationMs: number; readonly cpuMs: number }> = []
  let gcs: Array<{ readonly startMs: number; readonly endMs: number; readonly major: boolean }> = []
  const threadCpuMs = () => {
    const usage = process.threadCpuUsage()
    return (usage.user + usage.system) / 1000
  }
  let last = performance.now()
  let lastCpu = threadCpuMs()
  const timer = setInterval(() => {
    const now = performance.now()
    const cpu = threadCpuMs()
    // The timer was due TICK_MS after the last turn; anything beyond that is time the loop did not come round.
    if (now - last - TICK_MS > thresholdMs) {
      gaps.push({ startMs: last, durationMs: now - last - TICK_MS, cpuMs: cpu - lastCpu })
    }
    last = now
    lastCpu = cpu
  }, TICK_MS)
  const observer = new PerformanceObserver((list) => {
    for (
      const entry of list.getEntries() as Array<PerformanceEntry & { readonly detail?: { readonly kind?: number } }>
    ) {
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
      lastCpu = threadCpuMs()
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
        const { cpuMs, ...window } = gap
        return { ...window, gcMs, majorGcMs, offCpuMs: Math.max(0, gap.durationMs + TICK_MS - cpuMs) }
      }).sort((a, b) => b.durationMs - a.durationMs),
    stop: () => {
      clearInterval(timer)
      observer.disconnect()
    }
  }
}

/**
 * "3 > 50 ms; longest 120 ms (GC 80 ms, major 70 ms, off-CPU 10 ms); all 300 ms, GC 150 ms, off-CPU 40 ms; most on-CPU
 * in one 110 ms": the last is the longest stretch of the process's own work (the gap less its off-CPU time).
 */
/**
 * Stalls whose `startMs` is on the wall clock (`performance.timeOrigin` added) as `startUs` on the clock of this
 * process's CPU profile (V8's monotonic microseconds), for test/bench/profile/stalls.mjs.
 */
export const onProfileClock = (stalls: ReadonlyArray<Stall>, phase: string) => {
  const offsetUs = Number(process.hrtime.bigint() / 1000n) - (performance.timeOrigin + performance.now()) * 1000
  return stalls.map((stall) => ({ phase, ...stall, startUs: stall.startMs * 1000 + offsetUs }))
}

export const describeStalls = (stalls: ReadonlyArray<Stall>, thresholdMs = 50): string => {
  const [longest] = stalls
  if (longest === undefined) return `none > ${thresholdMs} ms`
  const total = stalls.reduce((sum, s) => sum + s.durationMs, 0)
  const gc = stalls.reduce((sum, s) => sum + s.gcMs, 0)
  const off = stalls.reduce((sum, s) => sum + s.offCpuMs, 0)
  const onCpu = Math.max(...stalls.map((s) => s.durationMs - s.offCpuMs))
  const ms = (value: number) => `${value.toFixed(0)} ms`
  return `${stalls.length} > ${thresholdMs} ms; longest ${ms(longest.durationMs)} (GC ${ms(longest.gcMs)}, major ` +
    `${ms(longest.majorGcMs)}, off-CPU ${ms(longest.offCpuMs)}); all ${ms(total)}, GC ${ms(gc)}, off-CPU ${ms(off)}; ` +
    `most on-CPU in one ${ms(onCpu)}`
}
