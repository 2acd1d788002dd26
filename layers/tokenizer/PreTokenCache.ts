/**
 * Internal to the Tokenizer service: the Hugging Face JS tokenizer's `encode` with a bounded cache of pre-token →
 * ids in front of its byte-level mapping and BPE model, as Hugging Face's Rust tokenizers keep one.
 *
 * **Details**
 * The JS library already caches BPE merges per word, but every call still runs the byte-level pre-tokenizer on every
 * word (a `TextEncoder` buffer, an array and a joined string per word), the model's token-string list and the id
 * lookups: most of its CPU and ~140 KB of garbage per observation. Here the text goes through the library's steps
 * in the library's order (added-token splitting with its lstrip/rstrip rules — the library's dictionary split done
 * with one regular expression, see {@link dictionarySplit} —, the normalizer, skipped where NFC changes nothing, the
 * `Split` pre-tokenizer), and each `Split` piece's ids come from the cache or, on a miss, from the library's
 * byte-level pre-tokenizer and model. {@link plainEncoder} does the same with the special tokens left out. That is exact because those two work on each piece alone; the fast path is taken only for
 * tokenizers of that shape (a `Sequence` of `Split` then `ByteLevel` without regex or prefix space, a BPE model
 * without `fuse_unk`, a pass-through post-processor: Qwen2/2.5/3, Llama 3, …), every other tokenizer uses the
 * library's `encode` unchanged. `test/tokenizer/PreTokenCache.test.ts` compares both on random and realistic texts.
 *
 * The fields read here are private in the library's types; this module is the boundary that reads them.
 */
import type { Tokenizer as HfTokenizer } from "@huggingface/tokenizers"
import * as Json from "../../src/json/Json.ts"
import * as LiteralPattern from "../../src/template/LiteralPattern.ts"

/** A character at or above U+0300, where NFC can change text (combining marks start there). */
const BEYOND_NFC_STABLE = /[^\u0000-\u02ff]/

/** Pieces longer than this (long whitespace runs, huge words) are encoded every time, not cached. */
export const MAX_CACHED_PIECE = 256
/** Pieces per cache generation (unless told otherwise); the cache holds at most two generations. */
export const GENERATION_SIZE = 50_000

interface PieceStep {
  readonly pre_tokenize_text: (text: string) => ReadonlyArray<string>
}
/** The library's `Split` pre-tokenizer: its compiled global pattern and its configuration. */
interface SplitStep extends PieceStep {
  readonly pattern: RegExp | null
  readonly config: { readonly invert?: unknown; readonly behavior?: unknown }
}
/** The library's `DictionarySplitter`: a character trie whose nodes hold the word ending there under `end`. */
interface SplitterLike {
  readonly split: (text: string) => Array<string>
  readonly trie: unknown
}
interface AddedTokenLike {
  readonly id: number
  readonly content: string
  readonly lstrip: boolean
  readonly rstrip: boolean
  readonly special: boolean
  readonly normalized: boolean
}
/** The library internals this module reads (`@huggingface/tokenizers` 0.2, `src/core/Tokenizer.ts`). */
interface HfInternals {
  readonly tokenizer: {
    readonly pre_tokenizer?: unknown
    readonly normalizer?: unknown
    readonly model?: { readonly type?: unknown; readonly fuse_unk?: unknown; readonly vocab?: unknown }
    readonly post_processor?: unknown
  }
  readonly normalizer: ((text: string) => string) | null
  readonly pre_tokenizer: { readonly tokenizers?: ReadonlyArray<PieceStep> } | null
  readonly model: ((tokens: ReadonlyArray<string>) => ReadonlyArray<string>) & {
    readonly tokens_to_ids: ReadonlyMap<string, number>
    readonly unk_token_id: number | undefined
    readonly unk_token?: unknown
    readonly ignore_merges?: unknown
    readonly merges?: ReadonlyArray<unknown>
    readonly end_of_word_suffix?: unknown
    readonly continuing_subword_suffix?: unknown
  }
  readonly splitter_unnormalized: SplitterLike
  readonly splitter_normalized: SplitterLike
  readonly added_tokens: ReadonlyArray<AddedTokenLike>
  readonly added_tokens_map: ReadonlyMap<string, AddedTokenLike>
  readonly remove_space: unknown
  readonly do_lowercase_and_remove_accent: boolean
}

/** Whether the library's pipeline for this tokenizer is "split into pieces, then encode each piece alone". */
const piecewise = (lib: HfInternals): boolean => {
  const pre = lib.tokenizer.pre_tokenizer
  const steps = Json.isObject(pre) && pre["type"] === "Sequence" && Array.isArray(pre["pretokenizers"])
    ? (pre["pretokenizers"] as ReadonlyArray<unknown>)
    : []
  const [split, byteLevel] = steps
  const post = lib.tokenizer.post_processor
  return steps.length === 2 && Json.isObject(split) && split["type"] === "Split" &&
    Json.isObject(byteLevel) && byteLevel["type"] === "ByteLevel" && byteLevel["use_regex"] === false &&
    byteLevel["add_prefix_space"] !== true &&
    lib.tokenizer.model?.type === "BPE" && lib.tokenizer.model.fuse_unk !== true &&
    (post === null || post === undefined || (Json.isObject(post) && post["type"] === "ByteLevel")) &&
    lib.remove_space !== true && lib.do_lowercase_and_remove_accent !== true &&
    lib.pre_tokenizer?.tokenizers?.length === 2
}

/** Applies the added tokens' lstrip/rstrip to their neighbours, as the library does (in place). */
const stripAround = (addedTokens: ReadonlyMap<string, AddedTokenLike>, sections: Array<string>): void => {
  for (let i = 0; i < sections.length; i++) {
    const added = addedTokens.get(sections[i]!)
    if (added === undefined) continue
    if (added.lstrip && i > 0) sections[i - 1] = sections[i - 1]!.trimEnd()
    if (added.rstrip && i < sections.length - 1) sections[i + 1] = sections[i + 1]!.trimStart()
  }
}

/** The words of a `DictionarySplitter`'s trie (the `end` of every node), so the splitter's dictionary is exactly the library's. */
const trieWords = (trie: unknown): Array<string> => {
  const words: Array<string> = []
  const visit = (node: unknown): void => {
    if (!Json.isObject(node)) return
    for (const key of Object.keys(node)) {
      const child = node[key]
      if (key === "end") {
        if (typeof child === "string") words.push(child)
      } else visit(child)
    }
  }
  visit(trie)
  return words
}

/**
 * The library's `DictionarySplitter.split` (the text cut before and after every dictionary word, leftmost first, the
 * longest word at a position, empty pieces left out) with one regular expression instead of a walk of its trie per
 * character: an alternation of the words, longest first, finds the same leftmost-longest matches.
 */
export const dictionarySplit = (words: ReadonlyArray<string>): (text: string) => Array<string> => {
  const pattern = LiteralPattern.alternation(words, "g")
  if (pattern === undefined) return (text) => (text.length === 0 ? [] : [text])
  return (text) => {
    const pieces: Array<string> = []
    let start = 0
    pattern.lastIndex = 0
    for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
      if (match.index > start) pieces.push(text.slice(start, match.index))
      pieces.push(match[0])
      start = pattern.lastIndex
    }
    if (start < text.length) pieces.push(text.slice(start))
    return pieces
  }
}

/** Whether {@link cachedEncoder} puts the pre-token cache in front of this tokenizer (its shape allows it). */
export const usesPieceCache = (hf: HfTokenizer): boolean => piecewise(hf as unknown as HfInternals)

/**
 * `encode(text, { add_special_tokens: false }).ids` of `hf`, with a pre-token cache when the tokenizer's shape allows
 * it (see the module comment); the library's `encode` otherwise. `generationSize` (default {@link GENERATION_SIZE}):
 * pieces per cache generation (a test crosses generations with a small one).
 */
export const cachedEncoder = (
  hf: HfTokenizer,
  generationSize: number = GENERATION_SIZE
): (text: string) => ReadonlyArray<number> => {
  const direct = (text: string): ReadonlyArray<number> => hf.encode(text, { add_special_tokens: false }).ids
  // Decoding boundary: the library's private fields, checked for the expected shape before use.
  const lib = hf as unknown as HfInternals
  if (!piecewise(lib)) return direct
  return piecewiseEncoder(lib, {
    map: lib.added_tokens_map,
    splitUnnormalized: dictionarySplit(trieWords(lib.splitter_unnormalized.trie)),
    splitNormalized: dictionarySplit(trieWords(lib.splitter_normalized.trie))
  }, generationSize)
}

/**
 * The ids `hf` would give with its special added tokens left out of its `added_tokens` (special-token literals
 * encoded as the plain text they are: Hugging Face's `split_special_tokens=True`), from the same loaded tokenizer and
 * with the pre-token cache; `undefined` when that cannot be derived exactly (the caller then builds that tokenizer).
 *
 * **Details**
 * Such a tokenizer differs only in its added-token tables (rebuilt here from the non-special tokens, as the library's
 * constructor builds them) and in its model's token → id map, which lacks the special tokens' texts. That map is used
 * for the model's output tokens, so the shared model is exact when no output token can be a special token's text:
 * each is at least two characters long, in neither the vocabulary nor the merges' results, no non-special added token
 * or unknown token has the same text, and the model neither looks pieces up whole (`ignore_merges`) nor adds word
 * suffixes to its tokens.
 */
export const plainEncoder = (hf: HfTokenizer): ((text: string) => ReadonlyArray<number>) | undefined => {
  // Decoding boundary: the library's private fields, checked for the expected shape before use.
  const lib = hf as unknown as HfInternals
  if (
    !piecewise(lib) || lib.model.ignore_merges === true || Boolean(lib.model.end_of_word_suffix) ||
    Boolean(lib.model.continuing_subword_suffix) || !Array.isArray(lib.added_tokens)
  ) return undefined
  const specials = new Set(lib.added_tokens.filter((token) => token.special).map((token) => token.content))
  const vocab = lib.tokenizer.model?.vocab
  const merges = lib.model.merges
  if (!Json.isObject(vocab) || !Array.isArray(merges)) return undefined
  for (const content of specials) {
    if ([...content].length < 2 || Object.hasOwn(vocab, content)) return undefined
  }
  if (lib.added_tokens.some((token) => !token.special && specials.has(token.content))) return undefined
  if (typeof lib.model.unk_token === "string" && specials.has(lib.model.unk_token)) return undefined
  for (const merge of merges) {
    if (!Array.isArray(merge) || merge.length !== 2) return undefined
    if (specials.has(`${String(merge[0])}${String(merge[1])}`)) return undefined
  }
  // The library's constructor over the non-special tokens.
  const map = new Map<string, AddedTokenLike>()
  const unnormalized: Array<string> = []
  const normalized: Array<string> = []
  for (const token of lib.added_tokens) {
    if (token.special) continue
    map.set(token.content, token)
    if (token.normalized && lib.normalizer !== null) {
      const content = lib.normalizer(token.content)
      normalized.push(content)
      map.set(content, token)
    } else unnormalized.push(token.content)
  }
  return piecewiseEncoder(lib, {
    map,
    splitUnnormalized: dictionarySplit(unnormalized),
    splitNormalized: dictionarySplit(normalized)
  }, GENERATION_SIZE)
}

/** A tokenizer's added-token tables: contents (and normalized contents) → tokens, and the two dictionary splits. */
interface AddedTables {
  readonly map: ReadonlyMap<string, AddedTokenLike>
  readonly splitUnnormalized: (text: string) => Array<string>
  readonly splitNormalized: (text: string) => Array<string>
}

/** The library's encode steps with the given added-token tables, the pre-token cache in front of its model. */
const piecewiseEncoder = (
  lib: HfInternals,
  added: AddedTables,
  generationSize: number
): (text: string) => ReadonlyArray<number> => {
  const [split, byteLevel] = lib.pre_tokenizer!.tokenizers! as readonly [SplitStep, PieceStep]
  // The library splits with `matchAll`, keeping the text between matches (none for the usual patterns, which match
  // every character). Here a sticky copy of the pattern reads the pieces one after the other, each where the last one
  // ended (at a given position a match is the same with or without the sticky flag), with no match object or array
  // of pieces; at the first gap or empty match the ids read so far are dropped and the text goes to the library's
  // split, as its pieces do not cover the text then.
  const pattern = split.pattern !== null && split.pattern.global && split.config.invert !== true &&
      !(typeof split.config.behavior === "string" && split.config.behavior.toLowerCase() === "removed")
    ? new RegExp(
      split.pattern.source,
      split.pattern.flags.includes("y") ? split.pattern.flags : `${split.pattern.flags}y`
    )
    : undefined
  const model = lib.model
  const idOf = (token: string): number =>
    // As the library's `encode` maps token strings (an unknown token without `unk` stays undefined there too).
    (added.map.get(token)?.id ?? model.tokens_to_ids.get(token) ?? model.unk_token_id) as number
  const encodePiece = (piece: string): ReadonlyArray<number> => model(byteLevel.pre_tokenize_text(piece)).map(idOf)
  let current = new Map<string, ReadonlyArray<number>>()
  let previous = new Map<string, ReadonlyArray<number>>()
  const piece = (text: string): ReadonlyArray<number> => {
    let ids = current.get(text)
    if (ids !== undefined) return ids
    ids = previous.get(text) ?? encodePiece(text)
    if (text.length <= MAX_CACHED_PIECE) {
      if (current.size >= generationSize) {
        previous = current
        current = new Map()
      }
      current.set(text, ids)
    }
    return ids
  }
  const pushIds = (p: string, out: Array<number>): void => {
    const ids = piece(p)
    for (let i = 0; i < ids.length; i++) out.push(ids[i]!)
  }
  const encodeSection = (text: string, out: Array<number>): void => {
    if (pattern !== undefined) {
      const before = out.length
      let at = 0
      pattern.lastIndex = 0
      while (at < text.length && pattern.test(text) && pattern.lastIndex > at) {
        pushIds(text.slice(at, pattern.lastIndex), out)
        at = pattern.lastIndex
      }
      if (at === text.length) return
      // A gap or an empty match: the pieces do not cover the text; take the library's split (and nothing from here).
      out.length = before
    }
    for (const p of split.pre_tokenize_text(text)) if (p.length > 0) pushIds(p, out)
  }
  // NFC leaves text below U+0300 as it is (every such character is a starter that composes with nothing before it:
  // Unicode's NFC quick check says "yes"), so the normalizer is skipped for it.
  const normalizerConfig = lib.tokenizer.normalizer
  const nfcOnly = Json.isObject(normalizerConfig) && normalizerConfig["type"] === "NFC"
  return (text) => {
    const out: Array<number> = []
    const sections = added.splitUnnormalized(text)
    stripAround(added.map, sections)
    for (let section of sections) {
      if (section.length === 0) continue
      const token = added.map.get(section)
      if (token !== undefined) {
        out.push(token.id)
        continue
      }
      if (lib.normalizer !== null && !(nfcOnly && !BEYOND_NFC_STABLE.test(section))) section = lib.normalizer(section)
      if (section.length === 0) continue
      const subsections = added.splitNormalized(section)
      stripAround(added.map, subsections)
      for (const subsection of subsections) {
        if (subsection.length === 0) continue
        const addedInside = added.map.get(subsection)
        if (addedInside !== undefined) out.push(addedInside.id)
        else encodeSection(subsection, out)
      }
    }
    return out
  }
}
