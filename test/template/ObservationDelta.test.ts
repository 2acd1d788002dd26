import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { Tokenizer } from "../../layers/Tokenizer.ts"
import type * as Canonical from "../../src/protocol/canonical.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"

const tools: ReadonlyArray<Canonical.Tool> = [{
  type: "function",
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
}]

describe("observation delta tokenization (docs/sessionforest.md)", () => {
  it.layer(Tokenizer.layer)((it) => {
    it.effect("a root observation is the full prompt with the generation prompt", () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer
        const messages: ReadonlyArray<Canonical.Message> = [{ role: "system", content: "You are helpful." }, { role: "user", content: "Hi!" }]
        const ids = Result.getOrThrow(ObservationDelta.rootTokens(tok, messages, [], {}))
        assert.strictEqual(
          tok.decode(ids),
          "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
        )
        assert.deepStrictEqual(
          [...ids],
          [...tok.encode(Result.getOrThrow(tok.renderSync({ messages, tools: [], chatTemplateKwargs: {}, addGenerationPrompt: true })))]
        )
      }))

    it.effect("a deeper observation starts after the previous end token and ends with the generation prompt", () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer
        const ids = Result.getOrThrow(ObservationDelta.deltaTokens(tok, [{ role: "user", content: "And now?" }], tools, {}))
        assert.strictEqual(tok.decode(ids), "\n<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n")
        assert.strictEqual(ids[0], 198)
      }))

    it.effect("consecutive tool results become one user turn of tool responses", () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer
        const ids = Result.getOrThrow(ObservationDelta.deltaTokens(tok, [
          { role: "tool", content: "22C", tool_call_id: "a" },
          { role: "tool", content: "18C", tool_call_id: "b" }
        ], tools, {}))
        assert.strictEqual(
          tok.decode(ids),
          "\n<|im_start|>user\n<tool_response>\n22C\n</tool_response>\n<tool_response>\n18C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        )
      }))

    it.effect("template kwargs reach the generation prompt (enable_thinking=false adds an empty think block)", () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer
        const ids = Result.getOrThrow(ObservationDelta.deltaTokens(tok, [{ role: "user", content: "Q" }], [], { enable_thinking: false }))
        assert.strictEqual(tok.decode(ids), "\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
      }))
  })
})
