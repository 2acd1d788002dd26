import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as TempDir from "../support/TempDir.ts"

/** A minimal Hugging Face tokenizer directory (word-level model), written to a temporary directory. */
const tinyTokenizerDir = (config: Record<string, unknown>): string => {
  const dir = TempDir.forTest("tokenizer-test-")
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true
  })
  Fs.writeFileSync(
    Path.join(dir, "tokenizer.json"),
    JSON.stringify({
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
      normalizer: null,
      pre_tokenizer: { type: "WhitespaceSplit" },
      post_processor: null,
      decoder: { type: "WordPiece", prefix: "##", cleanup: false },
      model: {
        type: "WordLevel",
        vocab: { "<unk>": 0, "<s>": 1, "</s>": 2, hello: 3, world: 4, "user:": 5, "assistant:": 6 },
        unk_token: "<unk>"
      }
    })
  )
  Fs.writeFileSync(Path.join(dir, "tokenizer_config.json"), JSON.stringify(config))
  return dir
}

const tinyTemplate = "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }} {% endfor %}" +
  "{% if add_generation_prompt %}assistant:{% endif %}"

describe("Tokenizer (bundled Qwen3)", () => {
  it.effect("encodes special-token literals as special ids and round-trips", () =>
    Effect.gen(function*() {
      const tok = yield* Tokenizer.Tokenizer
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
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.effect("encodeAsync gives encode's ids, on a worker thread for a long text and in place for a short one", () =>
    Effect.gen(function*() {
      const tok = yield* Tokenizer.Tokenizer
      const line = "<|im_start|>tool\nfunction héllo(x) { return x + 1 } // 你好 🙂\n<|im_end|>\n"
      const long = line.repeat(Math.ceil(Tokenizer.OFF_LOOP_CHARS / line.length) + 1)
      const [offLoop, short] = yield* Effect.all([tok.encodeAsync(long), tok.encodeAsync(line)], { concurrency: 2 })
      assert.isAtLeast(long.length, Tokenizer.OFF_LOOP_CHARS)
      assert.deepStrictEqual([...offLoop], [...tok.encode(long)])
      assert.deepStrictEqual([...short], [...tok.encode(line)])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.effect("renders the Qwen3 chat template with tools and the generation prompt", () =>
    Effect.gen(function*() {
      const tok = yield* Tokenizer.Tokenizer
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
            tool_calls: [{
              id: "c1",
              type: "function",
              function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" }
            }]
          }
        ],
        tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }],
        chatTemplateKwargs: {},
        addGenerationPrompt: false
      })
      assert.include(
        withCall,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
      )
      assert.include(withCall, "<tools>\n{\"type\": \"function\"")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("Tokenizer (any Hugging Face tokenizer directory)", () => {
  it.effect("loads tokenizer.json + tokenizer_config.json: vocabulary, special tokens, eos/pad ids and the chat template", () =>
    Effect.gen(function*() {
      const dir = tinyTokenizerDir({
        eos_token: "</s>",
        pad_token: "<unk>",
        bos_token: "<s>",
        chat_template: tinyTemplate
      })
      const tok = yield* Tokenizer.load(dir)
      assert.strictEqual(tok.source, dir)
      assert.strictEqual(tok.eosTokenId, 2)
      assert.strictEqual(tok.eosToken, "</s>")
      assert.strictEqual(tok.padTokenId, 0)
      assert.strictEqual(tok.vocabSize, 7)
      assert.deepStrictEqual([...tok.specialTokenIds].sort(), [0, 1, 2])
      const text = Result.getOrThrow(tok.renderSync({
        messages: [{ role: "user", content: "hello world" }],
        tools: [],
        chatTemplateKwargs: {},
        addGenerationPrompt: true
      }))
      assert.strictEqual(text, "<s>user: hello world assistant:")
      assert.deepStrictEqual([...tok.encode(text)], [1, 5, 3, 4, 6])
      assert.strictEqual(tok.decode([3, 4, 2]), "hello world </s>")
      assert.strictEqual(tok.decode([3, 4, 2], { skipSpecialTokens: true }), "hello world")
    }))

  it.effect("names the directory and the fix when the files are missing or lack a chat template or eos token", () =>
    Effect.gen(function*() {
      const missing = Path.join(Os.tmpdir(), "no-such-tokenizer-dir")
      const absent = yield* Tokenizer.load(missing).pipe(Effect.flip)
      assert.strictEqual(absent._tag, "TokenizerLoadError")
      assert.include(absent.message, `cannot load the tokenizer from ${missing}`)
      assert.include(
        absent.message,
        "--tokenizer must name a directory holding tokenizer.json and tokenizer_config.json"
      )

      const noTemplate = tinyTokenizerDir({ eos_token: "</s>" })
      assert.include(
        (yield* Tokenizer.load(noTemplate).pipe(Effect.flip)).message,
        `cannot load the tokenizer from ${noTemplate}: tokenizer_config.json has no string chat_template`
      )
      const noEos = tinyTokenizerDir({ chat_template: tinyTemplate })
      assert.include((yield* Tokenizer.load(noEos).pipe(Effect.flip)).message, "tokenizer_config.json has no eos_token")
      const unknownEos = tinyTokenizerDir({ eos_token: "<|end|>", chat_template: tinyTemplate })
      assert.include(
        (yield* Tokenizer.load(unknownEos).pipe(Effect.flip)).message,
        "eos_token <|end|> is not in the vocabulary"
      )
    }))

  it.effect("Tokenizer.fromDirectory provides the service from a directory", () =>
    Effect.gen(function*() {
      const tok = yield* Tokenizer.Tokenizer
      assert.strictEqual(tok.eosTokenId, 2)
    }).pipe(
      Effect.provide(
        Tokenizer.Tokenizer.fromDirectory(
          tinyTokenizerDir({ eos_token: "</s>", bos_token: "<s>", chat_template: tinyTemplate })
        )
      )
    ))
})
