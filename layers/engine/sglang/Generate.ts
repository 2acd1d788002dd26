/**
 * One generation on SGLang: the `/generate` body, an attempt on one worker, and the retries around it.
 *
 * **Details**
 * - Every sampling field is sent explicitly (SGLang's server-side defaults differ between versions), with
 *   `skip_special_tokens: false`, `no_stop_trim: true`, `spaces_between_special_tokens: false`. `sampling_seed` is
 *   sent only with `samplingSeed` (`--sglang-enable-deterministic-inference`), as in Relax; `session_id` only with
 *   the session lifecycle; `priority` (1 for a resumed attempt) with priority scheduling; `lora_path` when set;
 *   `return_routed_experts` with routing replay (its rows decoded, one per sequence position, a missing one an error).
 * - A worker that refuses or resets the connection is marked down (WorkerHealth.ts) and, when another worker serves,
 *   the attempt ends at once as a *moved* abort with no tokens (`movedFrom`): its caller resumes it from the Session's
 *   committed tokens and its pending output, under a new rid, on a live worker (what the dead worker generated never
 *   arrived, so nothing is committed twice). With no other worker (or through a router, which retries itself) the
 *   request is retried with exponential backoff, as after a 5xx; 4xx are not retried. HTTP 400 context-length
 *   rejections become {@link ContextLengthError}.
 * - A request that is not retried after a transport error (a timeout) is aborted, and so is one whose fiber is
 *   interrupted: no generation is orphaned on the server.
 */
import { Data, type Duration, Effect, Result, Schedule, Schema } from "effect"
import * as ContextLengthError from "../../../src/engine/ContextLengthError.ts"
import * as Rid from "../../../src/engine/Rid.ts"
import type * as PromptIdsJson from "../../../src/engine/sglang/PromptIdsJson.ts"
import * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import * as RetryAfter from "../../platform/Retry.ts"
import * as Engine from "../Engine.ts"
import * as Abort from "./Abort.ts"
import * as Http from "./Http.ts"
import type * as WeightUpdates from "./WeightUpdates.ts"
import type * as WorkerHealth from "./WorkerHealth.ts"
import type * as Workers from "./Workers.ts"

/** What is sent beyond the request itself. */
export interface Send {
  readonly samplingSeed: boolean
  readonly sessionId: boolean
  /** `priority`: 1 for a resumed attempt or a protected Session's, 0 for a new one (servers with priority scheduling). */
  readonly priority: boolean
  readonly loraPath: string | undefined
  /** `return_routed_experts` (`--use-rollout-routing-replay`): the MoE routing of every sequence position. */
  readonly routedExperts: boolean
}

/** The retry policy. */
export interface Retry {
  readonly retries: number
  readonly base: Duration.Input
}

/** The `/generate` body of a request. */
export const toWire = (request: Engine.GenerateRequest, send: Send): SglangWire.GenerateBody => {
  const s = request.sampling
  return {
    input_ids: request.inputIds,
    sampling_params: {
      max_new_tokens: s.maxNewTokens,
      temperature: s.temperature,
      top_p: s.topP,
      top_k: s.topK <= 0 ? -1 : s.topK,
      min_p: 0,
      stop: s.stop,
      stop_token_ids: s.stopTokenIds,
      skip_special_tokens: false,
      spaces_between_special_tokens: false,
      no_stop_trim: true,
      ...(s.seed === undefined || !send.samplingSeed ? {} : { sampling_seed: s.seed })
    },
    rid: request.rid,
    return_logprob: request.returnLogprob,
    ...(request.imageData === undefined || request.imageData.length === 0 ? {} : { image_data: request.imageData }),
    ...(request.sessionId === undefined || !send.sessionId ? {} : { session_id: request.sessionId }),
    ...(send.priority ? { priority: (request.resumedTokens ?? 0) > 0 || request.protected === true ? 1 : 0 } : {}),
    ...(request.lora !== undefined
      ? { lora_path: request.lora }
      : send.loraPath === undefined
      ? {}
      : { lora_path: send.loraPath }),
    ...(send.routedExperts ? { return_routed_experts: true } : {})
  }
}

/** The `/generate` answer's decoder, built once (every generation decodes one). */
const decodeGenerateResponse = Schema.decodeUnknownResult(SglangWire.GenerateResponse)

/** `TokenizerManager._init_req_state`: the rid is still in flight on the server (a re-send after a broken connection). */
const isDuplicateRid = (answer: Http.Answer): boolean =>
  answer.status === 400 && answer.body.includes("Duplicate request ID detected")

/** The sampling key an SGLang build does not know (`SamplingParams(**kwargs)` raised TypeError: HTTP 500). */
const unknownSamplingKey = (answer: Http.Answer): string | undefined =>
  answer.status === 500 ? /unexpected keyword argument '([^']+)'/.exec(answer.body)?.[1] : undefined

/** The generate function over `workers`; every attempt's version comes from `weights` (see WeightUpdates.ts). */
export const make = (
  http: Http.Http,
  workers: Workers.Workers,
  weights: WeightUpdates.WeightUpdates,
  send: Send,
  retry: Retry,
  idsText: PromptIdsJson.IdsTextCache,
  health: WorkerHealth.WorkerHealth
): (
  request: Engine.GenerateRequest
) => Effect.Effect<Engine.GenerateResult, ContextLengthError.ContextLengthError | Engine.EngineError> => {
  const attempt = (
    request: Engine.GenerateRequest,
    rid: string,
    body: Uint8Array,
    tried: Set<Workers.Worker>
  ): Effect.Effect<
    Engine.GenerateResult,
    ContextLengthError.ContextLengthError | Engine.EngineError | DuplicateRidError
  > =>
    Effect.gen(function*() {
      // Held here while generation is paused for a weight push; aborted while held, it ends with no tokens. Not
      // paused, the start is read at once (what `enter` would give), without its effect.
      const start = weights.enterIfOpen() ?? (yield* weights.enter(rid))
      if (start === undefined) return Engine.abortedWhilePaused(request, weights.version())
      const worker = workers.pick(request.sessionId, tried)
      tried.add(worker)
      const headers: Record<string, string> = workers.router !== undefined && request.sessionId !== undefined
        ? { "X-SMG-Routing-Key": request.sessionId }
        : Http.noHeaders
      worker.inFlight++
      const answer = yield* worker.permits.withPermits(1)(http.request(worker.url, "/generate", "POST", body, headers))
        .pipe(
          Effect.ensuring(Effect.sync(() => worker.inFlight--)),
          Effect.catch((error) => failed(worker, rid, error))
        )
      if (answer instanceof Moved) {
        health.moved()
        return Engine.movedAttempt(request, start.version, { worker: worker.url, cause: answer.detail })
      }
      // Every worker was down and this one answered: it is back.
      if (worker.down) yield* health.answered(worker.url)
      if (answer.status === 400 && SglangWire.isContextLengthMessage(answer.body)) {
        return yield* new ContextLengthError.ContextLengthError({
          limit: null,
          engineMessage: Http.errorMessage(answer.body)
        })
      }
      if (isDuplicateRid(answer)) {
        return yield* new DuplicateRidError({ error: Http.statusError(worker.url, "/generate", answer) })
      }
      const unknownKey = unknownSamplingKey(answer)
      if (unknownKey !== undefined) {
        // A TypeError repeats on every attempt: not retried.
        return yield* new Engine.EngineError({
          reason: "invalid-request",
          detail: `SGLang at ${worker.url} does not know the sampling parameter '${unknownKey}' (HTTP 500: ` +
            `${Http.errorMessage(answer.body)}). ` +
            (unknownKey === "sampling_seed"
              ? "Upgrade SGLang to a build with deterministic inference (v0.5.3 or later), or drop --sglang-enable-deterministic-inference"
              : "Upgrade SGLang"),
          url: worker.url,
          status: 500
        })
      }
      if (answer.status !== 200) return yield* Http.statusError(worker.url, "/generate", answer)
      const decoded = Http.decodeAnswer(decodeGenerateResponse, worker.url, "/generate", answer)
      if (Result.isFailure(decoded)) return yield* decoded.failure
      const response = decoded.success
      const meta = response.meta_info
      // With --allow-auto-truncate SGLang cuts a long input silently: the recorded trajectory would not be what the
      // model saw. (Multimodal inputs are expanded by SGLang's processor, so only text-only prompts are compared.)
      const sent = request.inputIds.length
      if (meta.prompt_tokens !== undefined && meta.prompt_tokens < sent && (request.imageData?.length ?? 0) === 0) {
        return yield* new Engine.EngineError({
          reason: "prompt-mismatch",
          detail: `SGLang at ${worker.url} read ${meta.prompt_tokens} of the ${sent} prompt tokens sent: the server ` +
            "truncated the input (launched with --allow-auto-truncate, and the prompt reached its maximum input " +
            "length). The turn is refused because its trajectory would not be what the model saw; launch SGLang " +
            "without --allow-auto-truncate (it then answers a context-length error the agent can handle)",
          url: worker.url
        })
      }
      const entries = meta.output_token_logprobs
      const outputIds = entries !== undefined ? entries.map((e) => e[1]) : (response.output_ids ?? [])
      const finishReason = SglangWire.toFinishReason(meta.finish_reason)
      const { versions, cutByUpdate } = weights.versionsOf(start, meta.weight_version, finishReason)
      const promptTokens = meta.prompt_tokens ?? sent
      let routedExperts: ReadonlyArray<ReadonlyArray<number>> | undefined
      if (send.routedExperts) {
        const routed = meta.routed_experts === undefined
          ? outputIds.length === 0
            ? Result.succeed([])
            : Result.fail(
              "the answer has no meta_info.routed_experts: launch SGLang with --enable-return-routed-experts (an MoE " +
                "model), or drop --use-rollout-routing-replay"
            )
          : SglangWire.decodeRoutedExperts(meta.routed_experts, promptTokens, outputIds.length)
        if (Result.isFailure(routed)) {
          return yield* new Engine.EngineError({
            reason: "bad-answer",
            detail: `SGLang at ${worker.url} /generate: ${routed.failure}`,
            url: worker.url
          })
        }
        routedExperts = routed.success
      }
      return {
        outputIds,
        logprobs: request.returnLogprob && entries !== undefined ? entries.map((e) => e[0]) : [],
        finishReason,
        // Absent on an abort that hit the request in SGLang's waiting queue: a zero-token abort of the whole input.
        promptTokens,
        cachedTokens: meta.cached_tokens ?? 0,
        weightVersion: versions[versions.length - 1]!,
        ...(versions.length > 1 ? { weightVersions: versions } : {}),
        ...(cutByUpdate ? { cutByUpdate } : {}),
        ...(routedExperts === undefined ? {} : { routedExperts })
      } satisfies Engine.GenerateResult
    })

  /**
   * A failed `/generate`: a worker that cannot be reached is marked down, and the attempt moves ({@link Moved}) when
   * another worker serves; a request that is not retried (a timeout) is aborted, since it may still run there.
   */
  const failed = (
    worker: Workers.Worker,
    rid: string,
    error: Engine.EngineError
  ): Effect.Effect<Moved, Engine.EngineError> => {
    if (error.reason === "unreachable" && workers.router === undefined) {
      return Effect.andThen(
        health.markDown(worker.url, error.message),
        Effect.suspend(() =>
          health.canMoveFrom(worker.url) ? Effect.succeed(new Moved(error.message)) : Effect.fail(error)
        )
      )
    }
    return error.retryable ? Effect.fail(error) : Effect.andThen(Abort.abort(http, workers, rid), Effect.fail(error))
  }

  const backoff = Schedule.exponential(retry.base)

  return (request) => {
    const tried = new Set<Workers.Worker>()
    // The rid in flight: a re-send that SGLang refuses as a duplicate goes out under a retry rid (Rid.retry).
    let rid = request.rid
    let resends = 0
    // The prompt's ids as text, written after the text of the Session's last prompt when this one extends it; the
    // text as written in this body is kept for the next prompt.
    const encoded = SglangWire.encodeGenerateBody(
      toWire(request, send),
      idsText.head(request.sessionId, request.inputIds)
    )
    if (encoded.idsText !== undefined) idsText.keep(request.sessionId, request.inputIds, encoded.idsText)
    else if (request.sessionId !== undefined) idsText.forget(request.sessionId)
    const text = encoded.idsText
    let body = encoded.body
    const send1 = (): Effect.Effect<
      Engine.GenerateResult,
      ContextLengthError.ContextLengthError | Engine.EngineError
    > =>
      Effect.suspend(() => {
        // Once every worker was tried, start over (a restarted worker may be back).
        if (tried.size >= Math.max(1, workers.all.length)) tried.clear()
        return attempt(request, rid, body, tried)
      }).pipe(
        Effect.catchTag(
          "DuplicateRidError",
          (duplicate) =>
            resends >= 9 ? Effect.fail(duplicate.error) : Effect.gen(function*() {
              // The first copy still runs on the server (its connection broke, the server has not noticed yet): stop
              // it, then send again under a fresh rid that an abort of the request's rid still matches.
              yield* Abort.abort(http, workers, rid)
              resends++
              rid = Rid.retry(request.rid, resends)
              body = SglangWire.encodeGenerateRequest({ ...toWire(request, send), rid }, text)
              return yield* send1()
            })
        )
      )
    // The retry's schedule is set up only once an attempt failed (RetryAfter.afterFailure: Effect.retry's attempts and times).
    return RetryAfter.afterFailure(send1(), {
      schedule: backoff,
      times: retry.retries,
      while: (error: ContextLengthError.ContextLengthError | Engine.EngineError) =>
        error._tag === "EngineError" && error.retryable
    }).pipe(
      Effect.onInterrupt(() => Abort.abort(http, workers, rid))
    )
  }
}

/** The attempt's worker could not be reached and another serves: the attempt moves (internal). */
class Moved {
  readonly detail: string
  constructor(detail: string) {
    this.detail = detail
  }
}

/** SGLang still holds the rid (internal: re-sent under a retry rid). */
class DuplicateRidError extends Data.TaggedError("DuplicateRidError")<{ readonly error: Engine.EngineError }> {}
