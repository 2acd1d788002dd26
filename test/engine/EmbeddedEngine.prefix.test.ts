/**
 * The embedded engine's prefix matching: a prompt that is a view of the same stable buffer as its Session's previous
 * prompt (the forest's kept inference prefix, `InferencePrefix.ids`) is compared only from where the previous prompt
 * ended. Differential test against the full comparison (`fullPrefixMatch`): random conversations over forests with
 * branches (a turn from an earlier state), resumed attempts (a tail), responses committed other than the engine said
 * (retokenized or cut), prompts that are no view of a stable buffer, concurrent requests of a Session, aborts, weight
 * updates and closed Sessions, on the TestClock with latency (the cached prefix sets the prefill time, so the abort
 * outcomes depend on it too), with the prompt's parts shared from the forest (`inputChain`) or not: every result is
 * the same.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import type * as PackedIds from "../../src/ids/PackedIds.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ForestCommits from "../support/forestCommits.ts"
import * as SeededRandom from "../support/SeededRandom.ts"
import * as Sessions from "../support/sessions.ts"

/** A seeded scenario source (test/support/SeededRandom.ts), so every seed replays the same scenario. */
const random = (seed: number) => {
  const next = SeededRandom.floats(seed)
  const int = (n: number): number => Math.floor(next() * n)
  const ids = (n: number): Array<number> => Array.from({ length: n }, () => 100 + int(2000))
  return { next, int, ids }
}

const tools: ReadonlyArray<Canonical.Tool> = []

interface Turn {
  readonly session: number
  readonly at: string
  readonly inputIds: ReadonlyArray<number> | Int32Array
  /** The forest's chain of the prompt (`InferencePrefix.chain`), as the generation core sends it; sometimes none. */
  readonly inputChain: (() => PackedIds.Chain) | undefined
  readonly resumed: number
  readonly rid: string
}

const options: EmbeddedEngine.EmbeddedEngineOptions = {
  seed: 3,
  prefillTokensPerSecond: 4000,
  decodeTokensPerSecond: 100,
  model: { eosProbability: 0.05 }
}

/**
 * One scenario: 3 Sessions (a forest each), 40 rounds of 1-3 requests sent to both engines at once, then perhaps an
 * abort, a weight update or a closed Session partway; each result committed (as the engine said, or retokenized, or
 * cut) with an observation after it. Returns how many results were compared.
 */
const scenario = (seed: number) =>
  Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const fast = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, options)
    const full = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, { ...options, fullPrefixMatch: true })
    const r = random(seed)
    let n = 0
    const forests = Array.from({ length: 3 }, (_, s) => {
      const forest = Forest.make({ sessionId: `s${s}`, groupIndex: 0, index: s, label: null, metadata: {} })
      const first = ForestCommit.commitObservation(forest, {
        parent: forest.root,
        messages: [{ role: "user", content: `q${n++}` }],
        tokens: r.ids(20 + r.int(40)),
        tools,
        chatTemplateKwargs: {},
        rolloutId: 0
      })
      // The observation states a turn can start from; the last is the conversation's head.
      return { forest, states: [first] }
    })
    let compared = 0
    for (let round = 0; round < 40; round++) {
      const turns: Array<Turn> = []
      for (let k = 1 + r.int(3); k > 0; k--) {
        const session = r.int(forests.length)
        const { forest, states } = forests[session]!
        // Mostly the head; sometimes an earlier state (a branch, a retraction).
        const at = r.next() < 0.7 ? states[states.length - 1]! : states[r.int(states.length)]!
        const tail = r.next() < 0.2 ? r.ids(1 + r.int(5)) : []
        const view = InferencePrefix.ids(forest, at, tail)
        // Sometimes no view of a stable buffer: the ids as an array, or an Int32Array of the caller's own.
        const shape = r.next()
        const inputIds = shape < 0.1 ? Array.from(view) : shape < 0.2 ? view.slice() : view
        const inputChain = r.next() < 0.8 ? () => InferencePrefix.chain(forest, at, tail) : undefined
        turns.push({ session, at, inputIds, inputChain, resumed: tail.length, rid: `p${seed}-${round}-${k}` })
      }
      // The fast engine keeps the forest's parts where it gets them, the full comparison a copy of every prompt.
      const send = (engine: Engine.EngineShape, t: Turn) =>
        engine.generate({
          inputIds: t.inputIds,
          inputChain: engine === fast ? t.inputChain : undefined,
          sampling: Sessions.sampling({ seed: seed * 1000 + round, maxNewTokens: 4 + (round % 13) }),
          rid: t.rid,
          returnLogprob: true,
          resumedTokens: t.resumed,
          sessionId: `s${t.session}`
        })
      const fibers = yield* Effect.forEach(
        turns,
        (t) => Effect.all([Effect.forkChild(send(fast, t)), Effect.forkChild(send(full, t))])
      )
      yield* TestClock.adjust(`${r.int(60)} millis`)
      const event = r.next()
      if (event < 0.15) {
        const rid = turns[r.int(turns.length)]!.rid
        yield* fast.abort(rid)
        yield* full.abort(rid)
      } else if (event < 0.25) {
        yield* fast.updateWeights()
        yield* full.updateWeights()
      } else if (event < 0.3) {
        const sessionId = `s${turns[0]!.session}`
        yield* fast.closeSession(sessionId)
        yield* full.closeSession(sessionId)
      }
      yield* TestClock.adjust("10 seconds")
      for (const [i, [a, b]] of fibers.entries()) {
        const ra = yield* Fiber.join(a)
        const rb = yield* Fiber.join(b)
        assert.deepStrictEqual(ra, rb, `seed ${seed} round ${round} request ${i}`)
        compared++
        // Commit what came back (sometimes retokenized or cut), then the next observation.
        const t = turns[i]!
        const { forest, states } = forests[t.session]!
        const said = r.next()
        const tokens = said < 0.8
          ? ra.outputIds
          : said < 0.9
          ? [...ra.outputIds.slice(0, -1), 99]
          : ra.outputIds.slice(0, r.int(ra.outputIds.length + 1))
        n++
        const response = ForestCommits.completedResponse(forest, t.at, `a${n}`, tokens, `r${n}`)
        states.push(ForestCommit.commitObservation(forest, {
          parent: response,
          messages: [{ role: "user", content: `q${n}` }],
          tokens: r.ids(1 + r.int(12)),
          tools,
          chatTemplateKwargs: {},
          rolloutId: 0
        }))
      }
    }
    return compared
  })

describe("EmbeddedEngine prefix matching", () => {
  it.effect("a prompt extending its Session's previous one gets the cached prefix the full comparison finds", () =>
    Effect.gen(function*() {
      let compared = 0
      for (let seed = 1; seed <= 12; seed++) compared += yield* scenario(seed)
      assert.isAbove(compared, 500)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.effect("compares only the ids after the previous prompt of the same stable buffer, and all of any other", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.Tokenizer
      const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
      const o1 = ForestCommit.commitObservation(forest, {
        parent: forest.root,
        messages: [{ role: "user", content: "q" }],
        tokens: [1, 2, 3, 4, 5, 6],
        tools,
        chatTemplateKwargs: {},
        rolloutId: 0
      })
      const first = InferencePrefix.ids(forest, o1)
      const second = InferencePrefix.ids(forest, o1, [7, 8])
      assert.strictEqual(second.buffer, first.buffer)
      const run = (fullPrefixMatch: boolean, prompt: (view: Int32Array) => ReadonlyArray<number> | Int32Array) =>
        Effect.gen(function*() {
          const engine = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
            ...EmbeddedEngine.EmbeddedEngine.instant,
            fullPrefixMatch
          })
          const request = (inputIds: ReadonlyArray<number> | Int32Array, rid: string) =>
            engine.generate({
              inputIds,
              sampling: Sessions.sampling({ seed: 1, maxNewTokens: 2 }),
              rid,
              returnLogprob: false,
              sessionId: "s"
            })
          yield* request(prompt(first), `${fullPrefixMatch}-1`)
          // Against the contract (the ids a view holds never change): the first id written behind the engine's back.
          // Only an engine that skips the ids it knows unchanged misses it.
          const saved = first[0]!
          first[0] = 9
          const result = yield* request(prompt(second), `${fullPrefixMatch}-2`)
          first[0] = saved
          return result.cachedTokens
        })
      const same = (view: Int32Array) => view
      assert.strictEqual(yield* run(false, same), 6)
      assert.strictEqual(yield* run(true, same), 0)
      // A copy of its own, or an array, is compared in full.
      const copy = (view: Int32Array) => view.slice()
      assert.strictEqual(yield* run(false, copy), 0)
      assert.strictEqual(yield* run(false, (view) => Array.from(view)), 0)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})
