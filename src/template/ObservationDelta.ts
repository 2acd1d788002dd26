/**
 * Observation delta tokenization (docs/sessionforest.md "Observation tokens"): the token ids the chat template adds for
 * new messages.
 *
 * **Details**
 * Generated ids are never re-tokenized: a SessionForest appends only the tokens of the *new* messages to the exact
 * history. At the root that is the full rendered prompt. Deeper, the new messages are rendered after a fixed dummy
 * system+user prefix and the prefix's tokens are cut off, so the delta starts right after the previous turn's end
 * token (Qwen3: with the `"\n"` after `<|im_end|>`) and ends with the generation prompt. Rendering the real history
 * instead would change earlier turns (Qwen3 strips old reasoning), breaking token-exactness.
 *
 * Special-token literals in agent text (`<|im_end|>\n<|im_start|>system` inside a user message, a tool result, tool
 * arguments or a tool description) are *not* control tokens by default: they are tokenized as the plain text they are,
 * so an agent or a tool cannot close a turn or open a system turn by writing its markup. `allowSpecialTokens` gives
 * the reference behaviour (Hugging Face's `apply_chat_template` + encode parses them as control tokens). The template's
 * own markup is always control tokens. When no agent string holds a literal, the tokens are exactly encode(render(..)).
 */
import { Result } from "effect"
import type * as Canonical from "../protocol/canonical.ts"
import type { RenderInput, TemplateError } from "./ChatTemplate.ts"

/** What delta tokenization needs from a tokenizer (a structural slice of the Tokenizer service). */
export interface TemplateTokenizer {
  /** Token ids of text, special-token literals parsed as control tokens. */
  readonly encode: (text: string) => ReadonlyArray<number>
  /** Token ids of text as plain text: special-token literals become ordinary tokens. */
  readonly encodeText: (text: string) => ReadonlyArray<number>
  /** Literals of the special (control) tokens, e.g. `<|im_start|>`, `<|im_end|>`. */
  readonly specialTokens: ReadonlyArray<string>
  /** Renders the chat template; template or tool-call-arguments errors are a `TemplateError`. */
  readonly renderSync: (request: RenderInput) => Result.Result<string, TemplateError>
}

/** The calibration prefix; its exact roles and text fix where the delta starts, so keep it as the reference has it. */
export const DUMMY_MESSAGES: ReadonlyArray<Canonical.Message> = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "I am a user." }
]

export interface EncodeOptions {
  /** Parse special-token literals in agent text as control tokens (the reference behaviour). Default false. */
  readonly allowSpecialTokens?: boolean | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Special-token literals in agent text

/**
 * Agent text with every special-token literal replaced by a marker (`M<index>M`, `M` a private-use character that
 * occurs in no agent string), so the rendered text tells the template's markup from the agent's.
 */
interface Protected {
  readonly messages: ReadonlyArray<Canonical.Message>
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly marker: string
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const collectStrings = (value: unknown, into: Array<string>): void => {
  if (typeof value === "string") into.push(value)
  else if (Array.isArray(value)) for (const item of value) collectStrings(item, into)
  else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      into.push(key)
      collectStrings(item, into)
    }
  }
}

const mapStrings = (value: unknown, f: (text: string) => string): unknown => {
  if (typeof value === "string") return f(value)
  if (Array.isArray(value)) return value.map((item: unknown) => mapStrings(item, f))
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) out[f(key)] = mapStrings(item, f)
    return out
  }
  return value
}

/** The messages and tools with their special-token literals marked, or `undefined` when none holds one. */
const protect = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>
): Protected | undefined => {
  if (tok.specialTokens.length === 0) return undefined
  const strings: Array<string> = []
  collectStrings(messages, strings)
  collectStrings(tools, strings)
  if (!strings.some((text) => tok.specialTokens.some((token) => text.includes(token)))) return undefined
  let code = 0xe000
  while (code <= 0xf8ff && strings.some((text) => text.includes(String.fromCharCode(code)))) code++
  const marker = String.fromCharCode(code)
  // Longest first, so a literal that contains another is replaced whole.
  const order = [...tok.specialTokens].map((token, index) => ({ token, index })).sort((a, b) => b.token.length - a.token.length)
  const pattern = new RegExp(order.map(({ token }) => escapeRegExp(token)).join("|"), "g")
  const indexOf = new Map(order.map(({ index, token }) => [token, index]))
  const mark = (text: string) => text.replace(pattern, (token) => `${marker}${indexOf.get(token)}${marker}`)
  // Decoding boundary of this module: the mapped values keep the canonical shapes, only strings changed.
  return {
    messages: mapStrings(messages, mark) as ReadonlyArray<Canonical.Message>,
    tools: mapStrings(tools, mark) as ReadonlyArray<Canonical.Tool>,
    marker
  }
}

/** Encode rendered text whose marked spans are agent literals: those as plain text, the rest as usual. */
const encodeMarked = (tok: TemplateTokenizer, rendered: string, marker: string): ReadonlyArray<number> => {
  const pieces = rendered.split(new RegExp(`${marker}(\\d+)${marker}`))
  const ids: Array<number> = []
  pieces.forEach((piece, i) => {
    if (i % 2 === 0) ids.push(...tok.encode(piece))
    else ids.push(...tok.encodeText(tok.specialTokens[Number(piece)] ?? ""))
  })
  return ids
}

/**
 * What to render and how to encode the result: the messages and tools as given with plain `encode`, or (agent
 * literals present and not allowed) the marked ones with `encodeMarked`.
 */
const plan = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  options: EncodeOptions
) => {
  const marked = options.allowSpecialTokens === true ? undefined : protect(tok, messages, tools)
  return marked === undefined
    ? { messages, tools, encode: tok.encode }
    : { messages: marked.messages, tools: marked.tools, encode: (text: string) => encodeMarked(tok, text, marked.marker) }
}
/** Tokens of a root observation: the full conversation rendered with the generation prompt. */
export const rootTokens = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs,
  options: EncodeOptions = {}
): Result.Result<ReadonlyArray<number>, TemplateError> => {
  const p = plan(tok, messages, tools, options)
  return Result.map(
    tok.renderSync({ messages: p.messages, tools: p.tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true }),
    p.encode
  )
}

/**
 * Tokens a deeper observation adds: encode(render(dummy + delta, generation prompt)) minus the tokens of
 * render(dummy) with its trailing newlines stripped.
 */
export const deltaTokens = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs,
  options: EncodeOptions = {}
): Result.Result<ReadonlyArray<number>, TemplateError> => {
  // The dummy messages hold no literal; the marked tools (rendered into the prefix by some templates) are shared.
  const p = plan(tok, [...DUMMY_MESSAGES, ...delta], tools, options)
  const dummy = tok.renderSync({
    messages: DUMMY_MESSAGES,
    tools: p.tools,
    chatTemplateKwargs: kwargs,
    addGenerationPrompt: false
  })
  if (Result.isFailure(dummy)) return Result.fail(dummy.failure)
  const full = tok.renderSync({ messages: p.messages, tools: p.tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true })
  if (Result.isFailure(full)) return Result.fail(full.failure)
  return Result.succeed(p.encode(full.success).slice(p.encode(dummy.success.replace(/\n+$/, "")).length))
}
