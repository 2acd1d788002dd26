/**
 * The steps `Generation.plan` and `Generation.attempts` of a model request (layers/generation/Generation.ts): the
 * turn's budget at its parent state, then one `Generation.attempt` per engine attempt until the turn finishes
 * (docs/runtime.md "Model requests").
 */
import { Effect, Result } from "effect"
import * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import * as Rid from "../../src/engine/Rid.ts"
import * as ContextLimit from "../../src/forest/ContextLimit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import * as PendingOutput from "../../src/generation/PendingOutput.ts"
import * as TurnSampling from "../../src/generation/TurnSampling.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import type * as Engine from "../engine/Engine.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import type * as GenerationGate from "../schedule/GenerationGate.ts"
import type * as Sessions from "../schedule/Sessions.ts"
import type * as StepContext from "./StepContext.ts"

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
  readonly pending: PendingOutput.Pending
  readonly last: Engine.GenerateResult
  readonly startedAt: number
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

/** What the engine attempts need at `parent`; fails when no generation budget is left (docs/sessionforest.md). */
export function* plan(
  session: Sessions.SessionEntry,
  forest: Forest.Forest,
  request: Completion.CanonicalRequest,
  turn: number,
  parent: string
) {
  const requested = TurnSampling.requestedTokens(session.sampling.maxNewTokens, request.maxTokens)
  const budget = ContextLimit.generationBudget(forest, parent, session.maxContextLen ?? null, requested)
  if (Result.isFailure(budget)) return yield* budget.failure
  const planned: AttemptPlan = {
    session,
    forest,
    state: request.state,
    turn,
    parent,
    promptTokens: Forest.trainTokenCount(forest, parent),
    sampling: TurnSampling.turnSampling(session.sampling, request, budget.success),
    rid: Rid.forAttempt({ sessionId: session.sessionId, parent, turn, attempt: 0 })
  }
  return planned
}

/**
 * One core.engine attempt: wait for the lease, then (through the generation gate, when the Session has one: parked
 * between steps) generate from the prefix ++ the pending ids with the rest of the budget.
 */
export function* attempt(
  core: StepContext.Core,
  request: StepContext.RequestRun,
  planned: AttemptPlan,
  pending: PendingOutput.Pending,
  index: number,
  live: GenerationGate.LiveRequest | undefined
) {
  const { session } = planned
  const { clock } = request
  const waitFrom = index === 0 && request.leaseWaitFrom !== undefined
    ? request.leaseWaitFrom
    : clock.currentTimeMillisUnsafe()
  // A lease already held, with the request still in the scheduler task it started in (not resumed in a callback or
  // in another fiber's task since): nothing to wait for and nowhere to leave, so neither step runs.
  const held = request.task !== undefined && session.leaseHeld?.() === true &&
    FairScheduler.currentTask() === request.task
  if (!held) yield* session.awaitLease
  Instruments.leaseWaitSeconds.updateUnsafe((clock.currentTimeMillisUnsafe() - waitFrom) / 1000, request.context)
  // A lease granted to many waiting requests at once resumes them all inside one call.
  if (!held) yield* FairScheduler.continueAsTask
  // What the attempt continues from: the inference prefix followed by the pending ids, one Int32Array.
  const inputIds = InferencePrefix.ids(planned.forest, planned.parent, pending.outputIds)
  const tail = pending.outputIds
  // Images along the lineage go with the prompt (SGLang `image_data`).
  const media = InferencePrefix.media(planned.forest, planned.parent)
  const maxNewTokens = PendingOutput.remainingTokens(planned.sampling.maxNewTokens, pending)
  const rid = index === 0
    ? planned.rid
    : Rid.forAttempt({ sessionId: session.sessionId, parent: planned.parent, turn: planned.turn, attempt: index })
  let startedAt = 0
  // The attempt starts when the core.engine is asked (through the gate, that may be later).
  const generate = Effect.suspend(() => {
    startedAt = clock.currentTimeMillisUnsafe()
    return core.engine.generate({
      inputIds,
      inputChain: () => InferencePrefix.chain(planned.forest, planned.parent, tail),
      sampling: { ...planned.sampling, maxNewTokens },
      rid,
      returnLogprob: true,
      resumedTokens: pending.outputIds.length,
      protected: session.gate?.isProtected() === true,
      admission: session.admission?.(planned.promptTokens + pending.outputIds.length),
      imageData: media.length > 0 ? media : undefined,
      sessionId: session.sessionId,
      conversation: () => policyRequest(planned, () => core.tokenizer.decode(Array.from(inputIds)))
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
        : new GenerationError.GenerationEngineError({
          reason: error.reason === "lora" ? "lora" : "engine",
          detail: error.message,
          cause: error,
          ...(error.code === undefined ? {} : { code: error.code })
        })
    )
  )
  const output = yield* (live === undefined ? generate : live.attempt(rid, generate))
  return { output, startedAt, elapsedMs: clock.currentTimeMillisUnsafe() - startedAt }
}

/**
 * The core.engine attempts of one request. An core.engine abort keeps its partial output pending (never committed) and the
 * request resumes after the lease is held again (docs/runtime.md, "Model requests"); the pending output is one value,
 * {@link PendingOutput.Pending}, and {@link PendingOutput.afterAttempt} decides whether to finish, resume or give up.
 */
export function* attemptLoop(
  core: StepContext.Core,
  request: StepContext.RequestRun,
  planned: AttemptPlan,
  live: GenerationGate.LiveRequest | undefined
): Effect.gen.Return<Attempted, StepContext.AttemptError> {
  let pending = PendingOutput.noPending(Forest.node(planned.forest, planned.parent).abortCount)
  let startedAt: number | undefined
  let aborts = 0
  for (let index = 0;; index++) {
    const attempted = yield* StepSpan.inline(
      request.tracing,
      "Generation.attempt",
      attempt(core, request, planned, pending, index, live)
    )
    startedAt ??= attempted.startedAt
    let outcome = PendingOutput.afterAttempt(
      pending,
      attempted.output,
      attempted.elapsedMs,
      planned.sampling.maxNewTokens
    )
    if (attempted.output.finishReason.type === "abort") {
      planned.session.counters.aborts++
      aborts++
      Instruments.aborts.updateUnsafe(1, request.context)
      // Partial rollout: a step boundary's pause parks the request at the gate until the next step (N aborts
      // protect it); a weight update or a trainer's pause cut it (even in SGLang's waiting queue, with no
      // token). Neither is the core.engine failing, so it never counts toward giving up.
      const parked = live !== undefined && (yield* live.aborted(aborts))
      // A worker dying under the attempt is not the engine failing either (it resumes on a live worker).
      if (parked || attempted.output.cutByUpdate === true || attempted.output.movedFrom !== undefined) {
        outcome = PendingOutput.parked(outcome)
      }
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
export function* gated(
  core: StepContext.Core,
  gate: GenerationGate.SessionGate,
  run: StepContext.RequestRun,
  planned: AttemptPlan
): Effect.gen.Return<Attempted, StepContext.AttemptError> {
  return yield* gate.request((live) => Effect.gen(() => attemptLoop(core, run, planned, live)))
}
