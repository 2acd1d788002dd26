/**
 * The generation core's steps run inline (no tracing backend: one generator from match to commit) and as effects in
 * their own spans (a tracer installed: each step an effect, as every request ran before issue 24's fifth pass): the
 * same completions, counters and SessionForest nodes, token for token and to the simulated millisecond, for Sessions
 * taking turns on the embedded engine's clock while weight updates abort their generations (resumed attempts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Tracer } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Requests from "../support/requests.ts"
import * as SupportSessions from "../support/sessions.ts"

const policy: EmbeddedEngine.Policy = (request) =>
  `Answer ${request.turn} to ${request.sessionId}: ${"a word or two, ".repeat(8 + 5 * request.turn)}done.`

const stack = () =>
  Generation.Generation.layer().pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(EmbeddedEngine.EmbeddedEngine.layer({ policy })),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )

/** Every node of a forest as plain values: ids, logprobs, weight versions, timings, attempts. */
const nodesOf = (forest: Forest.Forest) =>
  [...forest.nodes.values()].map((n) => ({
    hash: n.hash,
    parent: n.parent,
    ids: [...Forest.unpackTokens(n)],
    ...(n.kind === "resp"
      ? {
        logprobs: [...n.logprobs],
        weightVersions: n.weightVersions,
        attemptLengths: n.attemptLengths,
        wall: n.wallElapsedS,
        generation: n.generationElapsedS,
        cached: n.cachedTokens,
        requestId: n.requestId,
        status: n.status
      }
      : {})
  }))

const scenario = Effect.gen(function*() {
  const generation = yield* Generation.Generation
  const forests = yield* Forests.Forests
  const engine = yield* Engine.Engine
  const entries = yield* Effect.forEach(["s-a", "s-b", "s-c"], (id) =>
    forests.create(id).pipe(
      Effect.as(SupportSessions.sessionEntry(id, {
        sampling: SupportSessions.sampling({ maxNewTokens: 200 }),
        rolloutId: () => 3
      }))
    ))
  const agent = (entry: (typeof entries)[number]) =>
    Effect.gen(function*() {
      const messages: Array<unknown> = [{ role: "user", content: `Hello from ${entry.sessionId}` }]
      const completions: Array<unknown> = []
      for (let turn = 0; turn < 4; turn++) {
        const completion = yield* generation.generate(entry, Requests.canonicalRequest({ messages }))
        // The completion id is random: everything else must agree.
        completions.push({ ...completion, id: "" })
        messages.push({ role: "assistant", content: completion.content }, { role: "user", content: `Next ${turn}.` })
        yield* Effect.sleep("300 millis")
      }
      return completions
    })
  const fibers = yield* Effect.forEach(entries, (entry) => Effect.forkChild(agent(entry)))
  // Weight updates every 130–170 simulated ms abort the generations running then (they resume, keeping their tokens).
  for (let step = 0; step < 60; step++) {
    yield* TestClock.adjust(`${130 + 20 * (step % 3)} millis`)
    if (step % 2 === 1) yield* engine.updateWeights()
  }
  const completions = yield* Fiber.joinAll(fibers)
  const forestNodes = yield* Effect.forEach(entries, (entry) => Effect.map(forests.get(entry.sessionId), nodesOf))
  return { completions, forestNodes, counters: entries.map((entry) => ({ ...entry.counters })) }
  // A clock of its own: both runs start at the same simulated time (float sums of timestamps compare exactly).
}).pipe(Effect.provide(Layer.merge(stack(), TestClock.layer())))

describe("Generation inline and traced", () => {
  it.effect("give the same completions, counters and forest nodes under weight updates", () =>
    Effect.gen(function*() {
      const names = new Set<string>()
      const tracer = Tracer.make({
        span(options) {
          names.add(options.name)
          return new Tracer.NativeSpan(options)
        }
      })
      const inline = yield* scenario
      const traced = yield* scenario.pipe(Effect.withTracer(tracer))
      // The traced run opened the steps' spans (so it ran them as effects), with resumed attempts among them.
      for (const name of ["Generation.match", "Generation.attempts", "Generation.attempt", "Generation.parse"]) {
        assert.isTrue(names.has(name), name)
      }
      assert.isTrue(inline.counters.some((c) => c.aborts > 0), "no generation was aborted")
      assert.deepStrictEqual(inline, traced)
    }))
})
