/**
 * The generation core all three model APIs share: one model request from canonical request to committed response.
 *
 * **Details**
 * `generate` (the span `Generation.generate`, without a call-site stack) runs named steps in one generator, each its own
 * effect and span only when a tracer is installed (`StepSpan.inline`):
 * `Generation.match` (the parent state in the Session's SessionForest) → `Generation.observe` (observation delta tokens
 * for the unmatched suffix, then `Forests.observe`: context check, commit) → `Generation.attempts` (the turn's budget,
 * then one `Generation.attempt` per engine attempt: wait for the Group's Runtime lease, engine generate from the
 * inference prefix ++ the pending ids; an engine abort resumes) → `Generation.parse` (end-of-turn split, reasoning and
 * tool-call parsers) → `Generation.commitResponse` (`Forests.commitResponse`) → a protocol-neutral `Completion`.
 * Failures are {@link GenerationError}s; the gateway maps them to HTTP answers. The assistant message committed is run
 * through the same canonicalization a client's echo goes through, so the next request's history matches the committed
 * state exactly. Interrupting `generate` while it waits for the lease or while the engine runs aborts the engine
 * request (the engine port guarantees it for interruption). `echo` reads a Chat body's raw history against the Session's
 * previous exactly matched request (src/protocol/RawEcho.ts), so a request that repeats it byte for byte reuses its
 * canonical messages and is matched from where it ended (docs/sessionforest.md "Matching a request").
 */
import { Clock, Context, Effect, Layer, Result } from "effect"
import { randomBytes } from "node:crypto"
import type * as Settings from "../../src/config/Settings.ts"
import * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import * as Rid from "../../src/engine/Rid.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Drift from "../../src/forest/Drift.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import * as Turn from "../../src/generation/Turn.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as RawEcho from "../../src/protocol/RawEcho.ts"
import type * as SessionError from "../../src/session/SessionError.ts"
import type * as ChatTemplate from "../../src/template/ChatTemplate.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import * as PromptIds from "../../src/template/PromptIds.ts"
import * as Engine from "../engine/Engine.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import type * as GenerationGate from "../schedule/GenerationGate.ts"
import type * as Sessions from "../schedule/Sessions.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as Forests from "./Forests.ts"
import * as Images from "./Images.ts"

export type { GenerationError } from "../../src/generation/GenerationError.ts"

export interface GenerationOptions {
  /** `--agentic-tool-call-parser`; without one the whole text is content. */
  readonly toolCallParser?: ParserRegistry.ToolCallParser | undefined
  /** `--agentic-reasoning-parser`; without one no reasoning is split off. */
  readonly reasoningParser?: ParserRegistry.ReasoningParser | undefined
  /** `--agentic-strict-match`: disable the tolerated match of a response echoed without its reasoning. */
  readonly strictMatch?: boolean | undefined
  /**
   * `--agentic-allow-special-tokens`: special-token literals in agent text (`<|im_end|>` in a user message or tool
   * result) become control tokens, as in the reference. Default false: they are tokenized as plain text.
   */
  readonly allowSpecialTokens?: boolean | undefined
  /**
   * `--agentic-fail-unparsed-turns`: a turn whose tool calls the parser dropped or could not read, leaving nothing else,
   * fails the request (500), as in the reference. Default false: the turn is committed with its raw generated text as
   * content and answered 200 (its token ids are exact; a trainer can penalize it), counted as a parser failure.
   */
  readonly failUnparsedTurns?: boolean | undefined
  /** `--rollout-skip-special-tokens`: drop special tokens from the response text (the committed ids keep them). */
  readonly skipSpecialTokens?: boolean | undefined
  /**
   * Bytes of root observations' ids kept by their rendered text (src/template/PromptIds.ts), so the Sessions of a
   * Group tokenize their shared first prompt once; default {@link PromptIds.defaultBytes}, `0` keeps none.
   */
  readonly promptIdsBytes?: number | undefined
}

/** The generation options the rollout flags describe; fails on an unknown parser name. */
export const optionsOf = (
  settings: Settings.RolloutSettings
): Result.Result<GenerationOptions, ParserRegistry.UnknownParserError> =>
  Result.gen(function*() {
    const toolCallParser = settings.agenticToolCallParser === undefined
      ? undefined
      : yield* ParserRegistry.ToolCallParsers.get(settings.agenticToolCallParser)
    const reasoningParser = settings.agenticReasoningParser === undefined
      ? undefined
      : yield* ParserRegistry.ReasoningParsers.get(settings.agenticReasoningParser)
    return {
      toolCallParser,
      reasoningParser,
      strictMatch: settings.strictMatch,
      skipSpecialTokens: settings.rolloutSkipSpecialTokens,
      allowSpecialTokens: settings.agenticAllowSpecialTokens,
      failUnparsedTurns: settings.agenticFailUnparsedTurns
    }
  })

export interface GenerationShape {
  /**
   * Run one model request of `session` and commit it; the result is rendered by the protocol that asked (whose
   * tool-call id prefix the request carries).
   */
  readonly generate: (
    session: Sessions.SessionEntry,
    request: Completion.CanonicalRequest
  ) => Effect.Effect<Completion.Completion, GenerationError.GenerationError>
  /**
   * Read a Chat body's raw history against the Session's previous request (src/protocol/RawEcho.ts): the body's mark,
   * and, when it repeats that request's history byte for byte, what those messages canonicalize to (the committed
   * state's own message objects). A request that matched exactly leaves its mark for the next one. Synchronous (it
   * runs on every Chat request). Optional: a generation core without it decodes every body whole.
   */
  readonly echo?: (session: Sessions.SessionEntry, bytes: Uint8Array) => EchoStart
}

/**
 * What {@link GenerationShape.echo} found: the body's mark, and the known canonical messages of its repeated prefix
 * with the previous request's mark (`repeated`: where those messages lie in the body, so it can be parsed without
 * them; src/protocol/EchoBody.ts).
 */
export interface EchoStart {
  readonly mark: RawEcho.Mark | undefined
  readonly known: (Canonical.KnownPrefix & { readonly state: string; readonly repeated: RawEcho.Mark }) | undefined
}

/** The mark of a Session's last exactly matched Chat request and the state its messages ended at. */
interface EchoMemo extends RawEcho.Mark {
  readonly state: string
}

export class Generation extends Context.Service<Generation, GenerationShape>()("relax-agentic/Generation") {
  static readonly layer = (
    options: GenerationOptions = {}
  ): Layer.Layer<Generation, never, Engine.Engine | Forests.Forests | Tokenizer.Tokenizer> =>
    Layer.effect(Generation, make(options))
  static readonly optionsOf = optionsOf
}

/** One model request at its parent state, as the engine attempts see it. */
export interface AttemptPlan {
  readonly session: Sessions.SessionEntry
  readonly forest: Forest.Forest
  readonly state: Canonical.State
  /** 0-based index of the model request within the Session. */
  readonly turn: number
  /**
   * The state the response is generated from (and committed under). Its inference prefix and images are read from
   * the forest once the lease is held, so a request waiting for its lease does not hold a copy of its whole prompt.
   */
  readonly parent: string
  /** Training tokens through `parent`. */
  readonly promptTokens: number
  /** The turn's sampling; `maxNewTokens` is its whole budget across attempts. */
  readonly sampling: Engine.SamplingParams
  /** The first attempt's rid (the request id the response is committed with). */
  readonly rid: string
}

/** The attempts' result: every attempt's output, the last engine result (with the finish to report), when they began. */
export interface Attempted {
  readonly pending: Turn.Pending
  readonly last: Engine.GenerateResult
  readonly startedAt: number
}

/** What one request's steps share: read once from its fiber (`Generation.generate`). */
interface RequestRun {
  readonly session: Sessions.SessionEntry
  /** Whether its steps open spans (`StepSpan.isTracing`). */
  readonly tracing: boolean
  readonly clock: Clock.Clock
  /** The fiber's context inside the request's span, for the metrics' updates. */
  readonly context: Context.Context<never>
  /** An attempt interrupted (the request cancelled while waiting or generating) counts as an abort. */
  readonly countAbort: () => Effect.Effect<void>
  /** The scheduler task the request started in (`FairScheduler.currentTask`; undefined outside one). */
  readonly task: number | undefined
}

/** How the attempts of a request fail. */
type AttemptError =
  | ContextLengthError.ContextLengthError
  | GenerationError.GenerationEngineError
  | SessionError.SessionClosedError

/** What the parse step gives the commit. */
interface Parsed {
  readonly parsed: Turn.ParsedResponse
  readonly finish: Completion.FinishReason
  readonly stopSequence: string | undefined
}

/**
 * What an embedded policy sees for one attempt. `promptText` is decoded when a policy first reads it: decoding the
 * whole prompt on every request would make each request's cost grow with the history.
 */
const policyRequest = (planned: AttemptPlan, decodePrompt: () => string): Engine.PolicyRequest => {
  let promptText: string | undefined
  return {
    sessionId: planned.session.sessionId,
    turn: planned.turn,
    // A copy: a policy is user code, and the forest keeps and gives out this list again.
    messages: Forest.fullMessages(planned.forest, planned.parent).slice(),
    tools: planned.state.tools,
    chatTemplateKwargs: planned.state.chat_template_kwargs,
    seed: planned.sampling.seed,
    get promptText() {
      promptText ??= decodePrompt()
      return promptText
    }
  }
}

const noEcho: EchoStart = { mark: undefined, known: undefined }

/**
 * A completion id: 16 random bytes in hex, as `randomBytes(16)` gives, taken from a pool of 4 KiB drawn at once and
 * drawn again when spent (one `randomBytes(16)` call costs ~5 µs, most of it the call itself; from the pool ~0.2 µs).
 */
const completionId = (() => {
  let pool = Buffer.alloc(0)
  let at = 0
  return (): string => {
    if (at + 16 > pool.length) {
      pool = randomBytes(4096)
      at = 0
    }
    const id = pool.toString("hex", at, at + 16)
    at += 16
    return id
  }
})()

const make = (options: GenerationOptions) =>
  Effect.gen(function*() {
    const engine = yield* Engine.Engine
    const forests = yield* Forests.Forests
    const tokenizer = yield* Tokenizer.Tokenizer

    /**
     * The parent state: the longest committed prefix of the request (with the reasoning tolerance unless strict).
     * Synchronous: the drift metric is updated with the request's context (`Metric.update` without its own step).
     */
    function* match(
      request: RequestRun,
      forest: Forest.Forest,
      state: Canonical.State,
      known: Matching.KnownState | undefined
    ) {
      const { session } = request
      const matched = Matching.match(forest, state, { strict: options.strictMatch ?? false, known })
      if (matched.tolerated) session.counters.toleratedMatches++
      // Drift: the echoed history diverged from a committed response here (docs/outputs.md, `rollout/drift/...`).
      const drift = Drift.ofRequest(forest, matched.parent, matched.suffix)
      if (drift !== undefined) {
        const counts = session.counters.drift ??= new Map()
        counts.set(drift.cause, (counts.get(drift.cause) ?? 0) + 1)
        Instruments.drift({ cause: drift.cause }).updateUnsafe(1, request.context)
      }
      return matched
    }

    const encodeOptions: ObservationDelta.EncodeOptions = { allowSpecialTokens: options.allowSpecialTokens ?? false }
    const promptIds = new PromptIds.PromptIds(options.promptIdsBytes ?? PromptIds.defaultBytes)

    /**
     * Observation delta tokens (docs/sessionforest.md, "Observation tokens"): the full prompt at the root, the
     * dummy-prefix delta deeper down. A plain text is encoded with `encodeAsync`, so a huge message is tokenized off
     * the event loop; a text with marked agent literals (rare) is encoded in place.
     */
    const observationTokens = (
      forest: Forest.Forest,
      matched: Matching.Match,
      state: Canonical.State
    ): Effect.Effect<ReadonlyArray<number>, ChatTemplate.TemplateError> => {
      const root = Forest.isRoot(forest, matched.parent)
      const encoding = root
        ? ObservationDelta.rootPlan(tokenizer, matched.suffix, state.tools, state.chat_template_kwargs, encodeOptions)
        : ObservationDelta.deltaPlan(tokenizer, matched.suffix, state.tools, state.chat_template_kwargs, encodeOptions)
      if (Result.isFailure(encoding)) return Effect.fail(encoding.failure)
      const toEncode = encoding.success
      if (toEncode.marker !== undefined) return Effect.sync(() => ObservationDelta.encodePlan(tokenizer, toEncode))
      if (!root) {
        return Effect.map(tokenizer.encodeAsync(toEncode.text), (ids) => ObservationDelta.planIds(toEncode, ids))
      }
      // A root observation is the whole rendered prompt (a plan without a skip): a Group's Sessions share it.
      const kept = promptIds.get(toEncode.text)
      return kept !== undefined
        ? Effect.succeed(kept)
        : Effect.map(
          tokenizer.encodeAsync(toEncode.text),
          (ids) => promptIds.keep(toEncode.text, ObservationDelta.planIds(toEncode, ids))
        )
    }

    /** Commit the request's new messages (if any) under the matched parent; returns the state to generate from. */
    function* observe(
      session: Sessions.SessionEntry,
      forest: Forest.Forest,
      matched: Matching.Match,
      state: Canonical.State
    ) {
      if (matched.suffix.length === 0) return matched.parent
      const tokens = yield* observationTokens(forest, matched, state)
      // Images get their processor-expanded training tokens; context limits count those (docs/runtime.md, "Model requests").
      const train = yield* Images.expandObservation(tokenizer, tokens, ForestCommit.mediaOf(matched.suffix)).pipe(
        Effect.mapError((detail) => new GenerationError.ImageRejectedError({ detail }))
      )
      return yield* forests.observe(forest, {
        parent: matched.parent,
        rolloutId: session.rolloutId(),
        messages: matched.suffix,
        tokens,
        train,
        tools: state.tools,
        chatTemplateKwargs: state.chat_template_kwargs,
        maxContextLen: session.maxContextLen ?? null
      })
    }

    /** What the engine attempts need at `parent`; fails when no generation budget is left (docs/sessionforest.md). */
    function* plan(
      session: Sessions.SessionEntry,
      forest: Forest.Forest,
      request: Completion.CanonicalRequest,
      turn: number,
      parent: string
    ) {
      const requested = Turn.requestedTokens(session.sampling.maxNewTokens, request.maxTokens)
      const budget = Forest.generationBudget(forest, parent, session.maxContextLen ?? null, requested)
      if (Result.isFailure(budget)) return yield* budget.failure
      const planned: AttemptPlan = {
        session,
        forest,
        state: request.state,
        turn,
        parent,
        promptTokens: Forest.trainTokenCount(forest, parent),
        sampling: Turn.turnSampling(session.sampling, request, budget.success),
        rid: Rid.forAttempt({ sessionId: session.sessionId, parent, turn, attempt: 0 })
      }
      return planned
    }

    /**
     * One engine attempt: wait for the lease, then (through the generation gate, when the Session has one: parked
     * between steps) generate from the prefix ++ the pending ids with the rest of the budget.
     */
    function* attempt(
      request: RequestRun,
      planned: AttemptPlan,
      pending: Turn.Pending,
      index: number,
      live: GenerationGate.LiveRequest | undefined
    ) {
      const { session } = planned
      const { clock } = request
      const waitFrom = clock.currentTimeMillisUnsafe()
      // A lease already held, with the request still in the scheduler task it started in (not resumed in a callback or
      // in another fiber's task since): nothing to wait for and nowhere to leave, so neither step runs.
      const held = request.task !== undefined && session.leaseHeld?.() === true &&
        FairScheduler.currentTask() === request.task
      if (!held) yield* session.awaitLease
      Instruments.leaseWaitSeconds.updateUnsafe((clock.currentTimeMillisUnsafe() - waitFrom) / 1000, request.context)
      // A lease granted to many waiting requests at once resumes them all inside one call.
      if (!held) yield* FairScheduler.continueAsTask
      // What the attempt continues from: the inference prefix followed by the pending ids, one Int32Array.
      const inputIds = Forest.inferencePrefix(planned.forest, planned.parent, pending.outputIds)
      // Images along the lineage go with the prompt (SGLang `image_data`).
      const media = Forest.inferenceMedia(planned.forest, planned.parent)
      const maxNewTokens = Turn.remainingTokens(planned.sampling.maxNewTokens, pending)
      const rid = index === 0
        ? planned.rid
        : Rid.forAttempt({ sessionId: session.sessionId, parent: planned.parent, turn: planned.turn, attempt: index })
      let startedAt = 0
      // The attempt starts when the engine is asked (through the gate, that may be later).
      const generate = Effect.suspend(() => {
        startedAt = clock.currentTimeMillisUnsafe()
        return engine.generate({
          inputIds,
          sampling: { ...planned.sampling, maxNewTokens },
          rid,
          returnLogprob: true,
          resumedTokens: pending.outputIds.length,
          protected: session.gate?.isProtected() === true,
          imageData: media.length > 0 ? media : undefined,
          sessionId: session.sessionId,
          conversation: () => policyRequest(planned, () => tokenizer.decode(Array.from(inputIds)))
        })
      }).pipe(
        Effect.onInterrupt(request.countAbort),
        Effect.mapError((error) =>
          error._tag === "ContextLengthError"
            ? new ContextLengthError.ContextLengthError({
              limit: session.maxContextLen ?? null,
              promptTokens: planned.promptTokens,
              completionTokens: maxNewTokens
            })
            : new GenerationError.GenerationEngineError({ reason: "engine", detail: error.message, cause: error })
        )
      )
      const output = yield* (live === undefined ? generate : live.attempt(rid, generate))
      return { output, startedAt, elapsedMs: clock.currentTimeMillisUnsafe() - startedAt }
    }

    /**
     * The engine attempts of one request. An engine abort keeps its partial output pending (never committed) and the
     * request resumes after the lease is held again (docs/runtime.md, "Model requests"); the pending output is one value,
     * {@link Turn.Pending}, and {@link Turn.afterAttempt} decides whether to finish, resume or give up.
     */
    function* attemptLoop(
      request: RequestRun,
      planned: AttemptPlan,
      live: GenerationGate.LiveRequest | undefined
    ): Effect.gen.Return<Attempted, AttemptError> {
      let pending = Turn.noPending(Forest.node(planned.forest, planned.parent).abortCount)
      let startedAt: number | undefined
      let aborts = 0
      for (let index = 0;; index++) {
        const attempted = yield* StepSpan.inline(
          request.tracing,
          "Generation.attempt",
          attempt(request, planned, pending, index, live)
        )
        startedAt ??= attempted.startedAt
        let outcome = Turn.afterAttempt(pending, attempted.output, attempted.elapsedMs, planned.sampling.maxNewTokens)
        if (attempted.output.finishReason.type === "abort") {
          planned.session.counters.aborts++
          aborts++
          Instruments.aborts.updateUnsafe(1, request.context)
          // Partial rollout: a step boundary's pause parks the request at the gate until the next step (N aborts
          // protect it); a weight update or a trainer's pause cut it (even in SGLang's waiting queue, with no
          // token). Neither is the engine failing, so it never counts toward giving up.
          const parked = live !== undefined && (yield* live.aborted(aborts))
          if (parked || attempted.output.cutByUpdate === true) outcome = Turn.parked(outcome)
        }
        pending = outcome.pending
        if (outcome._tag === "Finished") {
          const attemptedAll: Attempted = {
            pending,
            last: { ...attempted.output, finishReason: outcome.finishReason },
            startedAt
          }
          return attemptedAll
        }
        if (outcome._tag === "GiveUp") {
          return yield* new GenerationError.GenerationEngineError({
            reason: "aborted",
            detail:
              `Generation backend aborted request ${planned.rid} ${pending.emptyAborts} times in a row without output tokens`
          })
        }
      }
    }

    /** The attempts through the Session's generation gate (parked between steps). */
    function* gated(
      gate: GenerationGate.SessionGate,
      run: RequestRun,
      planned: AttemptPlan
    ): Effect.gen.Return<Attempted, AttemptError> {
      return yield* gate.request((live) => Effect.gen(() => attemptLoop(run, planned, live)))
    }

    /** Split the generated text into content, reasoning and tool calls; counts parser failures and dropped calls. */
    function* parse(request: RequestRun, planned: AttemptPlan, done: Attempted) {
      const split = Turn.splitEndOfTurn(done.pending.outputIds, tokenizer.endOfTurnIds, planned.sampling.stopTokenIds)
      const text = tokenizer.decode(split.textIds, { skipSpecialTokens: options.skipSpecialTokens ?? false })
      const parsedText = Turn.parseResponse(text, options, planned.state.tools)
      planned.session.counters.parserFailures += parsedText.malformed
      planned.session.counters.droppedToolCalls += parsedText.droppedUnknownTools
      const failures = parsedText.malformed + parsedText.droppedUnknownTools
      if (failures > 0) Instruments.parserFailures.updateUnsafe(failures, request.context)
      if (failures > 0) (planned.session.counters.parserFailedRequests ??= new Map()).set(planned.rid, failures)
      const unparsed = Turn.isEmpty(parsedText) && parsedText.malformed + parsedText.droppedUnknownTools > 0
      if (Turn.isEmpty(parsedText) && (!unparsed || options.failUnparsedTurns === true || text.length === 0)) {
        return yield* new GenerationError.UnusableResponseError({
          detail: "Response parsers produced an empty assistant message"
        })
      }
      // The parser dropped or could not read every call and nothing else is left: the raw text is the content.
      const parsed = unparsed ? { ...parsedText, content: text } : parsedText
      const response: Parsed = {
        parsed,
        finish: Turn.finishOf(Turn.engineFinish(split, done.last.finishReason), parsed.calls.length),
        stopSequence: Turn.stopSequence(done.last.finishReason)
      }
      return response
    }

    /** Commit the assistant message with the exact engine output; returns what the completion is built from. */
    function* commitResponse(
      run: RequestRun,
      planned: AttemptPlan,
      request: Completion.CanonicalRequest,
      done: Attempted,
      response: Parsed
    ) {
      const { pending } = done
      const toolCalls = response.parsed.calls.length === 0 ? [] : Turn.identifyToolCalls(response.parsed.calls, {
        prefix: request.toolCallIdPrefix,
        sessionId: planned.session.sessionId,
        responseKey: Turn.responseKey(planned.parent, pending.outputIds)
      })
      const assistant = Turn.assistantMessage(response.parsed, toolCalls)
      if (Result.isFailure(assistant)) return yield* assistant.failure
      const message = assistant.success
      const now = run.clock.currentTimeMillisUnsafe()
      Instruments.tokensGenerated.updateUnsafe(pending.outputIds.length, run.context)
      Instruments.generationSeconds.updateUnsafe(pending.generationMs / 1000, run.context)
      Instruments.requestSeconds.updateUnsafe((now - done.startedAt) / 1000, run.context)
      yield* forests.commitResponse(planned.forest, {
        parent: planned.parent,
        rolloutId: planned.session.rolloutId(),
        message,
        tokens: pending.outputIds,
        logprobs: pending.logprobs,
        weightVersions: pending.weightVersions,
        attemptLengths: pending.attemptLengths,
        ...(pending.routedExperts === undefined ? {} : { routedExperts: pending.routedExperts }),
        status: response.finish === "length" ? "truncated" : "completed",
        requestId: planned.rid,
        abortCount: pending.abortCount,
        wallElapsedS: (now - done.startedAt) / 1000,
        generationElapsedS: pending.generationMs / 1000,
        cachedTokens: done.last.cachedTokens,
        promptTokens: done.last.promptTokens
      })
      const input: Turn.CompletionInput = {
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
          ? pending.outputIds.map((id, i) => ({ token: tokenizer.decode([id]), logprob: pending.logprobs[i] ?? 0 }))
          : undefined
      }
      return { now, input }
    }

    /**
     * One model request, from match to commit, as one generator: each named step (`Generation.match`, ...,
     * `Generation.commitResponse`, and `Generation.attempt` inside `Generation.attempts`) runs inline, delegated by
     * this generator, unless a tracing backend is installed, when it is an effect in its own span
     * (`StepSpan.inline`); the Clock and the context (for the metrics) are read once, from the request's fiber.
     */
    function* request(run: RequestRun, request: Completion.CanonicalRequest) {
      const { session, tracing } = run
      session.counters.requests++
      const turn = session.counters.requests - 1
      const forest = yield* forests.get(session.sessionId)
      const matched = yield* StepSpan.inline(
        tracing,
        "Generation.match",
        match(run, forest, request.state, request.echo?.known)
      )
      const parent = yield* StepSpan.inline(
        tracing,
        "Generation.observe",
        observe(session, forest, matched, request.state)
      )
      // `parent`'s full messages are the request's (none tolerated): the next request may repeat them byte for byte.
      if (request.echo !== undefined && !matched.tolerated) echoes.set(forest, { ...request.echo.mark, state: parent })
      const planned = yield* StepSpan.inline(tracing, "Generation.plan", plan(session, forest, request, turn, parent))
      const gate = session.gate
      const done = yield* StepSpan.inline(
        tracing,
        "Generation.attempts",
        gate === undefined ? attemptLoop(run, planned, undefined) : gated(gate, run, planned)
      )
      session.counters.generations++
      if (done.pending.outputIds.length === 0) {
        return yield* new GenerationError.UnusableResponseError({
          detail: "Generation backend returned a terminal response without output tokens"
        })
      }
      const response = yield* StepSpan.inline(tracing, "Generation.parse", parse(run, planned, done))
      const committed = yield* StepSpan.inline(
        tracing,
        "Generation.commitResponse",
        commitResponse(run, planned, request, done, response)
      )
      return Turn.completion(completionId(), committed.now, committed.input)
    }

    // The span `Generation.generate` when a tracer is installed (StepSpan), without a call-site stack: `Effect.fn`
    // captured an `Error` and set a stack frame in the fiber's context on every request.
    const generate = (
      session: Sessions.SessionEntry,
      canonical: Completion.CanonicalRequest
    ): Effect.Effect<Completion.Completion, GenerationError.GenerationError> =>
      Effect.withFiber((fiber) => {
        const tracing = StepSpan.isTracing(fiber)
        const run: RequestRun = {
          session,
          tracing,
          clock: fiber.getRef(Clock.Clock),
          context: fiber.context,
          countAbort: () => Effect.sync(() => session.counters.aborts++),
          task: FairScheduler.currentTask()
        }
        const generated = Effect.gen(() => request(run, canonical))
        return StepSpan.spanIf(tracing, generated, "Generation.generate")
      })

    /** Each forest's last exactly matched Chat request (see `echo`); it goes with its forest. */
    const echoes = new WeakMap<Forest.Forest, EchoMemo>()

    const echo = (session: Sessions.SessionEntry, bytes: Uint8Array): EchoStart => {
      const forest = forests.find(session.sessionId)
      // No forest: the generation answers that itself.
      if (forest === undefined) return noEcho
      const memo = echoes.get(forest)
      const reading = RawEcho.read(bytes, memo)
      if (!reading.repeats || memo === undefined || !forest.nodes.has(memo.state)) {
        return { mark: reading.mark, known: undefined }
      }
      const messages = Forest.fullMessages(forest, memo.state)
      return { mark: reading.mark, known: { count: memo.count, messages, state: memo.state, repeated: memo } }
    }

    return Generation.of({ generate, echo })
  })
