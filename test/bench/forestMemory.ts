/**
 * SessionForest memory: a forest of T turns × 2k tokens (a 1k-token tool observation and a 1k-token response per
 * turn, ~4 bytes of message text per token) against the naive layout that keeps a `number[]` copy of the whole
 * token history on every node.
 *
 * **Details**
 * Bytes are `heapUsed + external` deltas of `process.memoryUsage()` around building each structure, after full
 * collections. Run with `node --expose-gc test/bench/run.ts memory` to use `global.gc`; without the flag
 * the collector is enabled at run time (harness.ts), and if even that fails the numbers include uncollected garbage.
 * OpenSSL's running-hash state (one per leaf) lives outside the V8 heap and is not counted (see the rss column).
 * Logprobs are measured both ways the forest keeps them: exact 32-bit floats (SGLang's, 4 bytes each) and others
 * (the embedded engine's, 8 bytes each).
 */
import * as Forest from "../../src/forest/Forest.ts"
import * as Conversation from "./conversation.ts"
import * as Harness from "./harness.ts"

const TOKENS_PER_NODE = 1000
const BYTES_PER_TOKEN_OF_TEXT = 4

interface Footprint {
  readonly bytes: number
  readonly rss: number
}

/** Memory retained by what `build` returns (kept alive until measured). */
const footprint = <A>(collect: () => void, build: () => A): { readonly value: A; readonly size: Footprint } => {
  collect()
  const before = Harness.usedBytes()
  const rssBefore = process.memoryUsage().rss
  const value = build()
  collect()
  return { value, size: { bytes: Harness.usedBytes() - before, rss: process.memoryUsage().rss - rssBefore } }
}

/** The naive layout: every node holds its own copy of all token ids from the root through itself. */
const naiveHistories = (forest: Forest.Forest, leaf: string): ReadonlyArray<ReadonlyArray<number>> => {
  const copies: Array<Array<number>> = []
  let history: Array<number> = []
  for (const node of Forest.lineage(forest, leaf)) {
    if (Forest.tokenLength(node) === 0) continue
    history = history.concat(Array.from(Forest.unpackTokens(node)))
    copies.push(history)
  }
  return copies
}

const run = async (): Promise<Harness.BenchResult> => {
  const gc = Harness.garbageCollector()
  const collect = () => {
    // Two passes: the first may only schedule finalization of weakly held objects.
    gc?.()
    gc?.()
  }
  const rows: Array<Record<string, string>> = []
  const ratios: Array<string> = []
  // SGLang's logprobs are float32 values (the forest keeps them in 4 bytes); the embedded engine's are not (8 bytes).
  const logprobKinds = [
    { name: "float32 logprobs", logprob: (i: number) => -(i % 17) / 8 },
    { name: "float64 logprobs", logprob: (i: number) => -Math.log1p(i % 17) / 7 }
  ]
  // A small forest of each kind first: the code that builds one compiled and optimized before the measurements (the
  // first one otherwise counted ~0.2 MB of it).
  for (const kind of logprobKinds) {
    Harness.consume(
      Conversation.commitConversation(Conversation.emptyForest(), Conversation.conversation(11, 400), 100, kind.logprob)
    )
  }
  for (const turns of [50, 200]) {
    for (const kind of logprobKinds) {
      // system + user, then (assistant, tool) pairs, ending on the last assistant turn: `turns` responses and
      // `turns` observations of TOKENS_PER_NODE ids each.
      // The messages are made inside the measurement, as a gateway's decoded request bodies are: the forest's copy
      // shares their strings (structuredClone does not duplicate them), so what stays reachable is what it retains.
      const built = footprint(collect, () => {
        const forest = Conversation.emptyForest()
        const messages = Conversation.conversation(2 * turns + 1, TOKENS_PER_NODE * BYTES_PER_TOKEN_OF_TEXT)
        return { forest, leaf: Conversation.commitConversation(forest, messages, TOKENS_PER_NODE, kind.logprob) }
      })
      const { forest, leaf } = built.value
      const stored = Forest.trainTokenCount(forest, leaf)
      rows.push({
        turns: String(turns),
        layout: `SessionForest (deltas + messages + ${kind.name})`,
        "stored tokens": String(stored),
        "ids held": String(stored),
        bytes: Harness.formatBytes(built.size.bytes),
        "bytes/token": (built.size.bytes / stored).toFixed(1),
        "rss delta": Harness.formatBytes(built.size.rss)
      })
      if (kind !== logprobKinds[0]) continue
      const naive = footprint(collect, () => naiveHistories(forest, leaf))
      const copied = naive.value.reduce((sum, copy) => sum + copy.length, 0)
      // Keep the forest reachable through the naive measurement: freeing it there would be subtracted from the naive size.
      Harness.consume(forest)
      rows.push({
        turns: String(turns),
        layout: "naive number[] history per node (ids only)",
        "stored tokens": String(stored),
        "ids held": String(copied),
        bytes: Harness.formatBytes(naive.size.bytes),
        "bytes/token": (naive.size.bytes / stored).toFixed(1),
        "rss delta": Harness.formatBytes(naive.size.rss)
      })
      ratios.push(`${turns} turns: ${Harness.formatRatio(naive.size.bytes / built.size.bytes)}`)
    }
  }
  return {
    title: `SessionForest memory (turns × 2k tokens; ${gc === undefined ? "NO forced GC: noisy" : "after full GC"})`,
    rows,
    notes: [
      `naive/forest bytes: ${ratios.join(", ")} — how many times more memory the naive per-node history copies ` +
      "take than the whole SessionForest (which also holds messages and logprobs the naive layout leaves out).",
      "bytes/token = retained bytes / tokens of the conversation; the forest's stays flat as turns grow, the naive " +
      "layout's grows linearly (quadratic total).",
      "run with `node --expose-gc test/bench/run.ts memory` to measure with global.gc."
    ]
  }
}

export const bench: Harness.Bench = { name: "memory", run }
