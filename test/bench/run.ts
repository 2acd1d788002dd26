/**
 * Runs the benchmarks and prints one table per benchmark: `npm run bench` (all), or `npm run bench -- prefix gateway`
 * (only those named: prefix, delta, gateway, memory, lifecycle).
 *
 * **Details**
 * Benchmarks print ratios measured side by side in one run; they assert no timings. Memory numbers force garbage
 * collections: with `node --expose-gc --import tsx test/bench/run.ts` they use `global.gc`, otherwise the collector is
 * enabled at run time (see `garbageCollector` in harness.ts). Everything runs in this process; the gateway bench
 * listens on 127.0.0.1 port 0 only.
 */
import { performance } from "node:perf_hooks"
import { bench as delta } from "./observationDelta.ts"
import { bench as gateway } from "./gateway.ts"
import { type Bench, formatMs, printResult } from "./harness.ts"
import { bench as memory } from "./forestMemory.ts"
import { bench as lifecycle } from "./lifecycle.ts"
import { bench as prefix } from "./prefixMatch.ts"

// Memory first: its heap deltas are cleanest before the other benchmarks have grown the heap.
const all: ReadonlyArray<Bench> = [memory, prefix, delta, gateway, lifecycle]

const main = async (): Promise<void> => {
  const wanted = process.argv.slice(2)
  const unknown = wanted.filter((name) => !all.some((b) => b.name === name))
  if (unknown.length > 0) {
    throw new Error(`unknown benchmark ${unknown.join(", ")}; choose from ${all.map((b) => b.name).join(", ")}`)
  }
  const selected = wanted.length === 0 ? all : all.filter((b) => wanted.includes(b.name))
  console.log(`relax-agentic benchmarks — node ${process.version}, ${process.platform}/${process.arch}`)
  const started = performance.now()
  for (const b of selected) {
    const start = performance.now()
    const result = await b.run()
    printResult(result, performance.now() - start)
  }
  console.log(`\nall benchmarks: ${formatMs(performance.now() - started)}`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
