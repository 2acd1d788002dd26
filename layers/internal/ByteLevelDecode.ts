/**
 * Internal to the Tokenizer service: the Hugging Face JS tokenizer's `decode` for byte-level tokenizers, with each
 * token's bytes looked up once instead of on every call.
 *
 * **Details**
 * The library decodes by mapping ids to token strings, looking every token up in its added-token list (a linear
 * search per token), joining the strings and mapping each character back to its byte through an array of characters:
 * ~0.36 µs a token, so a 2,000-token answer costs ~0.7 ms. Here each id's token string gets its bytes (the same
 * character → byte table, a character outside it giving 0 as in the library), whether it is an added token and
 * whether it is special, once; a decode copies bytes into one buffer and runs the same `TextDecoder` (UTF-8, not
 * fatal, BOM kept) over each run of non-added tokens, an added token's text standing as it is between runs, as the
 * library's `ByteLevel` decoder does. Used only for a plain `ByteLevel` decoder without end-of-word suffix or
 * tokenization-space clean-up (Qwen2/2.5/3, …); a token string holding a UTF-16 surrogate (which the library's
 * per-character split could pair across tokens) sends that call to the library. `test/layers/ByteLevelDecode.test.ts`
 * compares both.
 *
 * The fields read here are private in the library's types; this module is the boundary that reads them.
 */
import type { Tokenizer as HfTokenizer } from "@huggingface/tokenizers"

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

/** One id's part of a decode: its bytes, or the added token's text; `special` when skipping special tokens drops it. */
interface Piece {
  readonly bytes: Uint8Array
  readonly added: string | undefined
  readonly special: boolean
}

const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === "object"

const hasSurrogate = (text: string): boolean => /[\ud800-\udfff]/.test(text)

/** Whether {@link byteLevelDecoder} decodes this tokenizer itself (its decoder has that shape). */
export const usesByteLevelDecode = (hf: HfTokenizer): boolean => {
  const lib = hf as unknown as HfDecodeInternals
  const config = lib.tokenizer.decoder
  return isRecord(config) && config["type"] === "ByteLevel" && lib.decoder !== null &&
    isRecord(lib.decoder.byte_decoder) && Array.isArray(lib.decoder.added_tokens) &&
    !lib.decoder.end_of_word_suffix && lib.clean_up_tokenization_spaces === false
}

/**
 * `decode(ids, { skip_special_tokens })` of `hf` for a non-empty id list, with per-id bytes when the decoder's shape
 * allows it (see the module comment); the library's `decode` otherwise.
 */
export const byteLevelDecoder = (hf: HfTokenizer): ((ids: ReadonlyArray<number>, skipSpecialTokens: boolean) => string) => {
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
  const empty = new Uint8Array(0)
  /** The piece of an id, or `undefined` when its token string holds a surrogate (the library decodes the call). */
  const pieceOf = (token: string | undefined): Piece | undefined => {
    if (token === undefined) return { bytes: empty, added: undefined, special: false }
    const special = lib.special_tokens.includes(token)
    if (addedTokens.some((added) => added.content === token)) return { bytes: empty, added: token, special }
    if (hasSurrogate(token)) return undefined
    const bytes = new Uint8Array(token.length)
    for (let i = 0; i < token.length; i++) bytes[i] = byteOf[token[i]!] ?? 0
    return { bytes, added: undefined, special }
  }
  const pieces: Array<Piece | null | undefined> = new Array<Piece | null | undefined>(vocab.length)
  /** The piece of `id`: built on first use (`null` marks a surrogate token). */
  const piece = (id: number): Piece | undefined => {
    if (!(id >= 0 && id < pieces.length)) return pieceOf(vocab[id] ?? unknown)
    let known = pieces[id]
    if (known === undefined) {
      known = pieceOf(vocab[id] ?? unknown) ?? null
      pieces[id] = known
    }
    return known ?? undefined
  }
  let buffer = new Uint8Array(4096)
  return (ids, skipSpecialTokens) => {
    let text = ""
    let length = 0
    for (let i = 0; i < ids.length; i++) {
      const p = piece(ids[i]!)
      if (p === undefined) return library(ids, skipSpecialTokens)
      if (skipSpecialTokens && p.special) continue
      if (p.added !== undefined) {
        if (length > 0) text += textDecoder.decode(buffer.subarray(0, length))
        length = 0
        text += p.added
        continue
      }
      const bytes = p.bytes
      if (length + bytes.length > buffer.length) {
        const grown = new Uint8Array(Math.max(buffer.length * 2, length + bytes.length))
        grown.set(buffer.subarray(0, length))
        buffer = grown
      }
      for (let j = 0; j < bytes.length; j++) buffer[length + j] = bytes[j]!
      length += bytes.length
    }
    if (length > 0) text += textDecoder.decode(buffer.subarray(0, length))
    return text
  }
}
