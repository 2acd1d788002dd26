/**
 * The steps `Generation.parse` and `Generation.commitResponse` of a model request (layers/generation/Generation.ts):
 * the engine's output split into content, reasoning and tool calls, then committed as the assistant message with its
 * exact ids; what the protocol's completion is built from.
 */
import { Result } from "effect"
import * as EndOfTurn from "../../src/generation/EndOfTurn.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import * as ResponseParsing from "../../src/generation/ResponseParsing.ts"
import * as TurnCompletion from "../../src/generation/TurnCompletion.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Instruments from "../observability/Instruments.ts"
import type * as Attempts from "./Attempts.ts"
import type * as StepContext from "./StepContext.ts"

/** What the parse step gives the commit. */
export interface Parsed {
  readonly parsed: ResponseParsing.ParsedResponse
  readonly finish: Completion.FinishReason
  readonly stopSequence: string | undefined
}

/** Split the generated text into content, reasoning and tool calls; counts parser failures and dropped calls. */
export function* parse(
  core: StepContext.Core,
  request: StepContext.RequestRun,
  planned: Attempts.AttemptPlan,
  done: Attempts.Attempted
) {
  const split = EndOfTurn.splitEndOfTurn(
    done.pending.outputIds,
    core.tokenizer.endOfTurnIds,
    planned.sampling.stopTokenIds
  )
  const text = core.tokenizer.decode(split.textIds, { skipSpecialTokens: core.options.skipSpecialTokens ?? false })
  const parsedText = ResponseParsing.parseResponse(text, core.options, planned.state.tools)
  planned.session.counters.parserFailures += parsedText.malformed
  planned.session.counters.droppedToolCalls += parsedText.droppedUnknownTools
  const failures = parsedText.malformed + parsedText.droppedUnknownTools
  if (failures > 0) Instruments.parserFailures.updateUnsafe(failures, request.context)
  if (failures > 0) (planned.session.counters.parserFailedRequests ??= new Map()).set(planned.rid, failures)
  const unparsed = ResponseParsing.isEmpty(parsedText) && parsedText.malformed + parsedText.droppedUnknownTools > 0
  if (
    ResponseParsing.isEmpty(parsedText) && (!unparsed || core.options.failUnparsedTurns === true || text.length === 0)
  ) {
    return yield* new GenerationError.UnusableResponseError({
      detail: "Response parsers produced an empty assistant message"
    })
  }
  // The parser dropped or could not read every call and nothing else is left: the raw text is the content.
  const parsed = unparsed ? { ...parsedText, content: text } : parsedText
  const response: Parsed = {
    parsed,
    finish: ResponseParsing.finishOf(EndOfTurn.engineFinish(split, done.last.finishReason), parsed.calls.length),
    stopSequence: EndOfTurn.stopSequence(done.last.finishReason)
  }
  return response
}

/** Commit the assistant message with the exact core.engine output; returns what the completion is built from. */
export function* commitResponse(
  core: StepContext.Core,
  run: StepContext.RequestRun,
  planned: Attempts.AttemptPlan,
  request: Completion.CanonicalRequest,
  done: Attempts.Attempted,
  response: Parsed
) {
  const { pending } = done
  const toolCalls = response.parsed.calls.length === 0 ? [] : TurnCompletion.identifyToolCalls(response.parsed.calls, {
    prefix: request.toolCallIdPrefix,
    sessionId: planned.session.sessionId,
    responseKey: TurnCompletion.responseKey(planned.parent, pending.outputIds)
  })
  const assistant = TurnCompletion.assistantMessage(response.parsed, toolCalls)
  if (Result.isFailure(assistant)) return yield* assistant.failure
  const message = assistant.success
  const now = run.clock.currentTimeMillisUnsafe()
  Instruments.tokensGenerated.updateUnsafe(pending.outputIds.length, run.context)
  Instruments.generationSeconds.updateUnsafe(pending.generationMs / 1000, run.context)
  Instruments.requestSeconds.updateUnsafe((now - done.startedAt) / 1000, run.context)
  yield* core.forests.commitResponse(planned.forest, {
    parent: planned.parent,
    rolloutId: planned.session.rolloutId(),
    message,
    tokens: pending.outputIds,
    logprobs: pending.logprobs,
    weightVersions: pending.weightVersions,
    attemptLengths: pending.attemptLengths,
    ...(pending.movedAttempts === undefined ? {} : { movedAttempts: pending.movedAttempts }),
    ...(pending.routedExperts === undefined ? {} : { routedExperts: pending.routedExperts }),
    ...(pending.loraVersions === undefined ? {} : { loraVersions: pending.loraVersions }),
    status: response.finish === "length" ? "truncated" : "completed",
    requestId: planned.rid,
    abortCount: pending.abortCount,
    wallElapsedS: (now - done.startedAt) / 1000,
    generationElapsedS: pending.generationMs / 1000,
    cachedTokens: done.last.cachedTokens,
    promptTokens: done.last.promptTokens
  })
  const input: TurnCompletion.CompletionInput = {
    message,
    toolCalls,
    finish: response.finish,
    stopSequence: response.stopSequence,
    usage: {
      promptTokens: done.last.promptTokens,
      completionTokens: pending.outputIds.length,
      cachedTokens: done.last.cachedTokens
    },
    logprobs: request.logprobs
      ? pending.outputIds.map((id, i) => ({ token: core.tokenizer.decode([id]), logprob: pending.logprobs[i] ?? 0 }))
      : undefined
  }
  return { now, input }
}
