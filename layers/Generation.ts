/**
 * The generation core all three model APIs share: one model request from canonical request to committed response.
 *
 * **Details**
 * match the parent state in the Session's SessionForest → observation delta tokens for the unmatched suffix → context
 * check (nothing is committed when it fails) → commit the observation → wait for the Group's Runtime lease → engine
 * generate (inference prefix ++ nothing: the observation is already part of the prefix; an engine abort resumes
 * from prefix ++ the partial ids after the lease is held again) → parsers → commit the response → a
 * protocol-neutral `Completion`.
 * The assistant message committed is run through the same canonicalization a client's echo goes through, so the next
 * request's history matches the committed state exactly. Interrupting `generate` while it waits for the lease or while
 * the engine runs aborts the engine request (the engine port guarantees it for interruption).
 */
import { Clock, Context, Effect, Layer, Result } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as Forest from "../src/forest/Forest.ts"
import * as Canonical from "../src/protocol/canonical.ts"
import type * as Completion from "../src/protocol/completion.ts"
import * as Errors from "../src/protocol/errors.ts"
import type * as Sse from "../src/protocol/sse.ts"
import * as Parsers from "../src/parsers/registry.ts"
import * as ObservationDelta from "../src/template/ObservationDelta.ts"
import { Engine, type GenerateResult, type SamplingParams } from "./Engine.ts"
import { Forests } from "./Forests.ts"
import type { SessionEntry } from "./Sessions.ts"
import { TemplateError, Tokenizer } from "./Tokenizer.ts"

export interface GenerationOptions {
  /** `--agentic-tool-call-parser`; without one the whole text is content. */
  readonly toolCallParser?: Parsers.ToolCallParser | undefined
  /** `--agentic-reasoning-parser`; without one no reasoning is split off. */
  readonly reasoningParser?: Parsers.ReasoningParser | undefined
  /** `--agentic-strict-match`: disable the tolerated match of a response echoed without its reasoning. */
  readonly strictMatch?: boolean | undefined
}

export interface GenerationShape {
  /** Run one model request of `session` and commit it; the result is rendered by the protocol that asked. */
  readonly generate: (
    session: SessionEntry,
    request: Completion.CanonicalRequest,
    protocol: Sse.Protocol
  ) => Effect.Effect<Completion.Completion, Errors.GatewayError>
}

export class Generation extends Context.Service<Generation, GenerationShape>()("relax-agentic/Generation") {
  static readonly layer = (options: GenerationOptions = {}): Layer.Layer<Generation, never, Engine | Forests | Tokenizer> =>
    Layer.effect(Generation, make(options))
}

/** Fixed-length backend request id: SGLang aborts by rid prefix, so no rid may be a prefix of another. */
const ridFor = (sessionId: string, parent: string, turn: number, attempt = 0): string =>
  "relax-" +
  createHash("sha256")
    .update(`${sessionId}\u0000${parent}\u0000${turn}${attempt === 0 ? "" : `\u0000${attempt}`}`)
    .digest("hex")
    .slice(0, 32)

/** Consecutive engine aborts without a single new token after which the request fails instead of resuming again. */
const MAX_EMPTY_ABORTS = 3

const internal = (reason: string) =>
  Effect.logError(`Agentic generation failed: ${reason}`).pipe(Effect.andThen(Effect.fail(Errors.GatewayError.internal("chat"))))

const make = (options: GenerationOptions) =>
  Effect.gen(function*() {
    const engine = yield* Engine
    const forests = yield* Forests
    const tokenizer = yield* Tokenizer

    const stopIds = new Set<number>([tokenizer.eosTokenId])
    const imEnd = tokenizer.tokenToId("<|im_end|>")
    if (imEnd !== undefined) stopIds.add(imEnd)

    const generate = Effect.fn("Generation.generate")(function*(
      session: SessionEntry,
      request: Completion.CanonicalRequest,
      protocol: Sse.Protocol
    ) {
      session.counters.requests++
      const turn = session.counters.requests - 1
      const forest = yield* forests.get(session.sessionId).pipe(Effect.catch((error) => internal(error.message)))
      const state = request.state
      const matched = Forest.match(forest, state, { strict: options.strictMatch ?? false })
      if (matched.tolerated) session.counters.toleratedMatches++

      // Observation delta tokens (§5.6): the full prompt at the root, the dummy-prefix delta deeper down.
      let parent = matched.parent
      if (matched.suffix.length > 0) {
        const rendered = Result.try(() =>
          parent === forest.root
            ? ObservationDelta.rootTokens(tokenizer, matched.suffix, state.tools, state.chat_template_kwargs)
            : ObservationDelta.deltaTokens(tokenizer, matched.suffix, state.tools, state.chat_template_kwargs)
        )
        if (Result.isFailure(rendered)) {
          const failure = rendered.failure
          return yield* failure instanceof TemplateError
            ? Effect.fail(Errors.GatewayError.templateRejected(failure.reason))
            : internal(String(failure))
        }
        const delta = rendered.success
        const prior = Forest.trainTokenCount(forest, parent)
        if (session.maxContextLen !== undefined && prior + delta.length >= session.maxContextLen) {
          return yield* Errors.GatewayError.contextLength({
            limit: session.maxContextLen,
            promptTokens: prior + delta.length
          })
        }
        const observation = Result.try(() =>
          Forest.commitObservation(forest, {
            parent,
            rolloutId: session.rolloutId(),
            messages: matched.suffix,
            tokens: delta,
            tools: state.tools,
            chatTemplateKwargs: state.chat_template_kwargs
          })
        )
        if (Result.isFailure(observation)) return yield* internal(String(observation.failure))
        parent = observation.success
      }

      const prefix = Forest.inferencePrefix(forest, parent)
      // Images along the lineage go to the engine with the prompt (SGLang `image_data`).
      const media = Forest.inferenceMedia(forest, parent)
      const promptTokens = Forest.trainTokenCount(forest, parent)
      const requested = Math.min(request.maxTokens ?? session.sampling.maxNewTokens, session.sampling.maxNewTokens)
      const budget = session.maxContextLen === undefined ? requested : session.maxContextLen - promptTokens
      if (budget <= 0) {
        return yield* Errors.GatewayError.contextLength({ limit: session.maxContextLen, promptTokens })
      }
      const sampling: SamplingParams = {
        ...session.sampling,
        maxNewTokens: Math.min(requested, budget),
        stop: [...new Set([...session.sampling.stop, ...request.stop])],
        ...(request.seed === undefined ? {} : { seed: request.seed })
      }

      const parentHash = parent
      const rid = ridFor(session.sessionId, parentHash, turn)
      // An engine abort (SGLang `finish_reason: abort`, e.g. a paused or preempted request) returns a partial output:
      // it is kept pending, not committed, and the request resumes from prefix ++ pending with the rest of the budget
      // after the lease is held again (relax-behaviour §6.4). The committed response holds every attempt's ids.
      const outputIds: Array<number> = []
      const logprobs: Array<number> = []
      const weightVersions: Array<string> = []
      let abortCount = Forest.node(forest, parent).abortCount
      let emptyAborts = 0
      let startedAt = 0
      let generationMs = 0
      let result: GenerateResult
      for (let attempt = 0;; attempt++) {
        yield* session.awaitLease.pipe(
          Effect.catchTag(
            "SessionClosedError",
            () => Effect.fail(Errors.GatewayError.sessionDiscarded(session.sessionId))
          )
        )
        const attemptStart = yield* Clock.currentTimeMillis
        if (attempt === 0) startedAt = attemptStart
        const inputIds = outputIds.length === 0 ? prefix : [...prefix, ...outputIds]
        const maxNewTokens = sampling.maxNewTokens - outputIds.length
        result = yield* engine.generate({
          inputIds,
          sampling: { ...sampling, maxNewTokens },
          rid: attempt === 0 ? rid : ridFor(session.sessionId, parentHash, turn, attempt),
          returnLogprob: true,
          imageData: media.length > 0 ? media : undefined,
          sessionId: session.sessionId,
          conversation: () => ({
            sessionId: session.sessionId,
            turn,
            messages: Forest.fullMessages(forest, parent),
            tools: state.tools,
            chatTemplateKwargs: state.chat_template_kwargs,
            promptText: tokenizer.decode(inputIds)
          })
        }).pipe(
          Effect.onInterrupt(() => Effect.sync(() => session.counters.aborts++)),
          Effect.catchTags({
            ContextLengthError: () =>
              Effect.fail(
                Errors.GatewayError.contextLength({
                  limit: session.maxContextLen,
                  promptTokens,
                  completionTokens: maxNewTokens
                })
              ),
            EngineError: (error) => internal(error.message)
          })
        )
        generationMs += (yield* Clock.currentTimeMillis) - attemptStart
        outputIds.push(...result.outputIds)
        logprobs.push(...result.logprobs)
        weightVersions.push(result.weightVersion)
        if (result.finishReason.type !== "abort") break
        session.counters.aborts++
        abortCount++
        emptyAborts = result.outputIds.length === 0 ? emptyAborts + 1 : 0
        if (outputIds.length >= sampling.maxNewTokens) {
          result = { ...result, finishReason: { type: "length", length: outputIds.length } }
          break
        }
        if (emptyAborts >= MAX_EMPTY_ABORTS) {
          return yield* internal(
            `Generation backend aborted request ${rid} ${emptyAborts} times in a row without output tokens`
          )
        }
      }
      session.counters.generations++
      if (outputIds.length === 0) {
        return yield* internal("Generation backend returned a terminal response without output tokens")
      }

      // The trailing end-of-turn id is generated (and committed) but is not part of the visible text.
      const last = outputIds[outputIds.length - 1]
      const endsWithStopId = last !== undefined && (stopIds.has(last) || sampling.stopTokenIds.includes(last))
      const textIds = endsWithStopId ? outputIds.slice(0, -1) : outputIds
      let text = tokenizer.decode(textIds)
      const engineFinish: Completion.FinishReason = endsWithStopId ? "stop" : result.finishReason.type
      const stopSequence = result.finishReason.type === "stop" && typeof result.finishReason.matched === "string"
        ? result.finishReason.matched
        : undefined

      let reasoning = ""
      if (options.reasoningParser !== undefined) {
        const split = options.reasoningParser.parse(text)
        reasoning = split.reasoningText
        text = split.normalText
      }
      let calls: ReadonlyArray<{ readonly name: string; readonly arguments: string }> = []
      if (options.toolCallParser !== undefined && state.tools.length > 0) {
        const parsed = options.toolCallParser.parse(text, state.tools)
        session.counters.parserFailures += parsed.malformed
        session.counters.droppedToolCalls += parsed.droppedUnknownTools
        text = parsed.normalText
        calls = parsed.calls
      }
      if (text.length === 0 && reasoning.length === 0 && calls.length === 0) {
        return yield* internal("Response parsers produced an empty assistant message")
      }

      const finish: Completion.FinishReason = engineFinish === "length" || calls.length === 0 ? engineFinish : "tool_calls"
      // Keyed by the parent state and the generated ids: a retry that generates the same response gets the same ids.
      const responseKey = createHash("sha256").update(`${parentHash}:${outputIds.join(",")}`).digest("hex")
      const toolCalls = calls.map((call, position) => ({
        id: Parsers.toolCallId({
          protocol: protocol === "messages" ? "anthropic" : "openai",
          sessionId: session.sessionId,
          responseKey,
          position
        }),
        type: "function",
        function: { name: call.name, arguments: call.arguments }
      }))
      const canonical = Canonical.canonicalizeMessages([{
        role: "assistant",
        content: text,
        ...(reasoning.length > 0 ? { reasoning_content: reasoning } : {}),
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
      }])
      if (Result.isFailure(canonical)) return yield* internal(canonical.failure.message)
      const message = canonical.success[0]
      if (message === undefined) return yield* internal("canonicalization dropped the assistant message")

      const now = yield* Clock.currentTimeMillis
      const elapsedS = (now - startedAt) / 1000
      const committed = Result.try(() =>
        Forest.commitResponse(forest, {
          parent,
          rolloutId: session.rolloutId(),
          message,
          tokens: outputIds,
          logprobs,
          weightVersions,
          status: finish === "length" ? "truncated" : "completed",
          requestId: rid,
          abortCount,
          wallElapsedS: elapsedS,
          generationElapsedS: generationMs / 1000
        })
      )
      if (Result.isFailure(committed)) return yield* internal(String(committed.failure))

      const completion: Completion.Completion = {
        id: randomBytes(16).toString("hex"),
        created: Math.floor(now / 1000),
        ...(message.reasoning_content === undefined ? {} : { reasoning: message.reasoning_content }),
        content: typeof message.content === "string" ? message.content : "",
        toolCalls: (message.tool_calls ?? []).map((call, i) => ({
          id: call.id ?? toolCalls[i]?.id ?? "",
          name: call.function.name ?? "",
          arguments: call.function.arguments
        })),
        finish,
        ...(stopSequence === undefined ? {} : { stopSequence }),
        usage: {
          promptTokens: result.promptTokens,
          completionTokens: outputIds.length,
          cachedTokens: result.cachedTokens
        },
        ...(request.logprobs
          ? {
            logprobs: outputIds.map((id, i) => ({
              token: tokenizer.decode([id]),
              logprob: logprobs[i] ?? 0
            }))
          }
          : {})
      }
      return completion
    })

    return Generation.of({ generate })
  })
