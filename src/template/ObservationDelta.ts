/**
 * Observation delta tokenization (relax-behaviour §5.6): the token ids the chat template adds for new messages.
 *
 * **Details**
 * Generated ids are never re-tokenized: a SessionForest appends only the tokens of the *new* messages to the exact
 * history. At the root that is the full rendered prompt. Deeper, the new messages are rendered after a fixed dummy
 * system+user prefix and the prefix's tokens are cut off, so the delta starts right after the previous turn's end
 * token (Qwen3: with the `"\n"` after `<|im_end|>`) and ends with the generation prompt. Rendering the real history
 * instead would change earlier turns (Qwen3 strips old reasoning), breaking token-exactness.
 */
import type * as Canonical from "../protocol/canonical.ts"
import type { RenderInput } from "./ChatTemplate.ts"

/** What delta tokenization needs from a tokenizer (a structural slice of the Tokenizer service). */
export interface TemplateTokenizer {
  readonly encode: (text: string) => ReadonlyArray<number>
  /** Renders the chat template; throws on template or tool-call-arguments errors. */
  readonly renderUnsafe: (request: RenderInput) => string
  /** Ids of special added tokens; with them a delta whose prefix ends in one is encoded without the prefix. */
  readonly specialTokenIds?: ReadonlySet<number> | undefined
}

/** The calibration prefix; its exact roles and text fix where the delta starts, so keep it as the reference has it. */
export const DUMMY_MESSAGES: ReadonlyArray<Canonical.Message> = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "I am a user." }
]

/** Tokens of a root observation: the full conversation rendered with the generation prompt. */
export const rootTokens = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): ReadonlyArray<number> =>
  tok.encode(tok.renderUnsafe({ messages, tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true }))

/**
 * The dummy prefix for one (tools, kwargs): its rendered text (trailing newlines stripped), its token count, and
 * whether the text after it can be encoded on its own (`undefined` until checked once).
 */
interface Calibration {
  readonly text: string
  readonly tokenCount: number
  suffixOnly: boolean | undefined
}

/** Calibrations per tokenizer, keyed by the JSON of (tools, kwargs); a handful per run (the agents' tool sets). */
const calibrations = new WeakMap<TemplateTokenizer, Map<string, Calibration>>()
const MAX_CALIBRATIONS = 64

const calibrate = (
  tok: TemplateTokenizer,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Calibration => {
  let cache = calibrations.get(tok)
  if (cache === undefined) {
    cache = new Map()
    calibrations.set(tok, cache)
  }
  const key = JSON.stringify([tools, kwargs])
  const known = cache.get(key)
  if (known !== undefined) return known
  const text = tok
    .renderUnsafe({ messages: DUMMY_MESSAGES, tools, chatTemplateKwargs: kwargs, addGenerationPrompt: false })
    .replace(/\n+$/, "")
  const ids = tok.encode(text)
  const last = ids[ids.length - 1]
  // Only a prefix that ends in a special token can be cut off as text: tokenizers split on special tokens first.
  const calibration: Calibration = {
    text,
    tokenCount: ids.length,
    suffixOnly: last !== undefined && tok.specialTokenIds?.has(last) === true ? undefined : false
  }
  if (cache.size >= MAX_CALIBRATIONS) cache.delete(cache.keys().next().value ?? "")
  cache.set(key, calibration)
  return calibration
}

const sameIds = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): boolean =>
  a.length === b.length && a.every((id, i) => id === b[i])

/**
 * Tokens a deeper observation adds: encode(render(dummy + delta, generation prompt)) minus the tokens of
 * render(dummy) with its trailing newlines stripped.
 *
 * **Details**
 * The dummy's rendering and token count are computed once per (tools, kwargs). When the dummy ends in a special
 * token, the text after it is encoded alone (the tool definitions in the system prompt are not re-encoded on every
 * request); the first delta of each (tools, kwargs) checks that this gives the same ids as encoding the whole text
 * (a special token with lstrip/rstrip, or a tokenizer that prefixes the start of a text, would differ), and if not,
 * every delta of that key encodes the whole text as before.
 */
export const deltaTokens = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): ReadonlyArray<number> => {
  const dummy = calibrate(tok, tools, kwargs)
  const full = tok.renderUnsafe({
    messages: [...DUMMY_MESSAGES, ...delta],
    tools,
    chatTemplateKwargs: kwargs,
    addGenerationPrompt: true
  })
  if (dummy.suffixOnly !== false && full.startsWith(dummy.text)) {
    const suffix = tok.encode(full.slice(dummy.text.length))
    if (dummy.suffixOnly === true) return suffix
    const whole = tok.encode(full).slice(dummy.tokenCount)
    dummy.suffixOnly = sameIds(suffix, whole)
    return whole
  }
  return tok.encode(full).slice(dummy.tokenCount)
}
