/**
 * Versioned LoRA across a cluster (layers/cluster/LoraWriter.ts) on the cluster's in-memory test runner: one fleet
 * registry whichever runner a Session's request reaches — binds are sticky across runners, a release on another runner
 * reclaims, a publication goes through the writer — and a writer that cannot be reached fails the bind, bounded,
 * instead of generating with another version.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestRunner } from "effect/cluster"
import * as LoraWriter from "../../layers/cluster/LoraWriter.ts"
import * as SingleWriter from "../../layers/cluster/SingleWriter.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as LoraEngine from "../../layers/lora/LoraEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Rid from "../../src/engine/Rid.ts"
import * as LoraAdapters from "../support/LoraAdapters.ts"

const writers = Layer.effect(
  SingleWriter.Writers,
  Effect.gen(function*() {
    const engine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, EmbeddedEngine.instant)
    return new Map(LoraWriter.writerEntries("versioned", engine))
  })
).pipe(Layer.provide(Tokenizer.Tokenizer.layer))

const cluster = SingleWriter.entityLayer.pipe(Layer.provideMerge(writers), Layer.provideMerge(TestRunner.layer))

/** A runner's (or the controller's) `LoraVersions` over the fleet's writer. */
const member = Effect.gen(function*() {
  return LoraWriter.remote(
    "versioned",
    yield* SingleWriter.client(LoraWriter.writerName, "5 seconds"),
    yield* SingleWriter.client(LoraWriter.writerName, "30 seconds")
  )
})

describe("versioned LoRA in a cluster (the lora-versions single writer)", () => {
  it.live("one registry for every runner: sticky binds across runners, releases reclaim, publications through it", () =>
    Effect.gen(function*() {
      const [v1, v2] = (yield* LoraAdapters.versions(2)).dirs
      const controller = yield* member
      const runnerA = yield* member
      const runnerB = yield* member
      const early = yield* Effect.flip(runnerA.adapterFor("s0"))
      assert.strictEqual(early.reason, "no-published-version")
      const first = yield* controller.publish({ path: v1! })
      assert.strictEqual(yield* runnerA.adapterFor("s1"), first.version)
      const second = yield* controller.publish({ path: v2! })
      // s1's next request reaches runner B: the same version; a new Session binds the new default.
      assert.strictEqual(yield* runnerB.adapterFor("s1"), first.version)
      assert.strictEqual(yield* runnerB.adapterFor("s2"), second.version)
      const refused = yield* Effect.flip(controller.publish({ path: `${v2}-missing` }))
      assert.strictEqual(refused.reason, "adapter-path")
      // s1 ends on runner B: v1 is reclaimed from the writer's workers.
      yield* runnerB.release("s1")
      const metrics = yield* runnerA.takeStepMetrics
      assert.deepStrictEqual(
        [metrics["lora/publications"], metrics["lora/reclaims"], metrics["lora/versions_live"]],
        [2, 1, 1]
      )
      // A Session closed before it bound never binds, whichever runner asks.
      yield* runnerA.release("gone")
      const late = yield* Effect.flip(runnerB.adapterFor("gone"))
      assert.strictEqual(late.reason, "session-closed")
    }).pipe(Effect.provide(cluster), Effect.scoped))

  it.live("a writer that cannot be reached fails the attempt within its bound, naming the registry", () =>
    Effect.gen(function*() {
      const elsewhere = LoraWriter.remote(
        "versioned",
        yield* SingleWriter.client("lora-versions-elsewhere", "1 second"),
        yield* SingleWriter.client("lora-versions-elsewhere", "1 second")
      )
      const engine = LoraEngine.wrap(
        yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, EmbeddedEngine.instant),
        elsewhere
      )
      const failed = yield* Effect.flip(engine.generate({
        inputIds: [1, 2, 3],
        sampling: { maxNewTokens: 4, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [] },
        rid: Rid.forAttempt({ sessionId: "s", parent: "root", turn: 0, attempt: 0 }),
        returnLogprob: true,
        sessionId: "s"
      })).pipe(Effect.timeout("5 seconds"))
      assert.include(failed.message, "the fleet's LoRA registry (single writer lora-versions) did not answer a bind")
    }).pipe(Effect.provide(Layer.merge(cluster, Tokenizer.Tokenizer.layer))))
})
