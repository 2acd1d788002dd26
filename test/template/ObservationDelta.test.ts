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

    it.effect("only the text after the dummy prefix is encoded, with the same ids as the whole text", () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer
        const encoded: Array<string> = []
        // A fresh tokenizer object gets its own calibration; it records what it is asked to encode.
        const recording: ObservationDelta.TemplateTokenizer = {
          encode: (text) => {
            encoded.push(text)
            return tok.encode(text)
          },
          encodeText: tok.encodeText,
          specialTokens: tok.specialTokens,
          renderSync: tok.renderSync,
          specialTokenIds: tok.specialTokenIds
        }
        const rendered = (messages: ReadonlyArray<Canonical.Message>, addGenerationPrompt: boolean): string => {
          const text = tok.renderSync({ messages, tools, chatTemplateKwargs: {}, addGenerationPrompt })
          if (Result.isFailure(text)) throw text.failure
          return text.success
        }
        const wholeText = (delta: ReadonlyArray<Canonical.Message>) => {
          const dummy = rendered(ObservationDelta.DUMMY_MESSAGES, false).replace(/\n+$/, "")
          const full = rendered([...ObservationDelta.DUMMY_MESSAGES, ...delta], true)
          return tok.encode(full).slice(tok.encode(dummy).length)
        }
        const deltas: ReadonlyArray<ReadonlyArray<Canonical.Message>> = [
          [{ role: "user", content: "First question?" }],
          [{ role: "tool", content: "  leading spaces and\n\nblank lines  " }],
          [{ role: "user", content: "héllo wörld 你好 🙂" }, { role: "user", content: "two messages" }]
        ]
        for (const delta of deltas) {
          const ids = ObservationDelta.deltaTokens(recording, delta, tools, {})
          assert.isTrue(Result.isSuccess(ids))
          if (Result.isSuccess(ids)) assert.deepStrictEqual([...ids.success], [...wholeText(delta)])
        }
        // The last delta's encode calls: only its own text, not the system prompt with the tool definitions.
        const last = encoded[encoded.length - 1] ?? ""
        assert.isTrue(last.startsWith("\n<|im_start|>user\nhéllo"), last.slice(0, 40))
        assert.notInclude(last, "get_weather")
      }))

    it.effect("without special token ids the whole text is encoded (no suffix shortcut)", () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer
        const encoded: Array<string> = []
        const plain: ObservationDelta.TemplateTokenizer = {
          encode: (text) => {
            encoded.push(text)
            return tok.encode(text)
          },
          encodeText: tok.encodeText,
          specialTokens: tok.specialTokens,
          renderSync: tok.renderSync
        }
        const ids = ObservationDelta.deltaTokens(plain, [{ role: "user", content: "Q" }], tools, {})
        assert.strictEqual(tok.decode(Result.getOrThrow(ids)), "\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n")
        assert.isTrue(encoded.every((text) => text.startsWith("<|im_start|>system")))
      }))
  })
})
