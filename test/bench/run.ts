/**
 * Runs the benchmarks and prints one table per benchmark: `npm run bench` (all, quick sizes), `npm run bench full`
 * (the sizes docs/performance.md reports), or `npm run bench -- floor history` (only those named: memory, prefix, forest,
 * delta, gateway, lifecycle, floor, history, sessions, simulation, spawn, inspect, cluster).
 *
 * **Details**
 * Benchmarks print ratios measured side by side in one run; they assert no timings. Memory numbers force garbage
 * collections: with `node --expose-gc --import tsx test/bench/run.ts` they use `global.gc`, otherwise the collector is
 * enabled at run time (see `garbageCollector` in harness.ts). Servers listen on 127.0.0.1 port 0 only; the load
 * generator and the SGLang stand-in of the transport benchmarks run in child processes (child.ts).
 */
import { availableParallelism, cpus } from "node:os"
import { performance } from "node:perf_hooks"
import { bench as cluster } from "./cluster.ts"
import { bench as memory } from "./forestMemory.ts"
import { bench as forest } from "./forestRequest.ts"
import { bench as gateway } from "./gateway.ts"
import { type Bench, formatMs, printResult } from "./harness.ts"
import { bench as inspect } from "./inspect.ts"
import { bench as lifecycle } from "./lifecycle.ts"
import { bench as delta } from "./observationDelta.ts"
import { bench as prefix } from "./prefixMatch.ts"
import { bench as sessions } from "./sessions.ts"
import { bench as simulation } from "./simulation.ts"
import { bench as spawn } from "./spawn.ts"
import { floorBenchmark, historyBenchmark } from "./transport.ts"

// Memory benchmarks first: their heap deltas are cleanest before the other benchmarks have grown the heap.
const all: ReadonlyArray<Bench> = [
  memory,
  sessions,
  prefix,
  forest,
  delta,
  gateway,
  lifecycle,
  floorBenchmark,
  historyBenchmark,
  simulation,
  spawn,
  inspect,
  cluster
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
    printResult(result, performance.now() - start)
  }
  console.log(`\nall benchmarks: ${formatMs(performance.now() - started)}`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
