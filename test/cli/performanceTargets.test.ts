/**
 * docs/performance.md's generated memory targets (test/bench/targets.ts) against the last full run's output they are
 * generated from (docs/bench/last-full-run.txt): a figure in the table cannot go stale while the file is the last run.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import * as Targets from "../bench/targets.ts"

describe("docs/performance.md targets", () => {
  it("the memory and stall rows are the last full run's figures", () => {
    const doc = readFileSync(Targets.DOC_FILE, "utf8")
    const run = readFileSync(Targets.RUN_FILE, "utf8")
    assert.strictEqual(
      doc,
      Targets.withRows(doc, Targets.memoryRows(run)),
      "the Targets table disagrees with docs/bench/last-full-run.txt: run `node test/bench/targets.ts`"
    )
  })

  it("reads a run's rows as the benchmarks print them", () => {
    const run = [
      "## SessionForest memory (turns × 2k tokens; after full GC)  (20.05 s)",
      "turns  layout  stored tokens  ids held  bytes  bytes/token  rss delta",
      "50     SessionForest (deltas + messages + float32 logprobs)  100000  100000  1.1 MiB  9.8  640.0 KiB",
      "50     SessionForest (deltas + messages + float64 logprobs)  100000  100000  1.1 MiB  11.9  0 B",
      "200    SessionForest (deltas + messages + float32 logprobs)  400000  400000  3.8 MiB  10.2  4.6 MiB",
      "200    SessionForest (deltas + messages + float64 logprobs)  400000  400000  4.6 MiB  11.8  1.5 MiB",
      "",
      "## 10,000 concurrent Sessions in one process (held streaming requests, 1 s heartbeats)  (66.70 s)",
      "bytes per stored token (target ≤ 12)                 11.9",
      "  of which the forest                                  8.2",
      "  of which the embedded engine's prefix cache          3.7",
      "longest stall while requests arrive                  41 ms",
      "longest stall while held (3 s)                     12.3 ms",
      "longest stall during one 1 MB message                 1.2 s",
      "longest stall while released and answered            30 ms",
      "stalls while requests arrive (count, GC share)       2 > 50 ms; longest 61 ms (GC 40 ms, major 0 ms, off-CPU " +
      "30 ms); all 112 ms, GC 70 ms, off-CPU 55 ms; most on-CPU in one 31 ms",
      "stalls while held                                    none > 50 ms",
      "stalls during the 1 MB message                       1 > 50 ms; longest 1200 ms (GC 0 ms, major 0 ms, " +
      "off-CPU 10 ms); all 1200 ms, GC 0 ms, off-CPU 10 ms; most on-CPU in one 1190 ms",
      "stalls while released                                none > 50 ms"
    ].join("\n")
    const rows = Targets.memoryRows(run)
    assert.include(rows[2], "11.9 B/token")
    assert.include(rows[2], "the forest 8.2, the embedded engine's prefix cache 3.7 | yes |")
    assert.include(rows[3], "50 / 200 turns: 9.8 / 10.2 with float32")
    assert.include(rows[3], "11.9 / 11.8 with float64")
    assert.isTrue(rows[3]?.endsWith("| no (float32) |"))
    assert.include(rows[4], "1 MB message 1.2 s, release 30 ms;")
    assert.include(
      rows[4],
      "arrival 31 ms, held no gap over 50 ms, 1 MB message 1190 ms, release no gap over 50 ms | no by wall clock, no by"
    )
    const quiet = Targets.memoryRows(
      run.replace("1190 ms", "45 ms").replace("1.2 s", "48 ms").replace("41 ms", "50 ms")
    )
    assert.isTrue(quiet[4]?.endsWith("| yes by wall clock, yes by the process's own work |"))
  })
})
