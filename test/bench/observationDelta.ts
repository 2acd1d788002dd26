/**
 * Observation delta tokenization vs re-tokenizing the history: `ObservationDelta.deltaTokens` for one new tool message
 * (render dummy + delta, encode, cut the dummy off) against what a naive gateway does on every request (render the
 * whole conversation with the chat template and encode it), with the bundled Qwen3 tokenizer.
 */
import { Effect, Result } from "effect"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import * as Tokenizer from "../../layers/Tokenizer.ts"
import { conversation, tools } from "./conversation.ts"
import { type Bench, type BenchResult, compare, formatMs, formatRatio } from "./harness.ts"

const run = async (): Promise<BenchResult> => {
  const tokenizer = await Effect.runPromise(Tokenizer.load())
  const rows: Array<Record<string, string>> = []
  for (const turns of [8, 64]) {
    // system, user, then `turns` (assistant, tool) pairs; the last tool result is the new observation.
    const messages = conversation(2 + 2 * turns)
    const delta = messages.slice(-1)
    const deltaIds = Result.getOrThrow(ObservationDelta.deltaTokens(tokenizer, delta, tools, {}))
    const fullIds = Result.getOrThrow(ObservationDelta.rootTokens(tokenizer, messages, tools, {}))
    const times = compare([
      { name: "delta", run: () => ObservationDelta.deltaTokens(tokenizer, delta, tools, {}) },
      { name: "full", run: () => ObservationDelta.rootTokens(tokenizer, messages, tools, {}) }
    ], { roundMs: 40 })
    const deltaMs = times.get("delta") ?? Number.NaN
    const fullMs = times.get("full") ?? Number.NaN
    rows.push({
      turns: String(turns),
      messages: String(messages.length),
      "delta tokens": String(deltaIds.length),
      "history tokens": String(fullIds.length),
      deltaTokens: formatMs(deltaMs),
      "render+encode all": formatMs(fullMs),
      "full/delta": formatRatio(fullMs / deltaMs)
    })
  }
  return {
    title: "Observation delta tokenization (time per new tool message)",
    rows,
    notes: [
      "full/delta: how many times longer rendering + encoding the whole conversation takes than the delta for the one " +
        "new message (>1 = the delta is cheaper); the delta's cost does not grow with the history."
    ]
  }
}

export const bench: Bench = { name: "delta", run }
