/**
 * Where the machine's CPU went during a benchmark phase: the measured process's main thread, its other threads (V8's
 * collector helpers, libuv's pool), the load generator's process, and the rest of the machine (other processes), from
 * `process.threadCpuUsage`, `process.cpuUsage`, /proc/<pid>/stat and /proc/stat (Linux). On 2 shared cores a wall-clock
 * stall with the main thread off the CPU is the other columns' time.
 *
 * **Details**
 * /proc readings are 10 ms coarse (clock ticks): phases of a second or more.
 */
import { availableParallelism } from "node:os"
import { performance } from "node:perf_hooks"
import * as ProcessCpu from "./processCpu.ts"

interface Reading {
  readonly wallMs: number
  readonly mainMs: number
  readonly processMs: number
  readonly loadMs: number
  readonly machineMs: number
}

export interface CpuShare {
  readonly wallMs: number
  readonly mainMs: number
  /** The measured process's other threads. */
  readonly helpersMs: number
  readonly loadMs: number
  /** Everything else the machine ran. */
  readonly restMs: number
}

const ms = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000

const read = (loadPid: number | undefined): Reading => ({
  wallMs: performance.now(),
  mainMs: ms(process.threadCpuUsage()),
  processMs: ms(process.cpuUsage()),
  loadMs: loadPid === undefined ? 0 : ProcessCpu.cpuMillis(loadPid),
  machineMs: ProcessCpu.machineCpu().busyMs
})

/** Start measuring; the returned function gives the share since then. */
export const start = (loadPid: number | undefined): () => CpuShare => {
  const from = read(loadPid)
  return () => {
    const to = read(loadPid)
    const processMs = to.processMs - from.processMs
    const mainMs = to.mainMs - from.mainMs
    const loadMs = to.loadMs - from.loadMs
    return {
      wallMs: to.wallMs - from.wallMs,
      mainMs,
      helpersMs: Math.max(0, processMs - mainMs),
      loadMs,
      restMs: Math.max(0, to.machineMs - from.machineMs - processMs - loadMs)
    }
  }
}

/** "2.10 s wall (4.20 s of 2 cores): main thread 1.20 s, its other threads 0.40 s, load generator 1.10 s, rest 0.90 s" */
export const describe = (share: CpuShare): string => {
  const s = (value: number) => `${(value / 1000).toFixed(2)} s`
  const cores = availableParallelism()
  return `${s(share.wallMs)} wall (${s(share.wallMs * cores)} of ${cores} cores): main thread ${s(share.mainMs)}, ` +
    `its other threads ${s(share.helpersMs)}, load generator ${s(share.loadMs)}, rest of the machine ${s(share.restMs)}`
}
