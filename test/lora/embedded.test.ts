/**
 * The embedded engine's LoRA adapters (layers/engine/EmbeddedAdapters.ts): an adapter's weight file draws another
 * model, so its tokens differ from the base model's and from another adapter's, and the same weights under another
 * name give the same tokens; SGLang's refusals.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as LoraAdapters from "../support/LoraAdapters.ts"
import * as TempDir from "../support/TempDir.ts"

const request = (rid: string, lora?: string): Engine.GenerateRequest => ({
  inputIds: [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198],
  sampling: { maxNewTokens: 24, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed: 11 },
  rid,
  returnLogprob: true,
  ...(lora === undefined ? {} : { lora })
})

describe("embedded engine adapters", () => {
  it.effect("sample by their weights: other tokens than the base model, the same for the same weights", () =>
    Effect.gen(function*() {
      const root = yield* TempDir.scoped("relax-lora-embedded-")
      const dir = (name: string, weights: string) => LoraAdapters.write(root, name, weights)
      const engine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, EmbeddedEngine.instant)
      const adapters = engine.adapters!
      yield* adapters.load("embedded", { name: "a", path: dir("a", "weights A"), pinned: true })
      yield* adapters.load("embedded", { name: "b", path: dir("b", "weights B"), pinned: true })
      yield* adapters.load("embedded", { name: "a-again", path: dir("a2", "weights A"), pinned: true })
      const base = yield* engine.generate(request("r0"))
      const a = yield* engine.generate(request("r1", "a"))
      const b = yield* engine.generate(request("r2", "b"))
      const again = yield* engine.generate(request("r3", "a-again"))
      assert.notDeepEqual(a.outputIds, base.outputIds)
      assert.notDeepEqual(a.outputIds, b.outputIds)
      assert.deepStrictEqual(again.outputIds, a.outputIds)
      const twice = yield* Effect.flip(adapters.load("embedded", { name: "a", path: dir("c", "x"), pinned: true }))
      assert.include(twice.message, "already loaded")
      const never = yield* Effect.flip(engine.generate(request("r4", "nope")))
      assert.include(never.message, "Got LoRA adapter that has never been loaded: nope")
      const notAdapter = yield* Effect.flip(adapters.load("embedded", { name: "z", path: root, pinned: true }))
      assert.include(notAdapter.message, root)
      yield* adapters.unload("embedded", "b")
      yield* adapters.unload("embedded", "b")
      assert.include((yield* Effect.flip(engine.generate(request("r5", "b")))).message, "never been loaded")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer), Effect.scoped))
})
