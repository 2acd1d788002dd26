import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Tokenizer } from "../../layers/Tokenizer.ts"

describe("Tokenizer (bundled Qwen3)", () => {
  it.effect("encodes special-token literals as special ids and round-trips", () =>
    Effect.gen(function*() {
      const tok = yield* Tokenizer
      const text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
      const ids = tok.encode(text)
      assert.deepStrictEqual([...ids], [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198])
      assert.strictEqual(tok.decode(ids), text)
      assert.strictEqual(tok.decode([]), "")
      assert.strictEqual(tok.eosTokenId, 151645)
      assert.strictEqual(tok.padTokenId, 151643)
      assert.isTrue(tok.specialTokenIds.has(151644))
      assert.isFalse(tok.specialTokenIds.has(151667))
      assert.strictEqual(tok.vocabSize, 151669)
    }).pipe(Effect.provide(Tokenizer.layer)))

  it.effect("renders the Qwen3 chat template with tools and the generation prompt", () =>
    Effect.gen(function*() {
      const tok = yield* Tokenizer
      const text = yield* tok.render({
        messages: [{ role: "system", content: "You are helpful." }, { role: "user", content: "Hi!" }],
        tools: [],
        chatTemplateKwargs: {},
        addGenerationPrompt: true
      })
      assert.strictEqual(
        text,
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
      )
      const noThink = yield* tok.render({
        messages: [{ role: "user", content: "Hi!" }],
        tools: [],
        chatTemplateKwargs: { enable_thinking: false },
        addGenerationPrompt: true
      })
      assert.isTrue(noThink.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"))
      const withCall = yield* tok.render({
        messages: [
          { role: "user", content: "Weather in Paris?" },
          {
            role: "assistant",
            content: "",
            tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }]
          }
        ],
        tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }],
        chatTemplateKwargs: {},
        addGenerationPrompt: false
      })
      assert.include(withCall, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>")
      assert.include(withCall, "<tools>\n{\"type\": \"function\"")
    }).pipe(Effect.provide(Tokenizer.layer)))
})
