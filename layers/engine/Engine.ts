/**
 * The inference port: token ids in, token ids out. Implemented by the embedded engine (default) and by SGLang.
 *
 * **Details**
 * Generated ids come back exactly as the engine produced them and are never re-tokenized. Interrupting the fiber
 * that called `generate` aborts the request on the engine (no orphaned generation); an explicit `abort(rid)` makes
 * the pending `generate` return what was produced so far with `finishReason.type === "abort"`.
 *
 * A partial output is resumed by a new request (new rid) whose input is `prompt ++ partial ids` and whose
 * `maxNewTokens` is the original minus the partial length (docs/runtime.md, "Partial rollout and fully async"); with the same sampling seed the
 * embedded engine then continues exactly where the interrupted generation stopped.
 *
 * Weight updates come in two forms (docs/trainer.md, "Weight updates"):
 * - two-phase, for trainers that push weights into the engine themselves: `pauseGeneration(mode)` stops generation
 *   (`abort`: in-flight attempts return their partial output and their callers park them; `retract` / `in_place`:
 *   SGLang keeps them and continues them after the resume), new attempts wait; the trainer pushes its weights with
 *   their version; `resumeGeneration(version)` lets everything continue on it;
 * - one call, `updateWeights(version)`, for trainers that let relax-agentic relabel: every generation in flight is
 *   aborted (SGLang's `/update_weight_version` with `abort_all_requests`) and resumed by its caller on the new version.
 *
 * Every attempt reports the version it ran on ({@link GenerateResult.weightVersion}), taken from the protocol and not
 * only from SGLang's label, which is stamped when the answer leaves the server: an attempt cut by an update or an
 * `abort` pause reports the version it started on (and `cutByUpdate`), one that waited at SGLang's pause reports the
 * new one, and one that SGLang kept across a `retract` / `in_place` pause reports both (`weightVersions`); see
 * src/engine/WeightVersion.ts `attemptVersions`.
 */
import { Context, Data, Effect, Metric, type Stream } from "effect"
import * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import type * as Sampling from "../../src/engine/Sampling.ts"
import type * as WeightVersion from "../../src/engine/WeightVersion.ts"
import type * as WorkerEvents from "../../src/engine/WorkerEvents.ts"
import type * as PackedIds from "../../src/ids/PackedIds.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import type * as KvSnapshot from "./KvSnapshot.ts"

/** The sampling of one request (src/engine/Sampling.ts `RequestSampling`). */
export type SamplingParams = Sampling.RequestSampling

export interface GenerateRequest {
  /**
   * The prompt's ids; the generation core sends an `Int32Array` (no `number[]` of the whole prompt per request): a view
   * of the forest's kept inference prefix (`InferencePrefix.ids`), which stays as it is but is not to be written.
   */
  readonly inputIds: ReadonlyArray<number> | Int32Array
  /**
   * `inputIds` as the forest holds them (`InferencePrefix.chain`): packed parts that never change, as a chain (the
   * lineage's last node, or a tail's link after it). For an engine that keeps the prompt after the request (the
   * embedded engine's prefix cache), which then shares them instead of keeping a copy; SGLang ignores it. A thunk: only
   * an engine that keeps them pays for the node's lookup.
   */
  readonly inputChain?: (() => PackedIds.Chain) | undefined
  readonly sampling: SamplingParams
  /** Backend request id; fixed-length so SGLang's prefix matching on abort cannot hit another request. */
  readonly rid: string
  readonly returnLogprob: boolean
  /** Encoded media for multimodal prompts (SGLang `image_data`). */
  readonly imageData?: ReadonlyArray<string> | undefined
  /** Session id, for session-sticky routing to one worker. */
  readonly sessionId?: string | undefined
  /**
   * The conversation behind `inputIds`, for engines that script their output from it (the embedded engine's
   * `--embedded-policy`); SGLang ignores it. A thunk, because building it decodes the whole prompt: only an engine
   * that uses it pays for it.
   */
  readonly conversation?: (() => PolicyRequest) | undefined
  /**
   * A resumed attempt (partial rollout): how many trailing ids of `inputIds` this turn already generated in earlier
   * attempts. SGLang needs nothing of it; the embedded engine uses it so a scripted policy continues its text and stop
   * strings spanning the boundary are found.
   */
  readonly resumedTokens?: number | undefined
  /**
   * The request's Session is protected (partial rollout: aborted `--partial-rollout-max-aborted-count` times; a step's
   * close waits for it). SGLang sends it with `priority: 1` under priority scheduling, as a resumed attempt.
   */
  readonly protected?: boolean | undefined
  /**
   * The LoRA adapter to generate with, by the name it was loaded under ({@link AdapterPort.load}; SGLang's
   * `lora_path`); overrides a fixed `--sglang-lora-path`. Without one: the base model (or the fixed adapter).
   */
  readonly lora?: string | undefined
  /**
   * What program-aware KV admission reads of the attempt (layers/admission/AdmittedEngine.ts); absent: the attempt
   * is never held for KV room.
   */
  readonly admission?: AdmissionDemand | undefined
}

/** An attempt's KV demand and its Session's hooks for the wait (docs/sglang.md "KV scheduling"). */
export interface AdmissionDemand {
  /** The prompt's training tokens (images processor-expanded) with the turn's pending tokens. */
  readonly promptTokens: number
  /** A training Session's attempt (`--agentic-admission-scope train` admits only these). */
  readonly training: boolean
  /** Told how long the attempt waited for KV room (the Session's admission wait). */
  readonly waited?: ((ms: number) => void) | undefined
  /** Runs the wait with the Session's active-time budget stopped: waiting for KV room counts as lease wait. */
  readonly outsideBudget?: (<A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>) | undefined
}

/** What an embedded policy sees: `(request) => string | Promise<string>` (docs/flags.md `--embedded-policy`). */
export interface PolicyRequest {
  readonly sessionId: string
  /** 0-based index of this model request within the Session. */
  readonly turn: number
  readonly messages: ReadonlyArray<Canonical.Message>
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly chatTemplateKwargs: Canonical.TemplateKwargs
  /**
   * The rendered prompt text (chat template with the generation prompt). Decoded from the prompt ids when first read,
   * so a policy that only looks at `messages` does not pay for decoding the whole history on every request.
   */
  readonly promptText: string
  /**
   * The turn's sampling seed (`--rollout-seed` + the Session's position in its Group): a policy that draws its
   * randomness from it gives the same samples for the same seed.
   */
  readonly seed?: number | undefined
}

export type FinishReason =
  | { readonly type: "stop"; readonly matched?: number | string | undefined }
  | { readonly type: "length"; readonly length?: number | undefined }
  | { readonly type: "abort"; readonly message?: string | undefined }

export interface GenerateResult {
  readonly outputIds: ReadonlyArray<number>
  /** One logprob per output id (empty when `returnLogprob` was false). */
  readonly logprobs: ReadonlyArray<number>
  readonly finishReason: FinishReason
  readonly promptTokens: number
  readonly cachedTokens: number
  /** The weight version the attempt ran on (the latest, when it ran on more than one). */
  readonly weightVersion: string
  /**
   * Every version the attempt ran on, oldest first, when it ran on more than one: SGLang kept it across a
   * `retract` / `in_place` pause, its first tokens came from the old weights and the rest from the new.
   */
  readonly weightVersions?: ReadonlyArray<string> | undefined
  /**
   * The attempt was aborted by a weight update or a pause (`updateWeights`, `pauseGeneration`), not by a failure: its
   * request resumes after it, and the abort never counts toward giving up (src/generation/PendingOutput.ts `MAX_EMPTY_ABORTS`),
   * even when it produced no token (a request still in SGLang's waiting queue).
   */
  readonly cutByUpdate?: boolean | undefined
  /**
   * The attempt's worker died under it (refused or reset the connection; SGLang only): the attempt ended with no
   * token, an abort, and its caller resumes it from what it holds, on a live worker. Like `cutByUpdate`, it never
   * counts toward giving up.
   */
  readonly movedFrom?: MovedFrom | undefined
  /**
   * With `--use-rollout-routing-replay` (SGLang only): one row of `layers × topk` MoE expert ids per sequence position
   * the attempt went through (`promptTokens + outputIds.length − 1` rows; row `p`: the forward step that processed
   * token `p`), as SGLang returns it (src/engine/sglang/SglangWire.ts `decodeRoutedExperts`); absent otherwise.
   */
  readonly routedExperts?: ReadonlyArray<ReadonlyArray<number>> | undefined
  /** The LoRA adapter version the attempt generated with (versioned LoRA, docs/lora.md); absent without one. */
  readonly loraVersion?: string | undefined
}

/** One LoRA adapter to load: the name requests will use (`lora_path`), and the directory it is read from. */
export interface AdapterLoad {
  readonly name: string
  readonly path: string
  /**
   * Never evicted to make room for another (SGLang's `pinned`): a published version must stay loaded until it is
   * reclaimed, not be silently evicted past `--max-loaded-loras`.
   */
  readonly pinned: boolean
}

/**
 * LoRA adapters on the engine's workers (docs/lora.md): every worker loads and unloads by itself, since a router has
 * no LoRA routes.
 */
export interface AdapterPort {
  /** The workers an adapter must be on before a request may name it (with a router: its list, read now). */
  readonly workers: Effect.Effect<ReadonlyArray<string>>
  /** Load `adapter` on `worker`; a name already loaded there is refused (HTTP 400). */
  readonly load: (worker: string, adapter: AdapterLoad) => Effect.Effect<void, EngineError>
  /**
   * Unload `name` from `worker`, once the requests running with it have finished; a name the worker does not hold
   * counts as unloaded.
   */
  readonly unload: (worker: string, name: string) => Effect.Effect<void, EngineError>
}

/**
 * The answer to a request aborted while generation was paused for a weight push, before it ran: no tokens, an abort
 * finish reason, on `weightVersion`. Both engines answer a held request's abort with it.
 */
export const abortedWhilePaused = (request: GenerateRequest, weightVersion: string): GenerateResult => ({
  outputIds: [],
  logprobs: [],
  finishReason: { type: "abort", message: "Aborted while generation was paused" },
  promptTokens: request.inputIds.length,
  cachedTokens: 0,
  weightVersion
})

/** Where a moved attempt ran and why it moved. */
export interface MovedFrom {
  /** The worker that died under it. */
  readonly worker: string
  /** What failed (the connection error). */
  readonly cause: string
}

/** The answer of an attempt whose worker died under it: no tokens, an abort, `movedFrom` (see {@link GenerateResult}). */
export const movedAttempt = (request: GenerateRequest, weightVersion: string, from: MovedFrom): GenerateResult => ({
  outputIds: [],
  logprobs: [],
  finishReason: { type: "abort", message: `worker ${from.worker} died under the attempt (${from.cause}); it moves` },
  promptTokens: request.inputIds.length,
  cachedTokens: 0,
  weightVersion,
  movedFrom: from
})

/**
 * How `pauseGeneration` treats the generations in flight (SGLang's `/pause_generation` modes):
 * - `abort`: they end now with their partial output; their callers park them and resume them after the resume
 *   (a new attempt from prompt ++ partial ids): every attempt runs on one version;
 * - `retract`: SGLang moves them back to its waiting queue (KV freed) and continues them after the resume, its KV
 *   recomputed under the new weights;
 * - `in_place`: SGLang keeps them where they are (KV kept, computed under the old weights) and continues them.
 *
 * The embedded engine has no scheduler to keep requests in: it treats every mode as `abort`.
 */
export type PauseMode = WeightVersion.PauseMode

/**
 * What went wrong with the engine, as undici's error codes: a literal callers branch on.
 *
 * - `config`: the engine's options are wrong (no server given, both workers and a router).
 * - `unreachable`: no connection, or it broke (refused, reset, DNS); another attempt may succeed.
 * - `timeout`: no answer within the request timeout; the generation may still run, so it is not retried.
 * - `status`: the server answered a non-2xx status (`status`); 5xx and 408/409/425/429 are retryable.
 * - `protocol`: the HTTP exchange failed in another way (an undici error other than a broken connection).
 * - `bad-answer`: the answer was not JSON or not the expected shape.
 * - `refused`: the server answered but refused the call (`/update_weight_version` with `success: false`).
 * - `no-workers`: the router could not be asked for its workers, or lists none.
 * - `unhealthy`: a server failed its startup health check.
 * - `tokenizer-mismatch`: the server tokenizes differently from `--tokenizer`.
 * - `prompt-mismatch`: the server did not read the prompt that was sent (`prompt_tokens` differs: auto-truncation).
 * - `invalid-request`: the engine rejected the request's parameters (HTTP 400 from the embedded engine).
 * - `policy`: the embedded engine's `--embedded-policy` failed or returned no text.
 * - `lora`: the Session has no LoRA version to generate with (none published yet, or it was closed before it bound
 *   one; docs/lora.md).
 */
export type EngineErrorReason =
  | "config"
  | "unreachable"
  | "timeout"
  | "status"
  | "protocol"
  | "bad-answer"
  | "refused"
  | "no-workers"
  | "unhealthy"
  | "tokenizer-mismatch"
  | "prompt-mismatch"
  | "invalid-request"
  | "policy"
  | "lora"

/** HTTP statuses another attempt may get past (Relax retries these too: 408/409/425/429 and every 5xx). */
const retryableStatus = (status: number): boolean =>
  status >= 500 || status === 408 || status === 409 || status === 425 || status === 429

/**
 * The engine could not be reached or failed: `reason` says how, `detail` says what happened and what to do,
 * `status` is the HTTP status when the server answered one, `cause` the underlying error.
 *
 * **Details**
 * `retryable` derives from `reason` and `status`: a broken connection and a retryable status may succeed on another
 * attempt; everything else would fail the same way.
 */
export class EngineError extends Data.TaggedError("EngineError")<{
  readonly reason: EngineErrorReason
  readonly detail: string
  readonly url?: string | undefined
  readonly status?: number | undefined
  readonly cause?: unknown
  /** With `lora`: the version registry's refusal, lower-cased with underscores (`no_published_version`). */
  readonly code?: string | undefined
}> {
  override get message(): string {
    return this.detail
  }

  /** Whether another attempt may succeed. */
  get retryable(): boolean {
    return this.reason === "unreachable" ||
      (this.reason === "status" && this.status !== undefined && retryableStatus(this.status))
  }
}

export interface EngineShape {
  readonly generate: (
    request: GenerateRequest
  ) => Effect.Effect<GenerateResult, ContextLengthError.ContextLengthError | EngineError>
  /** Ask the engine to stop `rid`; its pending `generate` returns the partial output with an abort finish reason. */
  readonly abort: (rid: string) => Effect.Effect<void>
  /** The weight version new generations will report. */
  readonly weightVersion: Effect.Effect<string>
  /**
   * Advance the weight version (embedded: in-process; SGLang: `/update_weight_version` on every worker), aborting
   * every generation in flight first; returns the new version (default: the current one plus 1 when it is an
   * integer, else the number of updates).
   */
  readonly updateWeights: (version?: string) => Effect.Effect<string, EngineError>
  /**
   * Stop generating for a weight push (see {@link PauseMode}); new attempts wait until `resumeGeneration`. Returns
   * once the engine has stopped (with `abort`: once every aborted attempt has returned). Pausing a paused engine only
   * applies the mode to what runs.
   */
  readonly pauseGeneration: (mode: PauseMode) => Effect.Effect<void, EngineError>
  /**
   * Continue after `pauseGeneration`: generations from now on report `version` (default: SGLang's own label after
   * the trainer's push, `/get_weight_version`; embedded: the next integer). Returns the version now in effect.
   */
  readonly resumeGeneration: (version?: string) => Effect.Effect<string, EngineError>
  readonly health: Effect.Effect<void, EngineError>
  /**
   * The Session has ended: release what the engine keeps for it (SGLang with `--agentic-session-lifecycle`:
   * `/close_session` on every worker, so its radix-cache entries can go). Never fails: a failed release is counted.
   */
  readonly closeSession: (sessionId: string) => Effect.Effect<void>
  /** The engine's counters since the last call, for the step's metrics (e.g. `agentic_kv/session/close`); resets them. */
  readonly takeStepMetrics: Effect.Effect<Readonly<Record<string, number>>>
  /** LoRA adapters (docs/lora.md); absent on an engine that cannot load them. */
  readonly adapters?: AdapterPort | undefined
  /** The fleet's KV figures for admission (layers/engine/KvSnapshot.ts); absent: the engine reports none. */
  readonly kvSnapshot?: KvSnapshot.Read | undefined
  /**
   * The workers not serving now: down ones (skipped by updates, pauses and aborts) and ones back on other weights
   * than the fleet's (docs/sglang.md, "When a worker dies"); absent on an engine without workers (embedded).
   */
  readonly workers?: Effect.Effect<WorkerEvents.WorkerReport> | undefined
  /** Worker events from now on (`WorkerDown`, `WorkerNeedsWeights`, `WorkerBack`); absent without workers. */
  readonly workerEvents?: Stream.Stream<WorkerEvents.WorkerEvent> | undefined
}

/** Count an engine error of `operation` in `relax_agentic_engine_errors_total` (other failures pass uncounted). */
const counted = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tapError(effect, (error) =>
    error instanceof EngineError
      ? Metric.update(Instruments.engineErrors({ reason: error.reason, operation }), 1)
      : Effect.void)

/**
 * An engine whose every operation runs in its span (`<name>.generate`, ...) when a tracing backend is installed
 * (`StepSpan.step`), so a request's trace shows its attempts; its failed operations are counted by reason
 * (`relax_agentic_engine_errors_total`, docs/observability.md).
 */
export const withSpans = (name: string, engine: EngineShape): EngineShape => {
  // Built once: `generate` runs on every engine attempt.
  const generateSpan = `${name}.generate`
  const countGenerate = counted("generate")
  return {
    // `StepSpan.step` fused in: one `withFiber`, and the span's attributes made only when a tracer is installed.
    generate: (request) =>
      Effect.withFiber((fiber) => {
        const generated = countGenerate(engine.generate(request))
        return StepSpan.isTracing(fiber)
          ? Effect.withSpan(generated, generateSpan, { attributes: { rid: request.rid }, captureStackTrace: false })
          : generated
      }),
    abort: (rid) => engine.abort(rid).pipe(StepSpan.step(`${name}.abort`, { rid })),
    weightVersion: engine.weightVersion.pipe(StepSpan.step(`${name}.weightVersion`)),
    updateWeights: (version) =>
      engine.updateWeights(version).pipe(counted("updateWeights"), StepSpan.step(`${name}.updateWeights`)),
    pauseGeneration: (mode) =>
      engine.pauseGeneration(mode).pipe(counted("pauseGeneration"), StepSpan.step(`${name}.pauseGeneration`, { mode })),
    resumeGeneration: (version) =>
      engine.resumeGeneration(version).pipe(counted("resumeGeneration"), StepSpan.step(`${name}.resumeGeneration`)),
    health: engine.health.pipe(counted("health"), StepSpan.step(`${name}.health`)),
    closeSession: (sessionId) =>
      engine.closeSession(sessionId).pipe(StepSpan.step(`${name}.closeSession`, { sessionId })),
    takeStepMetrics: engine.takeStepMetrics.pipe(StepSpan.step(`${name}.takeStepMetrics`)),
    ...(engine.adapters === undefined ? {} : { adapters: adaptersWithSpans(name, engine.adapters) }),
    kvSnapshot: engine.kvSnapshot,
    ...(engine.workers === undefined ? {} : { workers: engine.workers }),
    ...(engine.workerEvents === undefined ? {} : { workerEvents: engine.workerEvents })
  }
}

const adaptersWithSpans = (name: string, adapters: AdapterPort): AdapterPort => ({
  workers: adapters.workers,
  load: (worker, adapter) =>
    adapters.load(worker, adapter).pipe(
      counted("loadAdapter"),
      StepSpan.step(`${name}.loadAdapter`, { worker, adapter: adapter.name })
    ),
  unload: (worker, adapter) =>
    adapters.unload(worker, adapter).pipe(
      counted("unloadAdapter"),
      StepSpan.step(`${name}.unloadAdapter`, { worker, adapter })
    )
})

/** An engine over workers (SGLang): its worker report and events are always there. */
export type WorkerFleetEngine = EngineShape & {
  readonly workers: Effect.Effect<WorkerEvents.WorkerReport>
  readonly workerEvents: Stream.Stream<WorkerEvents.WorkerEvent>
}

export class Engine extends Context.Service<Engine, EngineShape>()("relax-agentic/Engine") {}
