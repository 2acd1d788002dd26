/**
 * A long observation through the generation core (a tool result of hundreds of KB): its text is encoded on the
 * tokenizer's worker thread, its ids come back in slices and are packed for the forest in a task before the commit's
 * (layers/generation/Observation.ts). The committed ids are exactly the in-place encode of the rendered prompt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as PackedIds from "../../src/ids/PackedIds.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as Requests from "../support/requests.ts"
import * as Results from "../support/results.ts"
import * as SeededRandom from "../support/SeededRandom.ts"
import * as SupportSessions from "../support/sessions.ts"

const stack = Generation.Generation.layer({
  toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
  reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))
}).pipe(
  Layer.provideMerge(Forests.Forests.layer),
  Layer.provideMerge(
    EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy: Policy.policy })
  ),
  Layer.provideMerge(Tokenizer.Tokenizer.layer)
)

const words = ["alpha", "beta", "δέλτα", "日本語", "🎉", "tabs\tand\nlines", "x", "1234"]

describe("A long observation", () => {
  it.effect("commits exactly the in-place encode of its prompt, over 64k ids packed apart from the commit", () =>
    Effect.gen(function*() {
      const generation = yield* Generation.Generation
      const forests = yield* Forests.Forests
      const tokenizer = yield* Tokenizer.Tokenizer
      const next = SeededRandom.floats(41)
      const text = Array.from({ length: 60_000 }, () => words[Math.floor(next() * words.length)]).join(" ")
      const request = Requests.canonicalRequest({
        messages: [{ role: "system", content: "You read tool output." }, { role: "user", content: text }]
      })
      const { state } = request
      const expected = Results.success(
        ObservationDelta.rootTokens(tokenizer, state.messages, state.tools, state.chat_template_kwargs)
      )
      // Long enough for the worker (Tokenizer.OFF_LOOP_CHARS) and for packing apart (64k ids).
      assert.isAtLeast(text.length, Tokenizer.OFF_LOOP_CHARS)
      assert.isAtLeast(expected.length, 64 * 1024)
      yield* forests.create("long")
      yield* generation.generate(SupportSessions.sessionEntry("long"), request)
      const forest = yield* forests.get("long")
      // The root (no messages) and the request's observation under it.
      const observations = [...forest.nodes.values()].filter((node) => node.kind === "obs" && node.up !== null)
      assert.strictEqual(observations.length, 1)
      assert.deepStrictEqual(Array.from(PackedIds.unpack(observations[0]!.ids)), [...expected])
      assert.strictEqual(Forest.tokenLength(observations[0]!), expected.length)
    }).pipe(Effect.provide(stack)))
})
