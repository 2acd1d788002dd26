/**
 * What the named steps of a model request share (layers/generation/Generation.ts): the generation core's services and
 * options (`Core`, built once with the layer) and one request's run (`RequestRun`, read once from its fiber).
 */
import type { Clock, Context, Effect } from "effect"
import type * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import type * as GenerationError from "../../src/generation/GenerationError.ts"
import type * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import type * as SessionError from "../../src/session/SessionError.ts"
import type * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import type * as PromptIds from "../../src/template/PromptIds.ts"
import type * as Engine from "../engine/Engine.ts"
import type * as Sessions from "../schedule/Sessions.ts"
import type * as Tokenizer from "../tokenizer/Tokenizer.ts"
import type * as VisionInputs from "../vision/VisionInputs.ts"
import type * as Forests from "./Forests.ts"

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

/** The generation core's services and options, shared by every request's steps. */
export interface Core {
  readonly engine: Engine.EngineShape
  readonly forests: Forests.ForestsShape
  readonly tokenizer: Tokenizer.TokenizerShape
  /** What vision observations train on (`--multimodal-train-inputs`; `grid` when no layer provides it). */
  readonly visionInputs: VisionInputs.VisionInputsShape
  readonly options: GenerationOptions
  readonly encodeOptions: ObservationDelta.EncodeOptions
  /** Root observations' ids by their rendered text, so the Sessions of a Group tokenize a shared first prompt once. */
  readonly promptIds: PromptIds.PromptIds
}

/** What one request's steps share: read once from its fiber (`Generation.generate`). */
export interface RequestRun {
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
  /**
   * When the request began waiting for its lease, where its caller waited for it before this run (a request the
   * gateway parked: `Generation.complete`); the first attempt's lease wait counts from there.
   */
  readonly leaseWaitFrom?: number | undefined
}

/** How the attempts of a request fail. */
export type AttemptError =
  | ContextLengthError.ContextLengthError
  | GenerationError.GenerationEngineError
  | SessionError.SessionClosedError
