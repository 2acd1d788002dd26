/**
 * Internal to the Tokenizer service: the Hugging Face JS tokenizer's `decode` for byte-level tokenizers, with each
 * token's bytes looked up once instead of on every call.
 *
 * **Details**
 * The library decodes by mapping ids to token strings, looking every token up in its added-token list (a linear
 * search per token), joining the strings and mapping each character back to its byte through an array of characters,
 * which makes decoding a long answer cost (docs/performance.md, "Figures behind code comments"). Here each id's token string gets its bytes (the same
 * character → byte table, a character outside it giving 0 as in the library), whether it is an added token and
 * whether it is special, once; a decode copies bytes into one buffer and runs the same `TextDecoder` (UTF-8, not
 * fatal, BOM kept) over each run of non-added tokens, an added token's text standing as it is between runs, as the
 * library's `ByteLevel` decoder does. Used only for a plain `ByteLevel` decoder without end-of-word suffix or
 * tokenization-space clean-up (Qwen2/2.5/3, …); a token string holding a UTF-16 surrogate (which the library's
 * per-character split could pair across tokens), and an id outside the vocabulary, send that call to the library.
 * `test/tokenizer/ByteLevelDecode.test.ts` compares both.
 *
 * The fields read here are private in the library's types; this module is the boundary that reads them.
 */
import type { Tokenizer as HfTokenizer } from "@huggingface/tokenizers"
import * as Json from "../../src/json/Json.ts"

/** The library internals this module reads (`@huggingface/tokenizers` 0.2, `src/core/Tokenizer.ts`). */
interface HfDecodeInternals {
  readonly tokenizer: { readonly decoder?: unknown }
  readonly decoder: {
    readonly byte_decoder?: Readonly<Record<string, number>>
    readonly added_tokens?: ReadonlyArray<{ readonly content: string }>
    readonly end_of_word_suffix?: unknown
  } | null
  readonly model: { readonly vocab: ReadonlyArray<string | undefined>; readonly unk_token?: unknown }
  readonly special_tokens: ReadonlyArray<string>
  readonly clean_up_tokenization_spaces: unknown
}

/** Kinds of ids: bytes in a run, an added token's text, or sent to the library; SPECIAL marks special tokens. */
const BYTES = 1
const ADDED = 2
const LIBRARY = 4
const SPECIAL = 8

const hasSurrogate = (text: string): boolean => /[\ud800-\udfff]/.test(text)

/** Whether {@link byteLevelDecoder} decodes this tokenizer itself (its decoder has that shape). */
export const usesByteLevelDecode = (hf: HfTokenizer): boolean => {
  const lib = hf as unknown as HfDecodeInternals
  const config = lib.tokenizer.decoder
  return Json.isObject(config) && config["type"] === "ByteLevel" && lib.decoder !== null &&
    Json.isObject(lib.decoder.byte_decoder) && Array.isArray(lib.decoder.added_tokens) &&
    !lib.decoder.end_of_word_suffix && lib.clean_up_tokenization_spaces === false
}

/**
 * `decode(ids, { skip_special_tokens })` of `hf` for a non-empty id list, with per-id bytes when the decoder's shape
 * allows it (see the module comment); the library's `decode` otherwise.
 */
export const byteLevelDecoder = (
  hf: HfTokenizer
): (ids: ReadonlyArray<number>, skipSpecialTokens: boolean) => string => {
  const library = (ids: ReadonlyArray<number>, skipSpecialTokens: boolean): string =>
    hf.decode([...ids], { skip_special_tokens: skipSpecialTokens })
  if (!usesByteLevelDecode(hf)) return library
  // Decoding boundary: the library's private fields, checked for the expected shape above.
  const lib = hf as unknown as HfDecodeInternals
  const byteOf = lib.decoder!.byte_decoder!
  const addedTokens = lib.decoder!.added_tokens!
  const vocab = lib.model.vocab
  const unknown = typeof lib.model.unk_token === "string" ? lib.model.unk_token : undefined
  const textDecoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true })
  // Per id, built on first use: its kind (and whether it is special), and its bytes in one shared arena, so a vocabulary
  // of 150,000 ids costs a few MB at most.
  const size = vocab.length
  const kinds = new Uint8Array(size)
  const starts = new Int32Array(size)
  const lengths = new Int32Array(size)
  const addedTexts = new Map<number, string>()
  let arena = new Uint8Array(64 * 1024)
  let arenaLength = 0
  /** The kind of `token` (an id's token string) with its bytes written at `arenaLength` for BYTES. */
  const classify = (token: string | undefined): number => {
    if (token === undefined) return BYTES
    const special = lib.special_tokens.includes(token) ? SPECIAL : 0
    if (addedTokens.some((added) => added.content === token)) return ADDED | special
    if (hasSurrogate(token)) return LIBRARY
    if (arenaLength + token.length > arena.length) {
      const grown = new Uint8Array(Math.max(arena.length * 2, arenaLength + token.length))
      grown.set(arena.subarray(0, arenaLength))
      arena = grown
    }
    for (let i = 0; i < token.length; i++) arena[arenaLength + i] = byteOf[token[i]!] ?? 0
    return BYTES | special
  }
  /** The kind of `id`, its bytes at `starts[id]` / `lengths[id]` in the arena (`id` in the vocabulary's range). */
  const kindOf = (id: number): number => {
    let kind = kinds[id]!
    if (kind === 0) {
      const token = vocab[id] ?? unknown
      kind = classify(token)
      if ((kind & ADDED) !== 0) addedTexts.set(id, token!)
      else if ((kind & BYTES) !== 0) {
        starts[id] = arenaLength
        lengths[id] = token?.length ?? 0
        arenaLength += lengths[id]!
      }
      kinds[id] = kind
    }
    return kind
  }
  let buffer = new Uint8Array(4096)
  return (ids, skipSpecialTokens) => {
    // An id outside the vocabulary (the unknown token's text, if any) is rare: such lists go to the library.
    let text = ""
    let length = 0
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!
      if (!(id >= 0 && id < size)) return library(ids, skipSpecialTokens)
      const kind = kindOf(id)
      if (kind === LIBRARY) return library(ids, skipSpecialTokens)
      if (skipSpecialTokens && (kind & SPECIAL) !== 0) continue
      if ((kind & ADDED) !== 0) {
        if (length > 0) text += textDecoder.decode(buffer.subarray(0, length))
        length = 0
        text += addedTexts.get(id)!
        continue
      }
      const from = starts[id]!
      const count = lengths[id]!
      if (length + count > buffer.length) {
        const grown = new Uint8Array(Math.max(buffer.length * 2, length + count))
        grown.set(buffer.subarray(0, length))
        buffer = grown
      }
      for (let j = 0; j < count; j++) buffer[length + j] = arena[from + j]!
      length += count
    }
    if (length > 0) text += textDecoder.decode(buffer.subarray(0, length))
    return text
  }
}
