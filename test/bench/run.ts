/**
 * Runs the benchmarks and prints one table per benchmark: `npm run bench` (all, quick sizes), `npm run bench full`
 * (the sizes docs/performance.md reports), or `npm run bench -- floor history` (only those named: memory, prefix, forest,
 * delta, gateway, lifecycle, floor, history, sessions, simulation, spawn, inspect, cluster, failover, controller, heapsteps, vision,
 * admission).
 *
 * **Details**
 * Benchmarks print ratios measured side by side in one run; they assert no timings. Memory numbers force garbage
 * collections: with `node --expose-gc test/bench/run.ts` they use `global.gc`, otherwise the collector is
 * enabled at run time (see `garbageCollector` in harness.ts). Servers listen on 127.0.0.1 port 0 only; the load
 * generator and the SGLang stand-in of the transport benchmarks run in child processes (child.ts).
 */
import { availableParallelism, cpus } from "node:os"
import { performance } from "node:perf_hooks"
import * as Admission from "./admission.ts"
import * as Cluster from "./cluster.ts"
import * as ClusterFailover from "./clusterFailover.ts"
import * as Controller from "./controller.ts"
import * as ForestMemory from "./forestMemory.ts"
import * as ForestRequest from "./forestRequest.ts"
import * as Gateway from "./gateway.ts"
import * as Harness from "./harness.ts"
import * as HeapSteps from "./heapSteps.ts"
import * as Inspect from "./inspect.ts"
import * as Lifecycle from "./lifecycle.ts"
import * as ObservationDelta from "./observationDelta.ts"
import * as PrefixMatch from "./prefixMatch.ts"
import * as Sessions from "./sessions.ts"
import * as Simulation from "./simulation.ts"
import * as Spawn from "./spawn.ts"
import * as Transport from "./transport.ts"
import * as Vision from "./vision.ts"

// Memory benchmarks first: their heap deltas are cleanest before the other benchmarks have grown the heap.
const all: ReadonlyArray<Harness.Bench> = [
  ForestMemory.bench,
  Sessions.bench,
  PrefixMatch.bench,
  ForestRequest.bench,
  ObservationDelta.bench,
  Gateway.bench,
  Lifecycle.bench,
  Transport.floorBenchmark,
  Transport.historyBenchmark,
  Simulation.bench,
  Spawn.bench,
  Inspect.bench,
  Cluster.bench,
  ClusterFailover.bench,
  Controller.bench,
  HeapSteps.bench,
  Vision.bench,
  Admission.bench
]

const main = async (): Promise<void> => {
  const args = process.argv.slice(2)
  const full = args.includes("full") || args.includes("--full")
  const wanted = args.filter((arg) => arg !== "full" && arg !== "--full")
  const unknown = wanted.filter((name) => !all.some((b) => b.name === name))
  if (unknown.length > 0) {
    throw new Error(`unknown benchmark ${unknown.join(", ")}; choose from ${all.map((b) => b.name).join(", ")}`)
  }
  const selected = wanted.length === 0 ? all : all.filter((b) => wanted.includes(b.name))
  console.log(
    `relax-agentic benchmarks (${
      full ? "full" : "quick; `npm run bench full` for the documented sizes"
    }) — node ${process.version}, ` +
      `${process.platform}/${process.arch}, ${availableParallelism()} cores (${cpus()[0]?.model ?? "unknown cpu"})`
  )
  const started = performance.now()
  for (const b of selected) {
    const start = performance.now()
    const result = await b.run({ full })
    Harness.printResult(result, performance.now() - start)
  }
  console.log(`\nall benchmarks: ${Harness.formatMs(performance.now() - started)}`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
