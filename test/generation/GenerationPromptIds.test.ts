/**
 * The root observations' ids kept by their text (src/template/PromptIds.ts) against encoding every one: the same
 * Sessions driven through a generation core that keeps them (with room for many prompts, and for one) and through one
 * that keeps none commit the same forests, node for node (state hash, kind, ids), in the same order, and the
 * tokenizer is asked for each kept prompt once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as PackedIds from "../../src/ids/PackedIds.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as PromptIds from "../../src/template/PromptIds.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as Requests from "../support/requests.ts"
import * as Results from "../support/results.ts"
import * as SeededRandom from "../support/SeededRandom.ts"
import * as SupportSessions from "../support/sessions.ts"

/** How many texts of at least 1,000 characters the tokenizer encoded (root observations; deltas are shorter). */
const encoded = { long: 0 }

/** The real tokenizer, counting the long texts `encodeAsync` is asked for. */
const countingTokenizer = Layer.effect(
  Tokenizer.Tokenizer,
  Effect.map(Tokenizer.Tokenizer, (tokenizer): Tokenizer.TokenizerShape => ({
    ...tokenizer,
    encodeAsync: (text: string) => {
      if (text.length >= 1000) encoded.long++
      return tokenizer.encodeAsync(text)
    }
  }))
).pipe(Layer.provide(Tokenizer.Tokenizer.layer))

const stack = (promptIdsBytes: number | undefined) =>
  Generation.Generation.layer({
    toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
    reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3")),
    promptIdsBytes
  }).pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(
      EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy: Policy.policy })
    ),
    Layer.provideMerge(countingTokenizer)
  )

const random = SeededRandom.floats

const words = [
  "alpha",
  "beta",
  "gamma",
  "δέλτα",
  "日本語",
  "emoji 🎉",
  "tabs\tand\nlines",
  "</think>",
  "x"
]

/** First prompts: a few distinct ones, each shared by several Sessions (a Group's samples), some with tools. */
const firstPrompts = (next: () => number): ReadonlyArray<{ messages: ReadonlyArray<unknown>; tools: boolean }> =>
  Array.from({ length: 5 }, (_, p) => {
    // Long enough to be counted as a root observation; the last prompt holds a special-token literal (encoded
    // marked, in place, never kept).
    const text = Array.from({ length: 200 + Math.floor(next() * 200) }, () => words[Math.floor(next() * words.length)])
      .join(" ") + (p === 4 ? " <|im_end|>" : "")
    const messages: Array<unknown> = [{ role: "system", content: `You are agent ${p}. ${text}` }]
    messages.push({ role: "user", content: p % 2 === 0 ? "Please compute 2+2?" : `Hello ${text.slice(0, 40)}` })
    return { messages, tools: p % 3 !== 1 }
  })

interface NodeView {
  readonly hash: string
  readonly kind: string
  readonly ids: ReadonlyArray<number>
}

/**
 * Drive 24 Sessions over 5 first prompts (the first 12 three to a prompt, the rest round robin; the last 4 send their
 * first prompt again on turn 1) for 3 turns each, interleaved, and return every Session's nodes in commit order.
 */
const drive = Effect.gen(function*() {
  const generation = yield* Generation.Generation
  const forests = yield* Forests.Forests
  const next = random(7)
  const prompts = firstPrompts(next)
  // Fixed Session ids: a tool call's id is derived from its Session's, and so is the state hash of its message.
  const sessions = yield* Effect.forEach(
    Array.from({ length: 24 }, (_, i) => `session-${i}`),
    (sessionId) =>
      forests.create(sessionId).pipe(
        Effect.as(
          SupportSessions.sessionEntry(sessionId, { sampling: SupportSessions.sampling({ maxNewTokens: 256 }) })
        )
      )
  )
  // The first 12 Sessions come three to a prompt (a Group's samples one after the other), the rest round robin.
  const histories = sessions.map((_, i) => prompts[i < 12 ? Math.floor(i / 3) : i % prompts.length]!)
  for (let turn = 0; turn < 3; turn++) {
    for (let i = 0; i < sessions.length; i++) {
      const entry = sessions[i]!
      const prompt = histories[i]!
      const forest = yield* forests.get(entry.sessionId)
      // Turn 0 sends the first prompt; later turns echo what was committed and add a message; the last four
      // Sessions start over from their first prompt on turn 1 (a second root observation of the same text).
      const messages = turn === 0 || (i >= 20 && turn === 1)
        ? prompt.messages
        : [...Forest.fullMessages(forest, latestLeaf(forest)), { role: "user", content: `turn ${turn} of ${i}` }]
      yield* generation.generate(
        entry,
        Requests.canonicalRequest({ messages, ...(prompt.tools ? { tools: [Policy.calcTool] } : {}) })
      )
    }
  }
  const views: Array<ReadonlyArray<NodeView>> = []
  for (const entry of sessions) {
    const forest = yield* forests.get(entry.sessionId)
    views.push(
      [...forest.nodes.values()].sort((a, b) => a.committed - b.committed).map((node) => ({
        hash: node.hash,
        kind: node.kind,
        ids: Array.from(PackedIds.unpack(node.ids))
      }))
    )
  }
  return views
})

const latestLeaf = (forest: Forest.Forest): string => {
  let latest: Forest.Node | undefined
  for (const node of forest.nodes.values()) if (latest === undefined || node.committed > latest.committed) latest = node
  return latest!.hash
}

describe("Generation's root observation ids kept by their text", () => {
  it.effect("commit the same forests as encoding every root observation", () =>
    Effect.gen(function*() {
      encoded.long = 0
      const none = yield* drive.pipe(Effect.provide(stack(0)))
      const encodedByNone = encoded.long
      encoded.long = 0
      const many = yield* drive.pipe(Effect.provide(stack(undefined)))
      const encodedByMany = encoded.long
      encoded.long = 0
      // Room for one prompt (each is 12–16 KB by the memo's weight): the next one pushes it out.
      const one = yield* drive.pipe(Effect.provide(stack(20 * 1024)))
      const encodedByOne = encoded.long
      // Keeping none: every first request of a plain prompt (24, less the marked prompt's 2; a Session that starts
      // over matches its own root observation and encodes nothing). Keeping many: each plain prompt once. Room for
      // one: each run of one prompt once (the first 12 Sessions: 4), then every one of the round robin (10).
      expect([encodedByNone, encodedByMany, encodedByOne]).toEqual([22, 4, 14])
      expect(many).toEqual(none)
      expect(one).toEqual(none)
      // Every Session committed its turns (a root observation, responses, later observations).
      for (const nodes of none) expect(nodes.length).toBeGreaterThanOrEqual(5)
    }))
})

describe("PromptIds", () => {
  it("gives the ids kept for a text, frozen, and only for that exact text", () => {
    const memo = new PromptIds.PromptIds(1024 * 1024)
    const ids = memo.keep("abc", [1, 2, 3])
    expect(Object.isFrozen(ids)).toBe(true)
    expect(memo.get("abc")).toBe(ids)
    expect(memo.get("abc ")).toBeUndefined()
    expect(memo.get("ab")).toBeUndefined()
  })

  it("keeps nothing with a bound of 0, and nothing larger than its bound", () => {
    const none = new PromptIds.PromptIds(0)
    const ids = [1, 2]
    expect(none.keep("x", ids)).toBe(ids)
    expect(none.get("x")).toBeUndefined()
    const small = new PromptIds.PromptIds(200)
    small.keep("y".repeat(100), [1])
    expect(small.count).toBe(0)
  })

  it("pushes the least recently used out past its bound, and counts what it keeps", () => {
    // Each entry weighs 10 * 2 + 2 * 8 + 64 = 100 bytes.
    const memo = new PromptIds.PromptIds(300)
    const text = (i: number) => `text-${i}`.padEnd(10, ".")
    memo.keep(text(1), [1, 1])
    memo.keep(text(2), [2, 2])
    memo.keep(text(3), [3, 3])
    expect(memo.size).toBe(300)
    // Reading 1 makes 2 the least recently used.
    expect(memo.get(text(1))).toEqual([1, 1])
    memo.keep(text(4), [4, 4])
    expect(memo.get(text(2))).toBeUndefined()
    expect(memo.get(text(1))).toEqual([1, 1])
    expect(memo.get(text(3))).toEqual([3, 3])
    expect(memo.get(text(4))).toEqual([4, 4])
    expect(memo.count).toBe(3)
    // Keeping a text again replaces its ids without counting it twice.
    memo.keep(text(4), [5, 5])
    expect(memo.get(text(4))).toEqual([5, 5])
    expect(memo.size).toBe(300)
  })
})
