/**
 * The committed assistant message of a turn (its tool calls with ids) and the protocol-neutral `Completion`.
 */
import { Result } from "effect"
import { hash } from "node:crypto"
import type * as ParserRegistry from "../parsers/ParserRegistry.ts"
import * as Canonical from "../protocol/Canonical.ts"
import * as Completion from "../protocol/Completion.ts"
import * as GenerationError from "./GenerationError.ts"
import * as ResponseParsing from "./ResponseParsing.ts"

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
  parsed: ResponseParsing.ParsedResponse,
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
