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
 *
 * Each function comes as a plan (the text to encode, how many leading ids to drop, and the marker when agent literals
 * are marked) so a caller can encode a plain text off the event loop (`Tokenizer.encodeAsync`), and as tokens encoded
 * in place.
 */
import { Result } from "effect"
import type * as Canonical from "../protocol/Canonical.ts"
import type * as ChatTemplate from "./ChatTemplate.ts"
import * as LiteralPattern from "./LiteralPattern.ts"

/** What delta tokenization needs from a tokenizer (a structural slice of the Tokenizer service). */
export interface TemplateTokenizer {
  /** Token ids of text, special-token literals parsed as control tokens. */
  readonly encode: (text: string) => ReadonlyArray<number>
  /** Token ids of text as plain text: special-token literals become ordinary tokens. */
  readonly encodeText: (text: string) => ReadonlyArray<number>
  /** Literals of the special (control) tokens, e.g. `<|im_start|>`, `<|im_end|>`. */
  readonly specialTokens: ReadonlyArray<string>
  /** Renders the chat template; template or tool-call-arguments errors are a `TemplateError`. */
  readonly renderSync: (request: ChatTemplate.RenderInput) => Result.Result<string, ChatTemplate.TemplateError>
  /** Ids of special added tokens; with them a delta whose prefix ends in one is encoded without the prefix. */
  readonly specialTokenIds?: ReadonlySet<number> | undefined
  /** Set when the template's text after its tool-dependent prefix does not depend on the tools (`ChatTemplate.toolsPrefix`). */
  readonly toolsPrefix?: ChatTemplate.ToolsPrefix | undefined
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

const collectStrings = (value: unknown, into: Array<string>): void => {
  if (typeof value === "string") into.push(value)
  else if (Array.isArray(value)) { for (const item of value) collectStrings(item, into) }
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

/** The patterns of every special-token literal per tokenizer (built on first use): to test, and to replace with. */
const literalPatterns = new WeakMap<TemplateTokenizer, { readonly test: RegExp; readonly all: RegExp } | undefined>()
const literalPattern = (tok: TemplateTokenizer): { readonly test: RegExp; readonly all: RegExp } | undefined => {
  if (literalPatterns.has(tok)) return literalPatterns.get(tok)
  const test = LiteralPattern.alternation(tok.specialTokens)
  const all = LiteralPattern.alternation(tok.specialTokens, "g")
  const patterns = test === undefined || all === undefined ? undefined : { test, all }
  literalPatterns.set(tok, patterns)
  return patterns
}

/** Whether any string of `value` (object keys included) holds a match of `pattern` (not global: no state). */
const holdsLiteral = (value: unknown, pattern: RegExp): boolean => {
  if (typeof value === "string") return pattern.test(value)
  if (Array.isArray(value)) return value.some((item: unknown) => holdsLiteral(item, pattern))
  if (value !== null && typeof value === "object") {
    for (const key of Object.keys(value)) {
      if (pattern.test(key) || holdsLiteral(Reflect.get(value, key), pattern)) return true
    }
  }
  return false
}

/** Whether a tool list holds a literal, kept per list and pattern (canonical lists are immutable; agents reuse theirs). */
const toolLiterals = new WeakMap<ReadonlyArray<Canonical.Tool>, WeakMap<RegExp, boolean>>()
const toolsHoldLiteral = (tools: ReadonlyArray<Canonical.Tool>, pattern: RegExp): boolean => {
  let known = toolLiterals.get(tools)
  if (known === undefined) {
    known = new WeakMap()
    toolLiterals.set(tools, known)
  }
  let holds = known.get(pattern)
  if (holds === undefined) {
    holds = holdsLiteral(tools, pattern)
    known.set(pattern, holds)
  }
  return holds
}

/** The messages and tools with their special-token literals marked, or `undefined` when none holds one. */
const protect = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>
): Protected | undefined => {
  const literal = literalPattern(tok)
  if (literal === undefined || (!holdsLiteral(messages, literal.test) && !toolsHoldLiteral(tools, literal.test))) {
    return undefined
  }
  const strings: Array<string> = []
  collectStrings(messages, strings)
  collectStrings(tools, strings)
  let code = 0xe000
  while (code <= 0xf8ff && strings.some((text) => text.includes(String.fromCharCode(code)))) code++
  const marker = String.fromCharCode(code)
  // The pattern tries the longest literal first, so a literal that contains another is replaced whole.
  const indexOf = new Map(tok.specialTokens.map((token, index) => [token, index]))
  const mark = (text: string) => text.replace(literal.all, (token) => `${marker}${indexOf.get(token)}${marker}`)
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
 * What to render and how to encode it: the messages and tools as given, or (agent literals present and not allowed)
 * the marked ones with the marker their spans are encoded by.
 */
const protectedInput = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  options: EncodeOptions
): {
  readonly messages: ReadonlyArray<Canonical.Message>
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly marker?: string
} => {
  const marked = options.allowSpecialTokens === true ? undefined : protect(tok, messages, tools)
  return marked ?? { messages, tools }
}

/**
 * What to encode for an observation: the ids are the encoding of `text` without their first `skip` ids. With a
 * `marker`, the text holds marked agent literals and must be encoded in place (`encodePlan`); without one it is plain
 * text any `encode` of the same tokenizer gives the ids of (`Tokenizer.encodeAsync` included).
 */
export interface EncodePlan {
  readonly text: string
  readonly skip: number
  readonly marker?: string | undefined
}

/** The ids an {@link EncodePlan} stands for, given the ids of its text. */
export const planIds = (plan: EncodePlan, textIds: ReadonlyArray<number>): ReadonlyArray<number> =>
  plan.skip === 0 ? textIds : textIds.slice(plan.skip)

/** The ids an {@link EncodePlan} stands for, encoded in place. */
export const encodePlan = (tok: TemplateTokenizer, plan: EncodePlan): ReadonlyArray<number> =>
  planIds(plan, plan.marker === undefined ? tok.encode(plan.text) : encodeMarked(tok, plan.text, plan.marker))

/**
 * How an observation's messages (all of a root's, a deeper observation's delta) become an {@link EncodePlan} under
 * the subtree's tools and template kwargs: {@link rootPlan} or {@link deltaPlan}.
 */
export type Planner = (
  tok: TemplateTokenizer,
  messages: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs,
  options?: EncodeOptions
) => Result.Result<EncodePlan, ChatTemplate.TemplateError>

/** A root observation: the full conversation rendered with the generation prompt. */
export const rootPlan: Planner = (tok, messages, tools, kwargs, options = {}) => {
  const p = protectedInput(tok, messages, tools, options)
  return Result.map(
    tok.renderSync({ messages: p.messages, tools: p.tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true }),
    (text) => ({ text, skip: 0, marker: p.marker })
  )
}

/** How an observation's messages become the token ids it adds: a {@link Planner}'s plan, encoded. */
export type Encoder = (
  ...input: Parameters<Planner>
) => Result.Result<ReadonlyArray<number>, ChatTemplate.TemplateError>

const encodedBy = (plan: Planner): Encoder => (tok, messages, tools, kwargs, options) =>
  Result.map(plan(tok, messages, tools, kwargs, options), (planned) => encodePlan(tok, planned))

/** Tokens of a root observation: the full conversation rendered with the generation prompt. */
export const rootTokens: Encoder = encodedBy(rootPlan)

/**
 * The dummy prefix for one (tools, kwargs) without marked literals: its rendered text, its token count, whether the
 * text after it can be encoded on its own, and whether deltas can be rendered without the tools.
 */
interface Calibration {
  /** render(dummy) with its trailing newlines stripped: the ids of this are cut off a delta's. */
  readonly text: string
  readonly tokenCount: number
  readonly suffixOnly: boolean
  /** render(dummy), trailing newlines kept. */
  readonly rendered: string
  /**
   * render(dummy) without the tools, when render(dummy + delta) is `rendered` followed by what render(dummy + delta)
   * without the tools has after this (see `withoutTools`); `undefined` when deltas are rendered with the tools.
   */
  readonly bare: string | undefined
}

/** Calibrations per tokenizer, keyed by the JSON of (tools, kwargs); a handful per run (the agents' tool sets). */
const calibrations = new WeakMap<TemplateTokenizer, Map<string, Calibration>>()
const MAX_CALIBRATIONS = 64

/** Deltas the suffix shortcut is checked with: one of each role a delta starts with. */
const PROBES: ReadonlyArray<ReadonlyArray<Canonical.Message>> = [
  [{ role: "user", content: "probe" }],
  [{ role: "tool", content: " probe" }]
]

/**
 * Deltas rendering without the tools is checked with: each role, consecutive tool results, an assistant turn with
 * reasoning and a tool call, a late system message and an image part (which a text-only template rejects both ways).
 */
const TOOLS_PROBES: ReadonlyArray<ReadonlyArray<Canonical.Message>> = [
  [{ role: "user", content: "probe" }],
  [{ role: "tool", content: "probe", tool_call_id: "a" }, { role: "tool", content: " probe\n", tool_call_id: "b" }],
  [
    {
      role: "assistant",
      content: "answer",
      reasoning_content: "thinking",
      tool_calls: [{ id: "a", type: "function", function: { name: "probe", arguments: "{\"x\":1}" } }]
    },
    { role: "tool", content: "result", tool_call_id: "a" },
    { role: "user", content: "next" }
  ],
  [{ role: "system", content: "late system" }, { role: "user", content: "probe" }],
  [{
    role: "user",
    content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } }]
  }]
]

const sameIds = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): boolean =>
  a.length === b.length && a.every((id, i) => id === b[i])

const fullText = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<string, ChatTemplate.TemplateError> =>
  tok.renderSync({
    messages: [...DUMMY_MESSAGES, ...delta],
    tools,
    chatTemplateKwargs: kwargs,
    addGenerationPrompt: true
  })

/** render(dummy + delta) without the tools: the dummy's tool block is neither converted nor rendered. */
const bareText = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<string, ChatTemplate.TemplateError> =>
  tok.renderSync({
    messages: [...DUMMY_MESSAGES, ...delta],
    tools: [],
    chatTemplateKwargs: kwargs,
    addGenerationPrompt: true
  })

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

/**
 * render(dummy) without the tools, when deltas can be rendered without them: the template's text is proven to be a
 * tool-dependent prefix that reads no message past the dummy, followed by text that does not depend on the tools
 * (`ChatTemplate.toolsPrefix`), so render(dummy + delta) = `rendered` + (render(dummy + delta) without the tools,
 * after `bare`) whenever the latter starts with `bare`. The probes check the same on every kind of delta, both ways
 * (a probe either template rendering rejects must be rejected by both); `undefined` keeps the full render.
 */
const withoutTools = (
  tok: TemplateTokenizer,
  rendered: string,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): string | undefined => {
  if (tok.toolsPrefix === undefined || tok.toolsPrefix.messagesRead > DUMMY_MESSAGES.length) return undefined
  const bare = tok.renderSync({
    messages: DUMMY_MESSAGES,
    tools: [],
    chatTemplateKwargs: kwargs,
    addGenerationPrompt: false
  })
  if (Result.isFailure(bare)) return undefined
  const agrees = TOOLS_PROBES.every((probe) => {
    const full = fullText(tok, probe, tools, kwargs)
    const without = bareText(tok, probe, kwargs)
    if (Result.isFailure(full) || Result.isFailure(without)) {
      return Result.isFailure(full) && Result.isFailure(without) && full.failure.detail === without.failure.detail
    }
    return without.success.startsWith(bare.success) &&
      full.success === rendered + without.success.slice(bare.success.length)
  })
  return agrees ? bare.success : undefined
}

/**
 * The calibration key of (tools, kwargs): the JSON of both. Kept per tool list object (canonical lists are immutable;
 * callers often pass the same one), so a long tool list is neither serialized nor hashed again on every delta.
 */
const calibrationKeys = new WeakMap<ReadonlyArray<Canonical.Tool>, Map<string, string>>()
const calibrationKey = (tools: ReadonlyArray<Canonical.Tool>, kwargs: Canonical.TemplateKwargs): string => {
  let keys = calibrationKeys.get(tools)
  if (keys === undefined) {
    keys = new Map()
    calibrationKeys.set(tools, keys)
  }
  const kwargsKey = JSON.stringify(kwargs)
  let key = keys.get(kwargsKey)
  if (key === undefined) {
    key = `${JSON.stringify(tools)}\u0000${kwargsKey}`
    if (keys.size >= MAX_CALIBRATIONS) keys.clear()
    keys.set(kwargsKey, key)
  }
  return key
}

const calibrate = (
  tok: TemplateTokenizer,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<Calibration, ChatTemplate.TemplateError> => {
  let cache = calibrations.get(tok)
  if (cache === undefined) {
    cache = new Map()
    calibrations.set(tok, cache)
  }
  const key = calibrationKey(tools, kwargs)
  const known = cache.get(key)
  if (known !== undefined) return Result.succeed(known)
  const rendered = tok.renderSync({
    messages: DUMMY_MESSAGES,
    tools,
    chatTemplateKwargs: kwargs,
    addGenerationPrompt: false
  })
  if (Result.isFailure(rendered)) return Result.fail(rendered.failure)
  const text = rendered.success.replace(/\n+$/, "")
  const ids = tok.encode(text)
  const calibration: Calibration = {
    text,
    tokenCount: ids.length,
    suffixOnly: suffixOnly(tok, text, ids, tools, kwargs),
    rendered: rendered.success,
    bare: withoutTools(tok, rendered.success, tools, kwargs)
  }
  if (cache.size >= MAX_CALIBRATIONS) cache.delete(cache.keys().next().value ?? "")
  cache.set(key, calibration)
  return Result.succeed(calibration)
}

/**
 * A deeper observation: encode(render(dummy + delta, generation prompt)) minus the tokens of render(dummy) with its
 * trailing newlines stripped.
 *
 * **Details**
 * Without marked literals, the dummy's rendering and token count are computed once per (tools, kwargs), and when the
 * dummy ends in a special token (and the probes agree, see `suffixOnly`) only the text after it is encoded, so the
 * tool definitions in the system prompt are not re-encoded on every request. When the template's text after its tool
 * block does not depend on the tools (see `withoutTools`), the delta is rendered without them and put after the
 * dummy's cached rendering, so the tool definitions are not rendered again either. With marked literals (rare) the
 * dummy is rendered and encoded with the marked tools every time.
 */
export const deltaPlan: Planner = (tok, delta, tools, kwargs, options = {}) => {
  // The dummy messages hold no literal; the marked tools (rendered into the prefix by some templates) are shared.
  const p = protectedInput(tok, [...DUMMY_MESSAGES, ...delta], tools, options)
  if (p.marker !== undefined) {
    const marker = p.marker
    const dummy = tok.renderSync({
      messages: DUMMY_MESSAGES,
      tools: p.tools,
      chatTemplateKwargs: kwargs,
      addGenerationPrompt: false
    })
    if (Result.isFailure(dummy)) return Result.fail(dummy.failure)
    const full = tok.renderSync({
      messages: p.messages,
      tools: p.tools,
      chatTemplateKwargs: kwargs,
      addGenerationPrompt: true
    })
    if (Result.isFailure(full)) return Result.fail(full.failure)
    const skip = encodeMarked(tok, dummy.success.replace(/\n+$/, ""), marker).length
    return Result.succeed({ text: full.success, skip, marker })
  }
  const calibrated = calibrate(tok, tools, kwargs)
  if (Result.isFailure(calibrated)) return Result.fail(calibrated.failure)
  const { bare, rendered, suffixOnly, text, tokenCount } = calibrated.success
  if (bare !== undefined) {
    const without = bareText(tok, delta, kwargs)
    // The text after the tool block is the same with or without the tools, and so is a rendering error there.
    if (Result.isFailure(without)) return Result.fail(without.failure)
    if (without.success.startsWith(bare)) {
      const after = without.success.slice(bare.length)
      return Result.succeed(
        suffixOnly
          ? { text: rendered.slice(text.length) + after, skip: 0 }
          : { text: rendered + after, skip: tokenCount }
      )
    }
  }
  const full = fullText(tok, delta, tools, kwargs)
  if (Result.isFailure(full)) return Result.fail(full.failure)
  return Result.succeed(
    suffixOnly && full.success.startsWith(text)
      ? { text: full.success.slice(text.length), skip: 0 }
      : { text: full.success, skip: tokenCount }
  )
}

/** Tokens a deeper observation adds (see {@link deltaPlan}). */
export const deltaTokens: Encoder = encodedBy(deltaPlan)
