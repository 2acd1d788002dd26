// The `heapsteps` benchmark's probe, preloaded into a relax-agentic process (`NODE_OPTIONS=--import=<this file>`): it
// measures the retained heap after forced full collections at every step end and prints one line to stderr,
// `HEAPPROBE n=<k> used=<bytes> external=<bytes>`.
//
// A step end is a `event=accounting_end` line the process itself prints (the rollout / the controller), or a SIGUSR2
// (a cluster runner prints no step lines: the benchmark signals it when the controller's step ends).
// HEAPPROBE_SNAPSHOTS=5,40 also writes a heap snapshot at those measurements into HEAPPROBE_DIR (default: cwd).
import { writeSync } from "node:fs"
import { join } from "node:path"
import { getHeapStatistics, setFlagsFromString, writeHeapSnapshot } from "node:v8"
import { runInNewContext } from "node:vm"

// Agents and other children of this process inherit the environment: keep the probe out of theirs.
process.env.NODE_OPTIONS = (process.env.NODE_OPTIONS ?? "").split(" ").filter((o) => !o.includes("heapProbe")).join(" ")

const gc = (() => {
  if (typeof globalThis.gc === "function") return globalThis.gc
  setFlagsFromString("--expose-gc")
  return runInNewContext("gc")
})()
const snapshots = new Set((process.env.HEAPPROBE_SNAPSHOTS ?? "").split(",").filter((s) => s !== "").map(Number))
const dir = process.env.HEAPPROBE_DIR ?? process.cwd()
let measured = 0

const measure = () => {
  measured++
  // Two collections: the first may leave objects whose finalizers or weak callbacks the second frees.
  gc()
  gc()
  const used = getHeapStatistics().used_heap_size
  const external = process.memoryUsage().external
  // The snapshot before the line: a benchmark that has seen the line may end the process.
  if (snapshots.has(measured)) writeHeapSnapshot(join(dir, `heap-${process.pid}-${measured}.heapsnapshot`))
  writeSync(2, `HEAPPROBE n=${measured} used=${used} external=${external}\n`)
}

const write = process.stdout.write
process.stdout.write = function(chunk, ...rest) {
  const result = write.call(this, chunk, ...rest)
  if (String(chunk).includes("event=accounting_end")) measure()
  return result
}
process.on("SIGUSR2", measure)
