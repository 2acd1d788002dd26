/**
 * The production {@link Engine}: SGLang's native HTTP API (`POST /generate` with `input_ids`) over an undici `Agent`
 * (keep-alive pools per worker, connection limits, request timeouts).
 *
 * **Details**
 * - Workers are given directly (`workerUrls`, from `--sglang-url URL...`) or discovered from a router (`routerUrl`):
 *   `GET /workers` (`workers[].url`, healthy ones), falling back to `GET /list_workers` (`urls`).
 * - Session-sticky routing: a session's requests go to the same worker (prefix-cache hits). With a router the
 *   request goes to the router with `X-SMG-Routing-Key: <session id>` and the router picks the worker.
 * - Every sampling field is sent explicitly (SGLang's server-side defaults differ between versions), with
 *   `skip_special_tokens: false`, `no_stop_trim: true`, `spaces_between_special_tokens: false`. `sampling_seed` is
 *   sent only with `samplingSeed` (`--sglang-enable-deterministic-inference`), as in Relax.
 * - Session lifecycle (`sessionLifecycle`, `--agentic-session-lifecycle`): every request carries `session_id`, and
 *   `closeSession` posts `/close_session {session_id}` to every worker (2 seconds in all). A failed close is counted
 *   (`agentic_kv/session/close_failure`) and logged, never fatal: the server evicts the entries by LRU instead.
 * - Connection errors and 5xx are retried with exponential backoff (on another worker when the first one is
 *   unreachable); 4xx are not. HTTP 400 context-length rejections become {@link ContextLengthError}.
 * - `abort(rid)` posts `/abort_request {rid}` to every worker (SGLang matches rids by prefix: rids must be
 *   fixed-length, see src/engine/Rid.ts). Interrupting a `generate` aborts its rid the same way.
 * - `updateWeights(version)` posts `/update_weight_version {new_version, abort_all_requests: true}` to every worker:
 *   generations in flight end with their partial output (finish `abort`) and are resumed by their callers.
 * - At most `serverConcurrency` requests are in flight per worker (`--sglang-server-concurrency`, default 512).
 * - With `tokenizer`, startup compares every worker's `/tokenize` of a probe text with the gateway's tokenizer and
 *   refuses a mismatch (naming the served model from `/get_model_info`); a worker without `/tokenize` gets a warning.
 */
import { Duration, Effect, Layer, Option, Ref, Result, Schedule, Schema, type Scope, Semaphore } from "effect"
import { Agent } from "undici"
import * as WeightVersion from "../../../src/engine/WeightVersion.ts"
import * as Wire from "../../../src/engine/Wire.ts"
import type * as Settings from "../../../src/config/Settings.ts"
import { Tokenizer } from "../../tokenizer/Tokenizer.ts"
import {
  ContextLengthError,
  Engine,
  EngineError,
  type EngineShape,
  type GenerateRequest,
  type GenerateResult,
  withSpans
} from "../Engine.ts"

export interface SglangEngineOptions {
  /** SGLang worker base URLs (`--sglang-url URL...`). Exactly one of `workerUrls` and `routerUrl` is required. */
  readonly workerUrls?: ReadonlyArray<string> | undefined
  /** A router (SGLang Model Gateway) base URL; workers are discovered from it for abort and weight versions. */
  readonly routerUrl?: string | undefined
  /** In-flight requests per worker (default 512). */
  readonly serverConcurrency?: number | undefined
  /** Keep-alive connections per worker (default: `serverConcurrency`). */
  readonly connections?: number | undefined
  /** Time for a whole `/generate` answer (default 30 minutes). */
  readonly requestTimeout?: Duration.Input | undefined
  /** Time to open a connection (default 10 seconds). */
  readonly connectTimeout?: Duration.Input | undefined
  /** Retries after a connection error or 5xx (default 4). */
  readonly retries?: number | undefined
  /** First backoff delay, doubled on every retry (default 250 millis). */
  readonly retryBase?: Duration.Input | undefined
  /** Check `GET /health` on every worker at startup (default true). */
  readonly healthCheck?: boolean | undefined
  /** Send `sampling_seed` (servers launched with `--enable-deterministic-inference`; default false). */
  readonly samplingSeed?: boolean | undefined
  /** Send `session_id` and close SGLang sessions when a Session ends (default false). */
  readonly sessionLifecycle?: boolean | undefined
  /**
   * The gateway's tokenizer (`--tokenizer`): at startup a probe text is tokenized by it and by the server
   * (`POST /tokenize`, every worker), and different ids refuse the start. A server without `/tokenize` is not checked
   * (a warning says so).
   */
  readonly tokenizer?: { readonly source: string; readonly encode: (text: string) => ReadonlyArray<number> } | undefined
}

/** The first ids of a list, for messages. */
const preview = (ids: ReadonlyArray<number>): string => `[${ids.slice(0, 12).join(", ")}${ids.length > 12 ? ", ..." : ""}]`

/** Special tokens, digits, spaces and non-ASCII letters: a text on which different tokenizers differ. */
const tokenizerProbe = "<|im_start|>user\nrelax-agentic tokenizer check: 12345, héllo wörld 你好<|im_end|>\n"

/** The engine options the rollout flags describe (`--sglang-url`, `--sglang-router-url`, ...). */
export const optionsOf = (settings: Settings.RolloutSettings): SglangEngineOptions => ({
  workerUrls: settings.sglangUrls,
  routerUrl: settings.sglangRouterUrl,
  serverConcurrency: settings.sglangServerConcurrency,
  samplingSeed: settings.sglangEnableDeterministicInference,
  sessionLifecycle: settings.agenticSessionLifecycle
})

/** The whole `/close_session` fan-out of one Session gets this long (Relax's constant). */
const closeSessionTimeout = "2 seconds"

interface Worker {
  readonly url: string
  readonly permits: Semaphore.Semaphore
  /** Set after a connection error; a down worker gets requests only when every worker is down. */
  down: boolean
  inFlight: number
  /** Sessions currently pinned here, so new sessions spread over the workers. */
  sessions: number
}

interface HttpAnswer {
  readonly status: number
  readonly body: string
}

const connectionErrorCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT"
])

const errorCode = (error: unknown): string | undefined => {
  if (error === null || typeof error !== "object") return undefined
  if ("code" in error && typeof error.code === "string") return error.code
  if ("cause" in error) return errorCode(error.cause)
  return undefined
}

const describe = (error: unknown): string => {
  const code = errorCode(error)
  const text = error instanceof Error ? error.message : String(error)
  return code === undefined || text.includes(code) ? text : `${code}: ${text}`
}

const stickyLimit = 100_000

/** Shared header objects (never written to): most requests send no header of their own. */
const noHeaders: Record<string, string> = {}
const jsonHeaders: Record<string, string> = { "content-type": "application/json" }

const trimSlash = (url: string): string => url.replace(/\/+$/, "")

/** The human-readable message of an SGLang error body (JSON `message`/`detail`, or the raw text). */
const errorMessage = (body: string): string => {
  try {
    const parsed = Schema.decodeUnknownSync(Wire.ErrorBody)(JSON.parse(body))
    if (parsed.message !== undefined) return parsed.message
    if (typeof parsed.detail === "string") return parsed.detail
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.length > 500 ? `${body.slice(0, 500)}…` : body
}

const toWire = (
  request: GenerateRequest,
  send: { readonly samplingSeed: boolean; readonly sessionId: boolean }
): Wire.GenerateRequest => {
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

/** An answer's body parsed as JSON and decoded with `decode`, or the error naming the server and path. */
const decodeAnswer = <A>(
  decode: (input: unknown) => Result.Result<A, Schema.SchemaError>,
  url: string,
  path: string,
  answer: HttpAnswer
): Result.Result<A, EngineError> => {
  let json: unknown
  try {
    json = JSON.parse(answer.body)
  } catch {
    return Result.fail(new EngineError({ message: `SGLang at ${url}${path} answered non-JSON: ${errorMessage(answer.body)}`, url, retryable: false }))
  }
  const decoded = decode(json)
  return Result.isSuccess(decoded) ? Result.succeed(decoded.success) : Result.fail(
    new EngineError({ message: `SGLang at ${url}${path} answered an unexpected shape: ${decoded.failure.message}`, url, retryable: false })
  )
}

/** The `/generate` answer's decoder, built once (every generation decodes one). */
const decodeGenerateResponse = Schema.decodeUnknownResult(Wire.GenerateResponse)

/** Build the engine; fails with an `EngineError` naming the URL when SGLang is unreachable. */
export const make = (options: SglangEngineOptions): Effect.Effect<EngineShape, EngineError, Scope.Scope> =>
  Effect.gen(function*() {
    const hasWorkers = options.workerUrls !== undefined && options.workerUrls.length > 0
    if (hasWorkers === (options.routerUrl !== undefined)) {
      return yield* new EngineError({
        message: "SGLang engine: give either worker URLs (--sglang-url URL...) or a router URL, exactly one of the two",
        retryable: false
      })
    }
    const concurrency = options.serverConcurrency ?? 512
    const requestTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.requestTimeout ?? "30 minutes"))
    const connectTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.connectTimeout ?? "10 seconds"))
    const makeAgent = (connections: number) =>
      Effect.acquireRelease(
        Effect.sync(() =>
          new Agent({
            connections,
            keepAliveTimeout: 60_000,
            connect: { timeout: connectTimeoutMs },
            headersTimeout: requestTimeoutMs,
            bodyTimeout: requestTimeoutMs
          })
        ),
        (a) => Effect.promise(() => a.destroy())
      )
    // Control calls (abort, health, weight versions) get their own connections: with every data connection busy
    // on a long generation, an abort queued behind them would never be sent.
    const dataAgent = yield* makeAgent(options.connections ?? concurrency)
    const controlAgent = yield* makeAgent(8)

    /** A request; `body` is sent as JSON (a `Uint8Array` is sent as it is: JSON text already encoded). */
    const http = (
      url: string,
      path: string,
      method: "GET" | "POST",
      body?: unknown,
      headers: Record<string, string> = noHeaders,
      timeoutMs?: number
    ): Effect.Effect<HttpAnswer, EngineError> =>
      Effect.tryPromise({
        try: async (signal) => {
          const agent = path === "/generate" ? dataAgent : controlAgent
          const response = await agent.request({
            origin: url,
            path,
            method,
            signal,
            headers: body === undefined ? headers : headers === noHeaders ? jsonHeaders : { ...jsonHeaders, ...headers },
            body: body === undefined ? null : body instanceof Uint8Array ? body : JSON.stringify(body),
            ...(timeoutMs === undefined ? {} : { headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
          })
          return { status: response.statusCode, body: await response.body.text() }
        },
        catch: (error) => {
          const code = errorCode(error)
          const timedOut = code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT"
          return new EngineError({
            message: timedOut
              ? `SGLang at ${url}${path} did not answer within the request timeout (${describe(error)})`
              : `cannot reach SGLang at ${url}${path}: ${describe(error)}`,
            url,
            // A timed-out generation may still be running: retrying would run it twice.
            retryable: !timedOut && (code === undefined || connectionErrorCodes.has(code))
          })
        }
      })

    const decodeJson = <S extends Schema.Top & { readonly DecodingServices: never }>(
      schema: S,
      url: string,
      path: string,
      answer: HttpAnswer
    ): Effect.Effect<S["Type"], EngineError> =>
      Effect.suspend(() => Effect.fromResult(decodeAnswer(Schema.decodeUnknownResult(schema), url, path, answer)))

    const statusError = (url: string, path: string, answer: HttpAnswer): EngineError =>
      new EngineError({
        message: `SGLang at ${url}${path} answered HTTP ${answer.status}: ${errorMessage(answer.body)}`,
        url,
        status: answer.status,
        retryable: answer.status >= 500
      })

    const routerUrl = options.routerUrl === undefined ? undefined : trimSlash(options.routerUrl)

    const discover = (router: string): Effect.Effect<ReadonlyArray<string>, EngineError> =>
      Effect.gen(function*() {
        const workers = yield* http(router, "/workers", "GET").pipe(
          Effect.flatMap((answer) =>
            answer.status === 200
              ? decodeJson(Wire.WorkersResponse, router, "/workers", answer).pipe(
                Effect.map((r) => r.workers.filter((w) => w.is_healthy !== false).map((w) => w.url))
              )
              : Effect.fail(statusError(router, "/workers", answer))
          ),
          Effect.catch(() =>
            http(router, "/list_workers", "GET").pipe(
              Effect.flatMap((answer) =>
                answer.status === 200
                  ? decodeJson(Wire.ListWorkersResponse, router, "/list_workers", answer).pipe(Effect.map((r) => r.urls))
                  : Effect.fail(statusError(router, "/list_workers", answer))
              )
            )
          ),
          Effect.mapError((error) =>
            new EngineError({
              message: `Failed to query SGLang workers from the router at ${router} (GET /workers, then /list_workers): ` +
                error.message,
              url: router,
              retryable: false
            })
          )
        )
        if (workers.length === 0) {
          return yield* new EngineError({ message: `SGLang returned no workers: the router at ${router} lists none`, url: router, retryable: false })
        }
        return workers
      })

    const makeWorker = (url: string) => Effect.map(Semaphore.make(concurrency), (permits): Worker => ({ url, permits, down: false, inFlight: 0, sessions: 0 }))
    const workerUrls = routerUrl === undefined ? (options.workerUrls ?? []).map(trimSlash) : (yield* discover(routerUrl)).map(trimSlash)
    const workers = yield* Effect.forEach(workerUrls, makeWorker)
    // With a router, generation goes through it: one bounded "worker" standing for the router's whole fleet.
    const routerTarget = routerUrl === undefined
      ? undefined
      : yield* Effect.map(Semaphore.make(concurrency * workers.length), (permits): Worker => ({ url: routerUrl, permits, down: false, inFlight: 0, sessions: 0 }))

    const health = Effect.forEach(
      routerTarget === undefined ? workers.map((w) => w.url) : [routerTarget.url, ...workers.map((w) => w.url)],
      (url) =>
        http(url, "/health", "GET", undefined, noHeaders, 30_000).pipe(
          Effect.flatMap((answer) => answer.status === 200 ? Effect.void : Effect.fail(statusError(url, "/health", answer))),
          Effect.mapError((error) =>
            new EngineError({
              message: `SGLang is not healthy at ${url}: ${error.message}. Check that the server is running and that ` +
                `--sglang-url names it`,
              url,
              retryable: false
            })
          )
        ),
      { concurrency: "unbounded", discard: true }
    )
    if (options.healthCheck ?? true) yield* health

    /** Refuse a server whose tokenizer gives other ids than ours; a warning when the server has no `/tokenize`. */
    const checkTokenizer = (tokenizer: NonNullable<SglangEngineOptions["tokenizer"]>, url: string) =>
      Effect.gen(function*() {
        const probe: Wire.TokenizeRequest = { prompt: tokenizerProbe, add_special_tokens: false }
        const answer = yield* http(url, "/tokenize", "POST", probe, noHeaders, 10_000)
        const served = answer.status === 200
          ? yield* decodeJson(Wire.TokenizeResponse, url, "/tokenize", answer).pipe(Effect.option)
          : Option.none()
        if (Option.isNone(served)) {
          return yield* Effect.logWarning(
            `the SGLang server at ${url} did not answer /tokenize with token ids (HTTP ${answer.status}), so its ` +
              `tokenizer was not compared with --tokenizer ${tokenizer.source}; make sure --tokenizer is the served ` +
              "model's directory"
          )
        }
        const theirs = served.value.tokens
        const ours = tokenizer.encode(tokenizerProbe)
        if (theirs.length === ours.length && theirs.every((id, i) => id === ours[i])) return
        const info = yield* http(url, "/get_model_info", "GET", undefined, noHeaders, 10_000).pipe(
          Effect.flatMap((a) => decodeJson(Wire.ModelInfoResponse, url, "/get_model_info", a)),
          Effect.option
        )
        const model = Option.getOrUndefined(
          Option.flatMap(info, (i) => Option.fromNullishOr(i.tokenizer_path ?? i.model_path))
        )
        return yield* new EngineError({
          message: `the SGLang server at ${url} tokenizes differently from --tokenizer ${tokenizer.source}` +
            `${model === undefined ? "" : ` (the server serves ${model})`}: a probe text is ${preview(theirs)} there ` +
            `and ${preview(ours)} here. Give --tokenizer the served model's directory, or every token id sent would ` +
            "be wrong",
          url,
          retryable: false
        })
      })
    const tokenizer = options.tokenizer
    if (tokenizer !== undefined) yield* Effect.forEach(workers, (worker) => checkTokenizer(tokenizer, worker.url), { discard: true })

    const initialVersion = yield* http(workers[0]?.url ?? "", "/get_weight_version", "GET", undefined, noHeaders, 10_000).pipe(
      Effect.flatMap((answer) =>
        answer.status === 200
          ? decodeJson(Wire.WeightVersionResponse, workers[0]?.url ?? "", "/get_weight_version", answer)
          : Effect.fail(statusError(workers[0]?.url ?? "", "/get_weight_version", answer))
      ),
      Effect.map((r) => r.weight_version),
      Effect.orElseSucceed(() => "default")
    )
    const version = yield* Ref.make(initialVersion)
    let updates = 0
    const sticky = new Map<string, Worker>()

    const pick = (sessionId: string | undefined, exclude: ReadonlySet<Worker>): Worker => {
      if (routerTarget !== undefined) return routerTarget
      const known = sessionId === undefined ? undefined : sticky.get(sessionId)
      if (known !== undefined && !known.down && !exclude.has(known)) return known
      const up = workers.filter((w) => !w.down && !exclude.has(w))
      const candidates = up.length > 0 ? up : workers.filter((w) => !exclude.has(w))
      const pool = candidates.length > 0 ? candidates : workers
      let best = pool[0]!
      for (const w of pool) {
        if (w.inFlight < best.inFlight || (w.inFlight === best.inFlight && w.sessions < best.sessions)) best = w
      }
      if (sessionId !== undefined) {
        if (known !== undefined) known.sessions--
        // Bounded memory for long runs: forget the oldest pinning (it only costs a prefix-cache miss).
        if (sticky.size >= stickyLimit) {
          const oldest = sticky.entries().next().value
          if (oldest !== undefined) {
            sticky.delete(oldest[0])
            oldest[1].sessions--
          }
        }
        sticky.set(sessionId, best)
        best.sessions++
      }
      return best
    }

    const abort = (rid: string): Effect.Effect<void> =>
      Effect.forEach(
        workers,
        (w) =>
          http(w.url, "/abort_request", "POST", { rid } satisfies Wire.AbortRequest, noHeaders, 10_000).pipe(
            Effect.flatMap((answer) => answer.status === 200 ? Effect.void : Effect.fail(statusError(w.url, "/abort_request", answer))),
            Effect.catch((error) => Effect.logWarning(`abort of rid ${rid} failed: ${error.message}`))
          ),
        { concurrency: "unbounded", discard: true }
      )

    const attempt = (
      request: GenerateRequest,
      body: Uint8Array,
      tried: Set<Worker>
    ): Effect.Effect<GenerateResult, ContextLengthError | EngineError> =>
      Effect.gen(function*() {
        const worker = pick(request.sessionId, tried)
        tried.add(worker)
        const headers: Record<string, string> = routerTarget !== undefined && request.sessionId !== undefined
          ? { "X-SMG-Routing-Key": request.sessionId }
          : noHeaders
        worker.inFlight++
        const answer = yield* worker.permits.withPermits(1)(http(worker.url, "/generate", "POST", body, headers)).pipe(
          Effect.ensuring(Effect.sync(() => worker.inFlight--)),
          Effect.tapError((error) =>
            error.retryable
              ? Effect.sync(() => {
                worker.down = true
              })
              // Not retried (a request timeout): the generation may still be running, so stop it rather than orphan it.
              : abort(request.rid)
          )
        )
        worker.down = false
        if (answer.status === 400 && Wire.isContextLengthMessage(answer.body)) {
          return yield* new ContextLengthError({ limit: null, engineMessage: errorMessage(answer.body) })
        }
        if (answer.status !== 200) return yield* statusError(worker.url, "/generate", answer)
        const decoded = decodeAnswer(decodeGenerateResponse, worker.url, "/generate", answer)
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

    const send = { samplingSeed: options.samplingSeed ?? false, sessionId: options.sessionLifecycle ?? false }
    const closes = { close: 0, failure: 0 }

    const closeOn = (url: string, sessionId: string): Effect.Effect<void, EngineError> =>
      http(url, "/close_session", "POST", { session_id: sessionId } satisfies Wire.CloseSessionRequest).pipe(
        Effect.flatMap((answer) =>
          answer.status === 200 ? Effect.void : Effect.fail(statusError(url, "/close_session", answer))
        )
      )

    const closeSession = (sessionId: string): Effect.Effect<void> =>
      !send.sessionId ? Effect.void : Effect.gen(function*() {
        closes.close++
        const failed = yield* Effect.forEach(
          workers,
          (w) => closeOn(w.url, sessionId).pipe(Effect.as(0), Effect.catch(() => Effect.succeed(1))),
          { concurrency: "unbounded" }
        ).pipe(
          Effect.map((results) => results.reduce((a, b) => a + b, 0)),
          Effect.timeoutOrElse({ duration: closeSessionTimeout, orElse: () => Effect.succeed(workers.length) })
        )
        if (failed > 0) {
          closes.failure++
          yield* Effect.logWarning(
            `close_session: ${failed}/${workers.length} call(s) failed for session ${sessionId}; its cache entries ` +
              "fall back to LRU eviction"
          )
        }
      })

    const takeStepMetrics = Effect.sync((): Readonly<Record<string, number>> => {
      if (!send.sessionId) return {}
      const metrics = {
        "agentic_kv/session/lifecycle_enabled": 1,
        "agentic_kv/session/close": closes.close,
        "agentic_kv/session/close_failure": closes.failure
      }
      closes.close = 0
      closes.failure = 0
      return metrics
    })

    const backoff = Schedule.exponential(options.retryBase ?? "250 millis")
    const retries = options.retries ?? 4

    const generate = (request: GenerateRequest): Effect.Effect<GenerateResult, ContextLengthError | EngineError> => {
      // Encoded once for every attempt.
      const body = Wire.encodeGenerateRequest(toWire(request, send))
      const tried = new Set<Worker>()
      return Effect.suspend(() => {
        // Once every worker was tried, start over (a restarted worker may be back).
        if (tried.size >= Math.max(1, workers.length)) tried.clear()
        return attempt(request, body, tried)
      }).pipe(
        Effect.retry({
          schedule: backoff,
          times: retries,
          while: (error: ContextLengthError | EngineError) => error._tag === "EngineError" && error.retryable
        }),
        Effect.onInterrupt(() => abort(request.rid))
      )
    }

    const updateWeights = (next?: string): Effect.Effect<string, EngineError> =>
      Effect.gen(function*() {
        updates++
        const value = next ?? WeightVersion.next(yield* Ref.get(version), updates)
        yield* Effect.forEach(
          workers,
          (w) =>
            // abort_all_requests: a generation running across the update returns its partial output (finish `abort`)
            // and its caller resumes it on the new version, so every attempt runs on one version (reference §6.8).
            http(w.url, "/update_weight_version", "POST", { new_version: value, abort_all_requests: true } satisfies Wire.UpdateWeightVersionRequest).pipe(
              Effect.flatMap((answer) =>
                answer.status === 200
                  ? decodeJson(Wire.UpdateWeightVersionResponse, w.url, "/update_weight_version", answer)
                  : Effect.fail(statusError(w.url, "/update_weight_version", answer))
              ),
              Effect.flatMap((r) =>
                r.success ? Effect.void : Effect.fail(
                  new EngineError({
                    message: `SGLang at ${w.url} refused /update_weight_version: ${r.message ?? "no message"}`,
                    url: w.url,
                    retryable: false
                  })
                )
              )
            ),
          { concurrency: "unbounded", discard: true }
        )
        yield* Ref.set(version, value)
        return value
      })

    return withSpans("SglangEngine", {
      generate,
      abort,
      weightVersion: Ref.get(version),
      updateWeights,
      health,
      closeSession,
      takeStepMetrics
    })
  })

export class SglangEngine {
  /** The `Engine` service over SGLang; building it checks every worker's health. */
  static readonly layer = (options: SglangEngineOptions): Layer.Layer<Engine, EngineError> => Layer.effect(Engine, make(options))
  /** The same, checking at startup that the servers tokenize as the `Tokenizer` service does (see `tokenizer`). */
  static readonly layerCheckingTokenizer = (options: SglangEngineOptions): Layer.Layer<Engine, EngineError, Tokenizer> =>
    Layer.effect(
      Engine,
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer
        return yield* make({ ...options, tokenizer })
      })
    )
  static readonly make = make
  static readonly optionsOf = optionsOf
}
