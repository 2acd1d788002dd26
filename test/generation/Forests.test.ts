import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Forest from "../../src/forest/Forest.ts"

describe("Forests store", () => {
  it.effect("creates, finds and removes a Session's forest", () =>
    Effect.gen(function*() {
      const forests = yield* Forests.Forests
      const created = yield* forests.create("s-1", { groupIndex: 1, index: 3, label: "7", metadata: { a: 1 } })
      const found = yield* forests.get("s-1")
      assert.strictEqual(found, created)
      assert.deepStrictEqual([found.groupIndex, found.index, found.label, found.metadata], [1, 3, "7", { a: 1 }])
      assert.deepStrictEqual(yield* forests.stats, { forests: 1, nodes: 1 })
      yield* forests.remove("s-1")
      const missing = yield* forests.get("s-1").pipe(Effect.flip)
      assert.strictEqual(missing._tag, "ForestNotFoundError")
      assert.strictEqual(missing.message, "Unknown or discarded agentic session 's-1'.")
    }).pipe(Effect.provide(Forests.Forests.layer)))

  it.effect("defaults the creation fields", () =>
    Effect.gen(function*() {
      const forest = yield* (yield* Forests.Forests).create("s-2")
      assert.deepStrictEqual([forest.groupIndex, forest.index, forest.label, forest.metadata], [0, 0, null, {}])
    }).pipe(Effect.provide(Forests.Forests.layer)))
})

describe("Forests commits", () => {
  it.effect("observe refuses an observation reaching the context limit and commits nothing; otherwise commits it", () =>
    Effect.gen(function*() {
      const forests = yield* Forests.Forests
      const forest = yield* forests.create("s-3")
      const observation = {
        parent: forest.root,
        rolloutId: 0,
        messages: [{ role: "user" as const, content: "hi" }],
        tokens: [1, 2, 3],
        tools: [],
        chatTemplateKwargs: {}
      }
      const refused = yield* forests.observe(forest, { ...observation, maxContextLen: 3 }).pipe(Effect.flip)
      assert.strictEqual(refused._tag, "ContextLengthError")
      assert.strictEqual(forest.nodes.size, 1)
      const hash = yield* forests.observe(forest, { ...observation, maxContextLen: 4 })
      assert.strictEqual(Forest.tokenLength(Forest.node(forest, hash)), 3)
      const response = {
        parent: hash,
        rolloutId: 0,
        message: { role: "assistant" as const, content: "ok" },
        tokens: [4],
        logprobs: [-1, -2],
        weightVersions: ["v0"],
        status: "completed" as const,
        requestId: "r",
        abortCount: 0,
        wallElapsedS: 0,
        generationElapsedS: 0
      }
      const broken = yield* forests.commitResponse(forest, response).pipe(Effect.flip)
      assert.strictEqual(broken._tag, "ForestInvariantError")
      const committed = yield* forests.commitResponse(forest, { ...response, logprobs: [-1] })
      assert.strictEqual(forest.nodes.get(committed)?.kind, "resp")
    }).pipe(Effect.provide(Forests.Forests.layer)))
})
