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
 * The steps are functions of their own modules over what they share (`StepContext.ts`: the core's services and
 * options, the request's run): `Observation.ts` (match, observe), `Attempts.ts` (plan, attempts), `AssistantTurn.ts`
 * (parse, commitResponse); this module composes them per request and keeps the echo memo.
 * Failures are {@link GenerationError}s; the gateway maps them to HTTP answers. The assistant message committed is run
 * through the same canonicalization a client's echo goes through, so the next request's history matches the committed
 * state exactly. Interrupting `generate` while it waits for the lease or while the engine runs aborts the engine
 * request (the engine port guarantees it for interruption). `echo` reads a Chat body's raw history against the Session's
 * previous exactly matched request (src/protocol/RawEcho.ts), so a request that repeats it byte for byte reuses its
 * canonical messages and is matched from where it ended (docs/sessionforest.md "Matching a request"). `prepare` and
 * `complete` are `generate` cut at the first lease wait, for the gateway to park a request waiting for its lease
 * (layers/gateway/LeaseParking.ts).
 */
import { Clock, Context, Effect, type Fiber, Layer, Result } from "effect"
import { randomBytes } from "node:crypto"
import type * as Settings from "../../src/config/Settings.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import * as TurnCompletion from "../../src/generation/TurnCompletion.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as RawEcho from "../../src/protocol/RawEcho.ts"
import * as PromptIds from "../../src/template/PromptIds.ts"
import * as Engine from "../engine/Engine.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import type * as Sessions from "../schedule/Sessions.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as VisionInputs from "../vision/VisionInputs.ts"
import * as AssistantTurn from "./AssistantTurn.ts"
import * as Attempts from "./Attempts.ts"
import * as Forests from "./Forests.ts"
import * as Observation from "./Observation.ts"
import type * as StepContext from "./StepContext.ts"

export type { GenerationError } from "../../src/generation/GenerationError.ts"
export type { GenerationOptions } from "./StepContext.ts"

/** The generation options the rollout flags describe; fails on an unknown parser name. */
export const optionsOf = (
  settings: Settings.RolloutSettings
): Result.Result<StepContext.GenerationOptions, ParserRegistry.UnknownParserError> =>
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
   * `generate` in two parts, for a caller that waits for the Session's lease itself (the gateway parks a request
   * whose lease is not held as a small record instead of a suspended fiber: layers/gateway/LeaseParking.ts):
   * `prepare` runs the request up to its first lease wait (match, observe, plan: the request is its Session's
   * next turn, its observation committed), `complete` from there on (`leaseWaitFrom`: when the caller began waiting,
   * for the lease-wait metric). `generate` is the two in one fiber; a span is opened by `generate` only, so a caller
   * with a tracer installed uses `generate`. Optional, as `echo` is.
   */
  readonly prepare?: (
    session: Sessions.SessionEntry,
    request: Completion.CanonicalRequest
  ) => Effect.Effect<Prepared, GenerationError.GenerationError>
  readonly complete?: (
    prepared: Prepared,
    leaseWaitFrom?: number
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

/** A request {@link GenerationShape.prepare}d up to its first lease wait: what completing it needs. */
export interface Prepared {
  readonly request: Completion.CanonicalRequest
  readonly planned: Attempts.AttemptPlan
}

/** The mark of a Session's last exactly matched Chat request and the state its messages ended at. */
interface EchoMemo extends RawEcho.Mark {
  readonly state: string
}

export class Generation extends Context.Service<Generation, GenerationShape>()("relax-agentic/Generation") {
  static readonly layer = (
    options: StepContext.GenerationOptions = {}
  ): Layer.Layer<Generation, never, Engine.Engine | Forests.Forests | Tokenizer.Tokenizer> =>
    Layer.effect(Generation, make(options))
  static readonly optionsOf = optionsOf
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

const make = (options: StepContext.GenerationOptions) =>
  Effect.gen(function*() {
    const core: StepContext.Core = {
      engine: yield* Engine.Engine,
      forests: yield* Forests.Forests,
      tokenizer: yield* Tokenizer.Tokenizer,
      visionInputs: yield* VisionInputs.VisionInputs,
      options,
      encodeOptions: { allowSpecialTokens: options.allowSpecialTokens ?? false },
      promptIds: new PromptIds.PromptIds(options.promptIdsBytes ?? PromptIds.defaultBytes)
    }
    const { forests } = core

    /**
     * One model request, from match to commit, as one generator (`request`) delegating to its two halves, cut at the
     * first lease wait (`prepared`, then `completed`): each named step (`Generation.match`, ...,
     * `Generation.commitResponse`, and `Generation.attempt` inside `Generation.attempts`) runs inline, delegated by
     * them, unless a tracing backend is installed, when it is an effect in its own span (`StepSpan.inline`); the Clock
     * and the context (for the metrics) are read once, from the request's fiber. `generate` runs `request` (one
     * `Effect.gen`: the halves as two, one after the other, were 4 more Effect steps a request); `prepare` and
     * `complete` run a half each.
     */
    function* request(run: StepContext.RequestRun, request: Completion.CanonicalRequest) {
      const planned = yield* prepared(run, request)
      return yield* completed(run, request, planned)
    }

    /** `Generation.match`, `Generation.observe` and `Generation.plan`: the request up to its first lease wait. */
    function* prepared(run: StepContext.RequestRun, request: Completion.CanonicalRequest) {
      const { session, tracing } = run
      session.counters.requests++
      const turn = session.counters.requests - 1
      const forest = yield* forests.get(session.sessionId)
      const matched = yield* StepSpan.inline(
        tracing,
        "Generation.match",
        Observation.match(core, run, forest, request.state, request.echo?.known)
      )
      const parent = yield* StepSpan.inline(
        tracing,
        "Generation.observe",
        Observation.observe(core, session, forest, matched, request.state)
      )
      // `parent`'s full messages are the request's (none tolerated): the next request may repeat them byte for byte.
      if (request.echo !== undefined && !matched.tolerated) echoes.set(forest, { ...request.echo.mark, state: parent })
      return yield* StepSpan.inline(
        tracing,
        "Generation.plan",
        Attempts.plan(session, forest, request, turn, parent)
      )
    }

    /** `Generation.attempts` (from the first lease wait), `Generation.parse` and `Generation.commitResponse`. */
    function* completed(
      run: StepContext.RequestRun,
      request: Completion.CanonicalRequest,
      planned: Attempts.AttemptPlan
    ) {
      const { session, tracing } = run
      const gate = session.gate
      const done = yield* StepSpan.inline(
        tracing,
        "Generation.attempts",
        gate === undefined
          ? Attempts.attemptLoop(core, run, planned, undefined)
          : Attempts.gated(core, gate, run, planned)
      )
      session.counters.generations++
      if (done.pending.outputIds.length === 0) {
        return yield* new GenerationError.UnusableResponseError({
          detail: "Generation backend returned a terminal response without output tokens"
        })
      }
      const response = yield* StepSpan.inline(
        tracing,
        "Generation.parse",
        AssistantTurn.parse(core, run, planned, done)
      )
      const committed = yield* StepSpan.inline(
        tracing,
        "Generation.commitResponse",
        AssistantTurn.commitResponse(core, run, planned, request, done, response)
      )
      return TurnCompletion.completion(completionId(), committed.now, committed.input)
    }

    // The span `Generation.generate` when a tracer is installed (StepSpan), without a call-site stack: `Effect.fn`
    // captured an `Error` and set a stack frame in the fiber's context on every request.
    const runOf = (
      fiber: Fiber.Fiber<unknown, unknown>,
      session: Sessions.SessionEntry,
      leaseWaitFrom?: number
    ): StepContext.RequestRun => ({
      session,
      tracing: StepSpan.isTracing(fiber),
      clock: fiber.getRef(Clock.Clock),
      context: fiber.context,
      countAbort: () => Effect.sync(() => session.counters.aborts++),
      task: FairScheduler.currentTask(),
      leaseWaitFrom
    })

    const generate = (
      session: Sessions.SessionEntry,
      canonical: Completion.CanonicalRequest
    ): Effect.Effect<Completion.Completion, GenerationError.GenerationError> =>
      Effect.withFiber((fiber) => {
        const run = runOf(fiber, session)
        const generated = Effect.gen(() => request(run, canonical))
        return StepSpan.spanIf(run.tracing, generated, "Generation.generate")
      })

    const prepare = (
      session: Sessions.SessionEntry,
      canonical: Completion.CanonicalRequest
    ): Effect.Effect<Prepared, GenerationError.GenerationError> =>
      Effect.withFiber((fiber) => {
        const run = runOf(fiber, session)
        return Effect.gen(function*() {
          const planned = yield* prepared(run, canonical)
          return { request: canonical, planned }
        })
      })

    const complete = (
      prepared: Prepared,
      leaseWaitFrom?: number
    ): Effect.Effect<Completion.Completion, GenerationError.GenerationError> =>
      Effect.withFiber((fiber) => {
        const run = runOf(fiber, prepared.planned.session, leaseWaitFrom)
        return Effect.gen(() => completed(run, prepared.request, prepared.planned))
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

    return Generation.of({ generate, prepare, complete, echo })
  })
