/**
 * The pure steps of one model request, which layers/generation/Generation.ts runs in order: the turn's sampling budget, the
 * engine attempts' pending output, the end-of-turn split, response parsing, tool-call ids and the protocol-neutral
 * `Completion`.
 *
 * **Details**
 * An engine abort (SGLang `finish_reason: abort`, e.g. a paused or preempted request) returns a partial output: it is
 * kept {@link Pending}, not committed, and the request resumes from prefix ++ pending ids with the rest of the budget
 * (docs/runtime.md, "Model requests"). The committed response holds every attempt's ids, logprobs and weight versions.
 */
import { Result } from "effect"
import { hash } from "node:crypto"
import type * as Stop from "../engine/Stop.ts"
import type * as ParserRegistry from "../parsers/ParserRegistry.ts"
import * as Canonical from "../protocol/Canonical.ts"
import * as Completion from "../protocol/Completion.ts"
import * as GenerationError from "./GenerationError.ts"

// ---------------------------------------------------------------------------------------------------------------
// Sampling

/** The sampling fields a turn overrides; the rest of the Session's sampling passes through. */
export interface TurnSampling {
  readonly maxNewTokens: number
  readonly stop: ReadonlyArray<string>
  readonly seed?: number | undefined
}

/** The turn limit asked for: the request's `max_tokens`-like field, capped by the configured response length. */
export const requestedTokens = (configured: number, requested: number | undefined): number =>
  Math.min(requested ?? configured, configured)

/**
 * The Session's sampling for one turn: `maxNewTokens` is the generation budget (Forest.generationBudget), the
 * request's stop strings are added (deduplicated, configured ones first), and the request's seed applies.
 */
export const turnSampling = <S extends TurnSampling>(
  session: S,
  request: Pick<Completion.CanonicalRequest, "stop" | "seed">,
  maxNewTokens: number
): S => ({
  ...session,
  maxNewTokens,
  stop: [...new Set([...session.stop, ...request.stop])],
  ...(request.seed === undefined ? {} : { seed: request.seed })
})

// ---------------------------------------------------------------------------------------------------------------
// Engine attempts

/** What one engine attempt returned (the fields of the engine port's result the attempts read). */
export interface AttemptOutput {
  readonly outputIds: ReadonlyArray<number>
  readonly logprobs: ReadonlyArray<number>
  readonly weightVersion: string
  /** Every version the attempt ran on when more than one (SGLang kept it across a retract / in_place pause). */
  readonly weightVersions?: ReadonlyArray<string> | undefined
  /** With routing replay: one row of MoE expert ids per sequence position the attempt went through. */
  readonly routedExperts?: ReadonlyArray<ReadonlyArray<number>> | undefined
  /** Versioned LoRA: the adapter version the attempt generated with. */
  readonly loraVersion?: string | undefined
  readonly finishReason: Stop.FinishReason
}

/** Consecutive engine aborts without a single new token after which the request fails instead of resuming again. */
export const MAX_EMPTY_ABORTS = 3

/** The output of a request's engine attempts so far: one value, carried from attempt to attempt. */
export interface Pending {
  readonly outputIds: ReadonlyArray<number>
  /** One per output id. */
  readonly logprobs: ReadonlyArray<number>
  /** One per attempt. */
  readonly weightVersions: ReadonlyArray<string>
  /** The token count of each attempt, in order (where a resumed request's aborts fall). */
  readonly attemptLengths: ReadonlyArray<number>
  /** The response's abort count: the parent state's plus this request's engine aborts. */
  readonly abortCount: number
  /** Aborts in a row that produced no token. */
  readonly emptyAborts: number
  /** Time spent in the engine, summed over attempts. */
  readonly generationMs: number
  /**
   * With routing replay: the rows of the latest attempt that returned any, one per sequence position it went through
   * (a resumed attempt's prompt holds the earlier attempts' ids, so its rows cover them too); absent without.
   */
  readonly routedExperts?: ReadonlyArray<ReadonlyArray<number>> | undefined
  /** Versioned LoRA: the adapter version of each attempt (one per attempt); absent without. */
  readonly loraVersions?: ReadonlyArray<string> | undefined
}

/** Nothing generated yet at a parent state whose lineage counted `abortCount` aborts. */
export const noPending = (abortCount: number): Pending => ({
  outputIds: [],
  logprobs: [],
  weightVersions: [],
  attemptLengths: [],
  abortCount,
  emptyAborts: 0,
  generationMs: 0
})

/** The next attempt's token budget: the turn's budget less what is pending. */
export const remainingTokens = (maxNewTokens: number, pending: Pending): number =>
  maxNewTokens - pending.outputIds.length

/** After an attempt: finished (with the finish reason to report), resume from the pending output, or give up. */
export type AttemptOutcome =
  | { readonly _tag: "Finished"; readonly pending: Pending; readonly finishReason: Stop.FinishReason }
  | { readonly _tag: "Resume"; readonly pending: Pending }
  | { readonly _tag: "GiveUp"; readonly pending: Pending }

/**
 * Add an attempt's output to the pending output and decide what comes next.
 *
 * **Details**
 * A non-abort finish ends the request. An abort counts; once the pending ids fill the budget the request ends as
 * `length`; after {@link MAX_EMPTY_ABORTS} aborts in a row without a token it gives up; otherwise it resumes.
 */
export const afterAttempt = (
  pending: Pending,
  output: AttemptOutput,
  elapsedMs: number,
  maxNewTokens: number
): AttemptOutcome => {
  const aborted = output.finishReason.type === "abort"
  const next: Pending = {
    outputIds: [...pending.outputIds, ...output.outputIds],
    logprobs: [...pending.logprobs, ...output.logprobs],
    weightVersions: [...pending.weightVersions, ...(output.weightVersions ?? [output.weightVersion])],
    attemptLengths: [...pending.attemptLengths, output.outputIds.length],
    abortCount: aborted ? pending.abortCount + 1 : pending.abortCount,
    emptyAborts: aborted ? (output.outputIds.length === 0 ? pending.emptyAborts + 1 : 0) : pending.emptyAborts,
    generationMs: pending.generationMs + elapsedMs,
    ...(output.loraVersion === undefined
      ? {}
      : { loraVersions: [...(pending.loraVersions ?? []), output.loraVersion] }),
    ...(output.routedExperts !== undefined && output.routedExperts.length > 0
      ? { routedExperts: output.routedExperts }
      : pending.routedExperts === undefined
      ? {}
      : { routedExperts: pending.routedExperts })
  }
  if (!aborted) return { _tag: "Finished", pending: next, finishReason: output.finishReason }
  if (next.outputIds.length >= maxNewTokens) {
    return { _tag: "Finished", pending: next, finishReason: { type: "length", length: next.outputIds.length } }
  }
  return next.emptyAborts >= MAX_EMPTY_ABORTS ? { _tag: "GiveUp", pending: next } : { _tag: "Resume", pending: next }
}

/**
 * The outcome of an attempt that a step boundary aborted (partial rollout): the request is parked, not failing, so
 * the abort does not count toward giving up.
 */
export const parked = (outcome: AttemptOutcome): AttemptOutcome =>
  outcome._tag === "Finished" ? outcome : { _tag: "Resume", pending: { ...outcome.pending, emptyAborts: 0 } }

// ---------------------------------------------------------------------------------------------------------------
// Parsing

/** The generated ids split into the visible text's ids and whether a trailing end-of-turn / stop id ended the turn. */
export interface EndOfTurnSplit {
  readonly textIds: ReadonlyArray<number>
  readonly endedTurn: boolean
}

/**
 * The trailing end-of-turn id (one of the tokenizer's `endOfTurnIds` or a configured stop token id) is generated and
 * committed but is not part of the visible text.
 */
export const splitEndOfTurn = (
  outputIds: ReadonlyArray<number>,
  endOfTurnIds: ReadonlySet<number>,
  stopTokenIds: ReadonlyArray<number>
): EndOfTurnSplit => {
  const last = outputIds[outputIds.length - 1]
  const endedTurn = last !== undefined && (endOfTurnIds.has(last) || stopTokenIds.includes(last))
  return { textIds: endedTurn ? outputIds.slice(0, -1) : outputIds, endedTurn }
}

/** The engine's finish as the completion reports it before tool calls are known: an ended turn is `stop`. */
export const engineFinish = (split: EndOfTurnSplit, finishReason: Stop.FinishReason): Completion.FinishReason =>
  split.endedTurn ? "stop" : finishReason.type

/** The request stop string that ended the generation, when one did. */
export const stopSequence = (finishReason: Stop.FinishReason): string | undefined =>
  finishReason.type === "stop" && typeof finishReason.matched === "string" ? finishReason.matched : undefined

/** The parsers of `--agentic-tool-call-parser` / `--agentic-reasoning-parser`; without one, nothing is split off. */
export interface ResponseParsers {
  readonly toolCallParser?: ParserRegistry.ToolCallParser | undefined
  readonly reasoningParser?: ParserRegistry.ReasoningParser | undefined
}

/** The generated text split by the parsers. */
export interface ParsedResponse {
  readonly content: string
  readonly reasoning: string
  readonly calls: ReadonlyArray<ParserRegistry.ToolCall>
  /** Tool-call blocks the parser could not read (their text stayed in `content`). */
  readonly malformed: number
  /** Calls to tools the request did not define, dropped. */
  readonly droppedUnknownTools: number
}

/** Reasoning first, then tool calls (only when the request defines tools); the rest is content. */
export const parseResponse = (
  text: string,
  parsers: ResponseParsers,
  tools: ReadonlyArray<Canonical.Tool>
): ParsedResponse => {
  const split = parsers.reasoningParser?.parse(text)
  const normal = split === undefined ? text : split.normalText
  const reasoning = split === undefined ? "" : split.reasoningText
  if (parsers.toolCallParser === undefined || tools.length === 0) {
    return { content: normal, reasoning, calls: [], malformed: 0, droppedUnknownTools: 0 }
  }
  const parsed = parsers.toolCallParser.parse(normal, tools)
  return {
    content: parsed.normalText,
    reasoning,
    calls: parsed.calls,
    malformed: parsed.malformed,
    droppedUnknownTools: parsed.droppedUnknownTools
  }
}

/** Whether the parsers left nothing to commit. */
export const isEmpty = (parsed: ParsedResponse): boolean =>
  parsed.content.length === 0 && parsed.reasoning.length === 0 && parsed.calls.length === 0

/** `tool_calls` when the turn ended with tool calls (unless it hit the length limit), else the engine's finish. */
export const finishOf = (engine: Completion.FinishReason, calls: number): Completion.FinishReason =>
  engine === "length" || calls === 0 ? engine : "tool_calls"

// ---------------------------------------------------------------------------------------------------------------
// The committed message and the completion

/**
 * Keyed by the parent state and the generated ids: a retry that generates the same response gets the same
 * tool-call ids.
 */
export const responseKey = (parent: string, outputIds: ReadonlyArray<number>): string =>
  hash("sha256", `${parent}:${outputIds.join(",")}`, "hex")

/** The parsed calls with their ids (`prefix` is the asking protocol's, see `Completion.toolCallId`). */
export const identifyToolCalls = (
  calls: ReadonlyArray<ParserRegistry.ToolCall>,
  ids: { readonly prefix: Completion.ToolCallIdPrefix; readonly sessionId: string; readonly responseKey: string }
): ReadonlyArray<Completion.CompletionToolCall> =>
  calls.map((call, position) => ({
    id: Completion.toolCallId({ ...ids, position }),
    name: call.name,
    arguments: call.arguments
  }))

/**
 * The assistant message to commit, run through the same canonicalization a client's echo goes through, so the next
 * request's history matches the committed state exactly.
 */
export const assistantMessage = (
  parsed: ParsedResponse,
  toolCalls: ReadonlyArray<Completion.CompletionToolCall>
): Result.Result<Canonical.Message, GenerationError.UnusableResponseError> => {
  const canonical = Canonical.canonicalizeMessages([{
    role: "assistant",
    content: parsed.content,
    ...(parsed.reasoning.length > 0 ? { reasoning_content: parsed.reasoning } : {}),
    ...(toolCalls.length > 0 ? { tool_calls: toolCalls.map(Canonical.toolCallOf) } : {})
  }])
  if (Result.isFailure(canonical)) {
    return Result.fail(new GenerationError.UnusableResponseError({ detail: canonical.failure.message }))
  }
  const message = canonical.success[0]
  return message === undefined
    ? Result.fail(
      new GenerationError.UnusableResponseError({ detail: "canonicalization dropped the assistant message" })
    )
    : Result.succeed(message)
}

/** Everything a completion is built from besides its id and time. */
export interface CompletionInput {
  readonly message: Canonical.Message
  /** The minted ids, in case the canonical message lacks one. */
  readonly toolCalls: ReadonlyArray<Completion.CompletionToolCall>
  readonly finish: Completion.FinishReason
  readonly stopSequence: string | undefined
  readonly usage: Completion.Usage
  /** Per output token, when the request asked for logprobs. */
  readonly logprobs: ReadonlyArray<Completion.TokenLogprob> | undefined
}

/** The protocol-neutral completion of a committed response (`id` lower-case hex, `nowMs` the commit time). */
export const completion = (id: string, nowMs: number, input: CompletionInput): Completion.Completion => {
  const { message } = input
  return {
    id,
    created: Math.floor(nowMs / 1000),
    ...(message.reasoning_content === undefined ? {} : { reasoning: message.reasoning_content }),
    content: typeof message.content === "string" ? message.content : "",
    toolCalls: (message.tool_calls ?? []).map((call, i) => ({
      id: call.id ?? input.toolCalls[i]?.id ?? "",
      name: call.function.name ?? "",
      arguments: call.function.arguments
    })),
    finish: input.finish,
    ...(input.stopSequence === undefined ? {} : { stopSequence: input.stopSequence }),
    usage: input.usage,
    ...(input.logprobs === undefined ? {} : { logprobs: input.logprobs })
  }
}
