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
 * Each function comes as a plan (the text to encode and how many leading ids to drop) so a caller can encode the
 * text off the event loop (`Tokenizer.encodeAsync`), and as tokens encoded in place.
 */
import { Result } from "effect"
import type * as Canonical from "../protocol/canonical.ts"
import type { RenderInput, TemplateError } from "./ChatTemplate.ts"

/** What delta tokenization needs from a tokenizer (a structural slice of the Tokenizer service). */
export interface TemplateTokenizer {
  readonly encode: (text: string) => ReadonlyArray<number>
  /** Renders the chat template; template or tool-call-arguments errors are a `TemplateError`. */
  readonly renderSync: (request: RenderInput) => Result.Result<string, TemplateError>
  /** Ids of special added tokens; with them a delta whose prefix ends in one is encoded without the prefix. */
  readonly specialTokenIds?: ReadonlySet<number> | undefined
}

/** The calibration prefix; its exact roles and text fix where the delta starts, so keep it as the reference has it. */
export const DUMMY_MESSAGES: ReadonlyArray<Canonical.Message> = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "I am a user." }
]

/** What to encode for an observation: the ids are `encode(text)` without their first `skip` ids. */
export interface EncodePlan {
  readonly text: string
  readonly skip: number
}

/** The ids an {@link EncodePlan} stands for, given the ids of its text. */
export const planIds = (plan: EncodePlan, textIds: ReadonlyArray<number>): ReadonlyArray<number> =>
  plan.skip === 0 ? textIds : textIds.slice(plan.skip)

/** The ids an {@link EncodePlan} stands for, encoded in place with `encode`. */
export const encodePlan = (encode: (text: string) => ReadonlyArray<number>, plan: EncodePlan): ReadonlyArray<number> =>
  planIds(plan, encode(plan.text))

/** A root observation: the full conversation rendered with the generation prompt. */
export const rootPlan = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<EncodePlan, TemplateError> =>
  Result.map(
    tok.renderSync({ messages, tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true }),
    (text) => ({ text, skip: 0 })
  )

/** Tokens of a root observation: the full conversation rendered with the generation prompt. */
export const rootTokens = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<ReadonlyArray<number>, TemplateError> =>
  Result.map(rootPlan(tok, messages, tools, kwargs), (plan) => encodePlan(tok.encode, plan))

/**
 * The dummy prefix for one (tools, kwargs): its rendered text (trailing newlines stripped), its token count, and
 * whether the text after it can be encoded on its own.
 */
interface Calibration {
  readonly text: string
  readonly tokenCount: number
  readonly suffixOnly: boolean
}

/** Calibrations per tokenizer, keyed by the JSON of (tools, kwargs); a handful per run (the agents' tool sets). */
const calibrations = new WeakMap<TemplateTokenizer, Map<string, Calibration>>()
const MAX_CALIBRATIONS = 64

/** Deltas the suffix shortcut is checked with: one of each role a delta starts with. */
const PROBES: ReadonlyArray<ReadonlyArray<Canonical.Message>> = [
  [{ role: "user", content: "probe" }],
  [{ role: "tool", content: " probe" }]
]

const sameIds = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): boolean =>
  a.length === b.length && a.every((id, i) => id === b[i])

const fullText = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<string, TemplateError> =>
  tok.renderSync({ messages: [...DUMMY_MESSAGES, ...delta], tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true })

/**
 * Whether encoding the text after the dummy alone gives the same ids as encoding the whole text and cutting the
 * dummy's ids off. Only a dummy that ends in a special token qualifies (tokenizers split on special tokens before
 * anything else); the probes then catch a special token that strips the whitespace next to it, or a tokenizer that
 * treats the start of a text differently. A probe the template cannot render keeps the whole-text encode.
 */
const suffixOnly = (
  tok: TemplateTokenizer,
  dummy: string,
  dummyIds: ReadonlyArray<number>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): boolean => {
  const last = dummyIds[dummyIds.length - 1]
  if (last === undefined || tok.specialTokenIds?.has(last) !== true) return false
  return PROBES.every((probe) => {
    const full = fullText(tok, probe, tools, kwargs)
    return Result.isSuccess(full) && full.success.startsWith(dummy) &&
      sameIds(tok.encode(full.success.slice(dummy.length)), tok.encode(full.success).slice(dummyIds.length))
  })
}

const calibrate = (
  tok: TemplateTokenizer,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<Calibration, TemplateError> => {
  let cache = calibrations.get(tok)
  if (cache === undefined) {
    cache = new Map()
    calibrations.set(tok, cache)
  }
  const key = JSON.stringify([tools, kwargs])
  const known = cache.get(key)
  if (known !== undefined) return Result.succeed(known)
  const rendered = tok.renderSync({ messages: DUMMY_MESSAGES, tools, chatTemplateKwargs: kwargs, addGenerationPrompt: false })
  if (Result.isFailure(rendered)) return Result.fail(rendered.failure)
  const text = rendered.success.replace(/\n+$/, "")
  const ids = tok.encode(text)
  const calibration: Calibration = { text, tokenCount: ids.length, suffixOnly: suffixOnly(tok, text, ids, tools, kwargs) }
  if (cache.size >= MAX_CALIBRATIONS) cache.delete(cache.keys().next().value ?? "")
  cache.set(key, calibration)
  return Result.succeed(calibration)
}

/**
 * A deeper observation: encode(render(dummy + delta, generation prompt)) minus the tokens of render(dummy) with its
 * trailing newlines stripped.
 *
 * **Details**
 * The dummy's rendering and token count are computed once per (tools, kwargs). When the dummy ends in a special
 * token (and the probes agree, see `suffixOnly`), only the text after it is encoded, so the tool definitions in
 * the system prompt are not re-encoded on every request.
 */
export const deltaPlan = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<EncodePlan, TemplateError> => {
  const dummy = calibrate(tok, tools, kwargs)
  if (Result.isFailure(dummy)) return Result.fail(dummy.failure)
  const full = fullText(tok, delta, tools, kwargs)
  if (Result.isFailure(full)) return Result.fail(full.failure)
  const { text, tokenCount } = dummy.success
  return Result.succeed(
    dummy.success.suffixOnly && full.success.startsWith(text)
      ? { text: full.success.slice(text.length), skip: 0 }
      : { text: full.success, skip: tokenCount }
  )
}

/** Tokens a deeper observation adds (see {@link deltaPlan}). */
export const deltaTokens = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<ReadonlyArray<number>, TemplateError> =>
  Result.map(deltaPlan(tok, delta, tools, kwargs), (plan) => encodePlan(tok.encode, plan))
