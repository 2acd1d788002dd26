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
 */
import { Result } from "effect"
import type * as Canonical from "../protocol/canonical.ts"
import type { RenderInput, TemplateError } from "./ChatTemplate.ts"

/** What delta tokenization needs from a tokenizer (a structural slice of the Tokenizer service). */
export interface TemplateTokenizer {
  readonly encode: (text: string) => ReadonlyArray<number>
  /** Renders the chat template; template or tool-call-arguments errors are a `TemplateError`. */
  readonly renderSync: (request: RenderInput) => Result.Result<string, TemplateError>
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
): Result.Result<ReadonlyArray<number>, TemplateError> =>
  Result.map(tok.renderSync({ messages, tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true }), tok.encode)

/**
 * Tokens a deeper observation adds: encode(render(dummy + delta, generation prompt)) minus the tokens of
 * render(dummy) with its trailing newlines stripped.
 */
export const deltaTokens = (
  tok: TemplateTokenizer,
  delta: ReadonlyArray<Canonical.Message>,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Result.Result<ReadonlyArray<number>, TemplateError> => {
  const dummy = tok.renderSync({ messages: DUMMY_MESSAGES, tools, chatTemplateKwargs: kwargs, addGenerationPrompt: false })
  if (Result.isFailure(dummy)) return Result.fail(dummy.failure)
  const full = tok.renderSync({
    messages: [...DUMMY_MESSAGES, ...delta],
    tools,
    chatTemplateKwargs: kwargs,
    addGenerationPrompt: true
  })
  if (Result.isFailure(full)) return Result.fail(full.failure)
  return Result.succeed(tok.encode(full.success).slice(tok.encode(dummy.success.replace(/\n+$/, "")).length))
}
