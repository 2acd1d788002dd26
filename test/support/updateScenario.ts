/**
 * Three Sessions taking four turns each on the embedded engine's clock (TestClock) while weight updates every
 * 130–170 simulated ms abort their generations (resumed attempts): what the differential tests of the generation core
 * compare, the completions (without their random ids), counters and SessionForest nodes, token for token and to the
 * simulated millisecond.
 */
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"
import type * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Requests from "./requests.ts"
import * as SupportSessions from "./sessions.ts"

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

export interface ScenarioOptions {
  /** What each Session's entry has beyond the scenario's sampling and rollout id. */
  readonly entry?: ((sessionId: string) => Partial<Sessions.SessionEntry>) | undefined
  /**
   * Start every request as a task of its own (`FairScheduler.continueAsTask`, as the gateway starts it), and let every
   * woken agent reach its next wait before the driver goes on (so the updates fall at the same point of each request
   * whether it takes one task or two to reach the engine). Default false: the driver goes on at once.
   */
  readonly settled?: boolean | undefined
}

/** The scenario's run: what is compared, and how many engine attempts it made (requests and aborts). */
export const turnsUnderUpdates = (options: ScenarioOptions = {}) =>
  Effect.gen(function*() {
    const generation = yield* Generation.Generation
    const forests = yield* Forests.Forests
    const engine = yield* Engine.Engine
    const settled = options.settled ?? false
    const entries = yield* Effect.forEach(["s-a", "s-b", "s-c"], (id) =>
      forests.create(id).pipe(
        Effect.as(SupportSessions.sessionEntry(id, {
          sampling: SupportSessions.sampling({ maxNewTokens: 200 }),
          rolloutId: () => 3,
          ...options.entry?.(id)
        }))
      ))
    const agent = (entry: (typeof entries)[number]) =>
      Effect.gen(function*() {
        const messages: Array<unknown> = [{ role: "user", content: `Hello from ${entry.sessionId}` }]
        const completions: Array<unknown> = []
        for (let turn = 0; turn < 4; turn++) {
          if (settled) yield* FairScheduler.continueAsTask
          const completion = yield* generation.generate(entry, Requests.canonicalRequest({ messages }))
          // The completion id is random: everything else must agree.
          completions.push({ ...completion, id: "" })
          messages.push({ role: "assistant", content: completion.content }, { role: "user", content: `Next ${turn}.` })
          yield* Effect.sleep("300 millis")
        }
        return completions
      })
    const fibers = yield* Effect.forEach(entries, (entry) => Effect.forkChild(agent(entry)))
    const settle = settled ? Effect.repeat(Effect.yieldNow, { times: 16 }) : Effect.void
    yield* settle
    // Weight updates every 130–170 simulated ms abort the generations running then (they resume, keeping their tokens).
    for (let step = 0; step < 60; step++) {
      yield* TestClock.adjust(`${130 + 20 * (step % 3)} millis`)
      yield* settle
      if (step % 2 === 1) yield* engine.updateWeights()
    }
    const completions = yield* Fiber.joinAll(fibers)
    const forestNodes = yield* Effect.forEach(entries, (entry) => Effect.map(forests.get(entry.sessionId), nodesOf))
    const attempts = entries.reduce((sum, entry) => sum + entry.counters.requests + entry.counters.aborts, 0)
    return {
      result: { completions, forestNodes, counters: entries.map((entry) => ({ ...entry.counters })) },
      attempts
    }
    // A clock of its own: every run starts at the same simulated time (float sums of timestamps compare exactly).
  }).pipe(Effect.provide(Layer.merge(stack(), TestClock.layer())))
