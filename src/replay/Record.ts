/**
 * The replay record (docs/debugging.md "The replay record"): each Session's model requests as the gateway received
 * them (canonical) and each engine answer, in order, with timestamps, written in the debug dump beside the forest.
 *
 * **Details**
 * One record per Session (`replay` on its first debug record, like `forest`), versioned by {@link version}. A
 * request keeps only what it adds to the previous request's messages (`keep` messages of it, then `messages`), and its
 * tools and template kwargs only when they changed: an agent resends its whole history every turn. An engine attempt
 * of a request that committed a response carries its token count only (`n`): its ids and logprobs are the committed
 * response's, in the forest beside it (`ids` / `logprobs` are written for a request that committed nothing). Times are
 * Unix milliseconds on the rollout's clock.
 */
import { Schema } from "effect"
import type * as Settings from "../config/Settings.ts"
import * as StateHash from "../forest/StateHash.ts"
import * as DumpArrays from "../inspect/DumpArrays.ts"
import * as Canonical from "../protocol/Canonical.ts"
import * as AgentSpec from "../session/AgentSpec.ts"
import * as Received from "./Received.ts"

/** The format version a rollout writes and `replay` reads. */
export const version = 2

/** An engine attempt's finish reason, as the engine port reports it. */
export const Finish = Schema.Union([
  Schema.Struct({
    type: Schema.Literal("stop"),
    matched: Schema.optional(Schema.Union([Schema.Number, Schema.String]))
  }),
  Schema.Struct({ type: Schema.Literal("length"), length: Schema.optional(Schema.Number) }),
  Schema.Struct({ type: Schema.Literal("abort"), message: Schema.optional(Schema.String) })
])
export type Finish = typeof Finish.Type

/** One engine attempt of a model request. */
export const Attempt = Schema.Struct({
  /** When the engine was asked (after the lease, admission and any parking) and when it answered. */
  at: Schema.Number,
  done_at: Schema.Number,
  rid: Schema.String,
  /** The generated token count. */
  n: Schema.Int,
  /** The ids and logprobs, only for a request that committed no response. */
  ids: Schema.optionalKey(DumpArrays.Ints),
  logprobs: Schema.optionalKey(DumpArrays.Numbers),
  finish: Finish,
  weight_version: Schema.String,
  weight_versions: Schema.optionalKey(Schema.Array(Schema.String)),
  cut_by_update: Schema.optionalKey(Schema.Boolean),
  prompt_tokens: Schema.Int,
  cached_tokens: Schema.Int
})
export type Attempt = typeof Attempt.Type

/** One model request of a Session. */
export const Request = Schema.Struct({
  /** When the gateway handed it to the generation core, and when its answer was ready. */
  at: Schema.Number,
  done_at: Schema.Number,
  protocol: Schema.Literals(["chat", "responses", "messages"]),
  stream: Schema.Boolean,
  model: Schema.String,
  /** Messages kept from the previous request's (its first `keep`), then the ones this request adds. */
  keep: Schema.Int,
  messages: Schema.Array(Canonical.Message),
  /** Only when they differ from the previous request's (absent: the same; the first request: none / `{}`). */
  tools: Schema.optionalKey(Schema.Array(Canonical.Tool)),
  chat_template_kwargs: Schema.optionalKey(Canonical.TemplateKwargs),
  max_tokens: Schema.optionalKey(Schema.Int),
  stop: Schema.Array(Schema.String),
  seed: Schema.optionalKey(Schema.Int),
  logprobs: Schema.Boolean,
  top_logprobs: Schema.optionalKey(Schema.Int),
  /** The Session's step when the request arrived and when it ended (partial rollout: a later step). */
  rollout_ids: Schema.Tuple([Schema.Int, Schema.Int]),
  attempts: Schema.Array(Attempt),
  /** The body as the gateway received it (absent for a request made without the gateway, e.g. from a library). */
  body: Schema.optionalKey(Received.Body),
  /** What the agent received (its status and JSON body, or its SSE frames). */
  answer: Schema.optionalKey(Received.Answer),
  /** The tag of the generation error the agent got instead of a completion. */
  error: Schema.optionalKey(Schema.String)
})
export type Request = typeof Request.Type

/** The sampling the Session's requests ran with (from the rollout's settings). */
export const Sampling = Schema.Struct({
  temperature: Schema.Number,
  top_p: Schema.Number,
  top_k: Schema.Number,
  max_new_tokens: Schema.Int,
  stop: Schema.Array(Schema.String),
  stop_token_ids: Schema.Array(Schema.Int),
  seed: Schema.optionalKey(Schema.Int)
})
export type Sampling = typeof Sampling.Type

/** The settings the generation core ran with (replay runs with them unless told otherwise). */
export const GenerationSettings = Schema.Struct({
  /** The tokenizer directory (absolute), or null: the bundled Qwen3 tokenizer. */
  tokenizer: Schema.NullOr(Schema.String),
  tool_call_parser: Schema.NullOr(Schema.String),
  reasoning_parser: Schema.NullOr(Schema.String),
  strict_match: Schema.Boolean,
  skip_special_tokens: Schema.Boolean,
  allow_special_tokens: Schema.Boolean,
  fail_unparsed_turns: Schema.Boolean,
  /** `--apply-chat-template-kwargs`: the Session's base template kwargs. */
  apply_chat_template_kwargs: Canonical.TemplateKwargs
})
export type GenerationSettings = typeof GenerationSettings.Type

/** The generation settings of a rollout (`tokenizer`: its directory made absolute by the caller). */
export const generationSettingsOf = (
  settings: Settings.RolloutSettings,
  tokenizer: string | null
): GenerationSettings => ({
  tokenizer,
  tool_call_parser: settings.agenticToolCallParser ?? null,
  reasoning_parser: settings.agenticReasoningParser ?? null,
  strict_match: settings.strictMatch,
  skip_special_tokens: settings.rolloutSkipSpecialTokens,
  allow_special_tokens: settings.agenticAllowSpecialTokens,
  fail_unparsed_turns: settings.agenticFailUnparsedTurns,
  apply_chat_template_kwargs: settings.applyChatTemplateKwargs
})

/** A Session's replay record. */
export const SessionRecord = Schema.Struct({
  version: Schema.Literal(version),
  generation: GenerationSettings,
  mode: AgentSpec.RolloutMode,
  sampling: Sampling,
  max_context_len: Schema.NullOr(Schema.Int),
  /** When the Session was registered (its agent launched right after). */
  started_at: Schema.Number,
  requests: Schema.Array(Request),
  /** Its Group's Reward (the Group's rewards and credit), when the Group was scored. */
  reward: Schema.optionalKey(Schema.Struct({ at: Schema.Number, done_at: Schema.Number }))
})
export type SessionRecord = typeof SessionRecord.Type

/** The version field alone: an older record is named by it before its shape is decoded. */
export const Versioned = Schema.Struct({ version: Schema.Number })

/** A request's canonical state, in the record's delta form against the previous request's state. */
export const delta = (
  previous: Canonical.State | undefined,
  state: Canonical.State
): Pick<Request, "keep" | "messages" | "tools" | "chat_template_kwargs"> => {
  const before = previous?.messages ?? []
  let keep = 0
  while (
    keep < before.length && keep < state.messages.length && StateHash.equalJson(before[keep], state.messages[keep])
  ) keep++
  const tools = previous === undefined ? state.tools.length > 0 : !StateHash.equalJson(previous.tools, state.tools)
  const kwargs = previous === undefined
    ? Object.keys(state.chat_template_kwargs).length > 0
    : !StateHash.equalJson(previous.chat_template_kwargs, state.chat_template_kwargs)
  return {
    keep,
    messages: state.messages.slice(keep),
    ...(tools ? { tools: state.tools } : {}),
    ...(kwargs ? { chat_template_kwargs: state.chat_template_kwargs } : {})
  }
}

/** The canonical state of a recorded request, given the previous request's state (the inverse of {@link delta}). */
export const stateOf = (previous: Canonical.State | undefined, request: Request): Canonical.State => ({
  messages: [...(previous?.messages ?? []).slice(0, request.keep), ...request.messages],
  tools: request.tools ?? previous?.tools ?? [],
  chat_template_kwargs: request.chat_template_kwargs ?? previous?.chat_template_kwargs ?? {}
})
