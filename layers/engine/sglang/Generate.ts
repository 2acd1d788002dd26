/**
 * One generation on SGLang: the `/generate` body, an attempt on one worker, and the retries around it.
 *
 * **Details**
 * - Every sampling field is sent explicitly (SGLang's server-side defaults differ between versions), with
 *   `skip_special_tokens: false`, `no_stop_trim: true`, `spaces_between_special_tokens: false`. `sampling_seed` is
 *   sent only with `samplingSeed` (`--sglang-enable-deterministic-inference`), as in Relax; `session_id` only with
 *   the session lifecycle.
 * - Connection errors and 5xx are retried with exponential backoff (on another worker when the first one is
 *   unreachable); 4xx are not. HTTP 400 context-length rejections become {@link ContextLengthError}.
 * - A request that is not retried after a transport error (a timeout) is aborted, and so is one whose fiber is
 *   interrupted: no generation is orphaned on the server.
 */
import { type Duration, Effect, Ref, Result, Schedule, Schema } from "effect"
import * as Wire from "../../../src/engine/Wire.ts"
import { ContextLengthError } from "../../../src/forest/errors.ts"
import type { EngineError, GenerateRequest, GenerateResult } from "../Engine.ts"
import * as Abort from "./Abort.ts"
import * as Http from "./Http.ts"
import type * as Workers from "./Workers.ts"

/** What is sent beyond the request itself. */
export interface Send {
  readonly samplingSeed: boolean
  readonly sessionId: boolean
}

/** The retry policy. */
export interface Retry {
  readonly retries: number
  readonly base: Duration.Input
}

/** The `/generate` body of a request. */
export const toWire = (request: GenerateRequest, send: Send): Wire.GenerateRequest => {
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
    ...(request.sessionId === undefined || !send.sessionId ? {} : { session_id: request.sessionId })
  }
}

/** The `/generate` answer's decoder, built once (every generation decodes one). */
const decodeGenerateResponse = Schema.decodeUnknownResult(Wire.GenerateResponse)

/** The generate function over `workers`; answers' `weight_version` labels update `version`. */
export const make = (
  http: Http.Http,
  workers: Workers.Workers,
  version: Ref.Ref<string>,
  send: Send,
  retry: Retry
): (request: GenerateRequest) => Effect.Effect<GenerateResult, ContextLengthError | EngineError> => {
  const attempt = (
    request: GenerateRequest,
    body: Uint8Array,
    tried: Set<Workers.Worker>
  ): Effect.Effect<GenerateResult, ContextLengthError | EngineError> =>
    Effect.gen(function*() {
      const worker = workers.pick(request.sessionId, tried)
      tried.add(worker)
      const headers: Record<string, string> = workers.router !== undefined && request.sessionId !== undefined
        ? { "X-SMG-Routing-Key": request.sessionId }
        : Http.noHeaders
      worker.inFlight++
      const answer = yield* worker.permits.withPermits(1)(http.request(worker.url, "/generate", "POST", body, headers)).pipe(
        Effect.ensuring(Effect.sync(() => worker.inFlight--)),
        Effect.tapError((error) =>
          error.retryable
            ? Effect.sync(() => {
              worker.down = true
            })
            // Not retried (a request timeout): the generation may still be running, so stop it rather than orphan it.
            : Abort.abort(http, workers, request.rid)
        )
      )
      worker.down = false
      if (answer.status === 400 && Wire.isContextLengthMessage(answer.body)) {
        return yield* new ContextLengthError({ limit: null, engineMessage: Http.errorMessage(answer.body) })
      }
      if (answer.status !== 200) return yield* Http.statusError(worker.url, "/generate", answer)
      const decoded = Http.decodeAnswer(decodeGenerateResponse, worker.url, "/generate", answer)
      if (Result.isFailure(decoded)) return yield* decoded.failure
      const response = decoded.success
      const meta = response.meta_info
      const entries = meta.output_token_logprobs
      const outputIds = entries !== undefined ? entries.map((e) => e[1]) : (response.output_ids ?? [])
      if (meta.weight_version !== undefined) yield* Ref.set(version, meta.weight_version)
      return {
        outputIds,
        logprobs: request.returnLogprob && entries !== undefined ? entries.map((e) => e[0]) : [],
        finishReason: Wire.toFinishReason(meta.finish_reason),
        promptTokens: meta.prompt_tokens,
        cachedTokens: meta.cached_tokens ?? 0,
        weightVersion: meta.weight_version ?? (yield* Ref.get(version))
      } satisfies GenerateResult
    })

  const backoff = Schedule.exponential(retry.base)

  return (request) => {
    // Encoded once for every attempt.
    const body = Wire.encodeGenerateRequest(toWire(request, send))
    const tried = new Set<Workers.Worker>()
    return Effect.suspend(() => {
      // Once every worker was tried, start over (a restarted worker may be back).
      if (tried.size >= Math.max(1, workers.all.length)) tried.clear()
      return attempt(request, body, tried)
    }).pipe(
      Effect.retry({
        schedule: backoff,
        times: retry.retries,
        while: (error: ContextLengthError | EngineError) => error._tag === "EngineError" && error.retryable
      }),
      Effect.onInterrupt(() => Abort.abort(http, workers, request.rid))
    )
  }
}
