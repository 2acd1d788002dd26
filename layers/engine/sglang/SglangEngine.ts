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
 *
 * The parts, one concern per file (as undici splits its client): `Http.ts` (transport, error classification),
 * `Workers.ts` (router discovery, sticky routing), `StartupChecks.ts` (health, tokenizer, initial version),
 * `Generate.ts` (the body, one attempt, retries), `Abort.ts`, `WeightUpdates.ts`, `SessionClose.ts`, `Adapters.ts` (LoRA
 * adapters loaded and unloaded on every worker), `WorkerHealth.ts` (workers that die and come back).
 */
import { Duration, Effect, Layer, type Scope } from "effect"
import * as AdmissionOptions from "../../../src/admission/AdmissionOptions.ts"
import type * as Settings from "../../../src/config/Settings.ts"
import * as PromptIdsJson from "../../../src/engine/sglang/PromptIdsJson.ts"
import * as Tokenizer from "../../tokenizer/Tokenizer.ts"
import * as Engine from "../Engine.ts"
import * as Abort from "./Abort.ts"
import * as Adapters from "./Adapters.ts"
import * as Generate from "./Generate.ts"
import * as Http from "./Http.ts"
import * as KvMetrics from "./KvMetrics.ts"
import * as SessionClose from "./SessionClose.ts"
import * as StartupChecks from "./StartupChecks.ts"
import * as WeightUpdates from "./WeightUpdates.ts"
import * as WorkerHealth from "./WorkerHealth.ts"
import * as Workers from "./Workers.ts"

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
  /**
   * How long the startup health check waits for servers that are starting (503 or not accepting connections yet;
   * `--sglang-startup-timeout`, default 10 minutes: SGLang's own server-launch timeout), asking every
   * `healthInterval` (default 2 seconds).
   */
  readonly startupTimeout?: Duration.Input | undefined
  readonly healthInterval?: Duration.Input | undefined
  /** Send `priority`: 1 for resumed attempts, 0 for new ones (servers with `--enable-priority-scheduling`; default false). */
  readonly priorityScheduling?: boolean | undefined
  /** `lora_path` on every request (default: none). */
  readonly loraPath?: string | undefined
  /**
   * `return_routed_experts` on every request and every sequence position's MoE routing in the result
   * (`--use-rollout-routing-replay`; servers launched with `--enable-return-routed-experts`; default false).
   */
  readonly routedExperts?: boolean | undefined
  /** `Authorization: Bearer <apiKey>` on every request (`--sglang-api-key`, or the `SGLANG_API_KEY` environment variable). */
  readonly apiKey?: string | undefined
  /** Send `sampling_seed` (servers launched with `--enable-deterministic-inference`; default false). */
  readonly samplingSeed?: boolean | undefined
  /** Send `session_id` and close SGLang sessions when a Session ends (default false). */
  readonly sessionLifecycle?: boolean | undefined
  /**
   * The gateway's tokenizer (`--tokenizer`): at startup a probe text is tokenized by it and by the server
   * (`POST /tokenize`, every worker), and different ids refuse the start. A server without `/tokenize` is not checked
   * (a warning says so).
   */
  readonly tokenizer?: StartupChecks.TokenizerCheck | undefined
  /** How a worker that went down is probed (default: after 1 s, then twice as long each time, up to 30 s). */
  readonly probeBackoff?: WorkerHealth.ProbeBackoff | undefined
}

/** The engine options the rollout flags describe (`--sglang-url`, `--sglang-router-url`, ...). */
export const optionsOf = (settings: Settings.RolloutSettings): SglangEngineOptions => ({
  workerUrls: settings.sglangUrls,
  routerUrl: settings.sglangRouterUrl,
  serverConcurrency: settings.sglangServerConcurrency,
  ...(settings.sglangStartupTimeout === undefined
    ? {}
    : { startupTimeout: Duration.seconds(settings.sglangStartupTimeout) }),
  samplingSeed: settings.sglangEnableDeterministicInference,
  sessionLifecycle: settings.agenticSessionLifecycle,
  // The environment variable is the default so the key need not appear on a command line or in a config file.
  apiKey: settings.sglangApiKey ?? (process.env["SGLANG_API_KEY"] || undefined),
  priorityScheduling: settings.sglangPriorityScheduling,
  loraPath: settings.sglangLoraPath,
  routedExperts: settings.useRolloutRoutingReplay
})

/** Build the engine; fails with an `EngineError` naming the URL when SGLang is unreachable. */
export const make = (
  options: SglangEngineOptions
): Effect.Effect<Engine.WorkerFleetEngine, Engine.EngineError, Scope.Scope> =>
  Effect.gen(function*() {
    const hasWorkers = options.workerUrls !== undefined && options.workerUrls.length > 0
    if (hasWorkers === (options.routerUrl !== undefined)) {
      return yield* new Engine.EngineError({
        reason: "config",
        detail: "SGLang engine: give either worker URLs (--sglang-url URL...) or a router URL, exactly one of the two"
      })
    }
    const concurrency = options.serverConcurrency ?? 512
    const http = yield* Http.make({
      connections: options.connections ?? concurrency,
      requestTimeout: options.requestTimeout ?? "30 minutes",
      connectTimeout: options.connectTimeout ?? "10 seconds",
      apiKey: options.apiKey
    })
    const routerUrl = options.routerUrl === undefined ? undefined : Http.trimSlash(options.routerUrl)
    const startup: StartupChecks.HealthWait = {
      deadline: options.startupTimeout ?? StartupChecks.defaultStartupTimeout,
      interval: options.healthInterval ?? "2 seconds",
      flag: routerUrl === undefined ? "--sglang-url" : "--sglang-router-url"
    }
    // A router that is starting is waited for before it is asked for its workers.
    if (routerUrl !== undefined && (options.healthCheck ?? true)) {
      yield* StartupChecks.health(http, [routerUrl], startup)
    }
    const workers = yield* Workers.make(http, { workerUrls: options.workerUrls ?? [], routerUrl, concurrency })

    const healthUrls = workers.router === undefined
      ? workers.all.map((w) => w.url)
      : [workers.router.url, ...workers.all.map((w) => w.url)]
    // At startup the check waits for servers that are starting; later (`Engine.health`) it asks once.
    const healthNow = StartupChecks.health(http, healthUrls, { ...startup, deadline: "0 millis", interval: "0 millis" })
    if (options.healthCheck ?? true) yield* StartupChecks.health(http, healthUrls, startup)
    const tokenizer = options.tokenizer
    if (tokenizer !== undefined) {
      yield* Effect.forEach(workers.all, (worker) => StartupChecks.tokenizer(http, tokenizer, worker.url), {
        discard: true
      })
    }

    const initial = yield* StartupChecks.weightVersion(http, workers.all[0]?.url ?? "")
    // The fleet's version, for a worker that comes back: the weights' once they exist (each needs the other).
    let fleetVersion = () => initial
    const workerHealth = yield* WorkerHealth.make(http, workers, () => fleetVersion(), options.probeBackoff)
    const weights = yield* WeightUpdates.make(http, workers, initial, workerHealth)
    fleetVersion = weights.version
    const sessions = SessionClose.make(http, workers, options.sessionLifecycle ?? false)
    const idsText = new PromptIdsJson.IdsTextCache(idsTextBytes)
    const generate = Generate.make(
      http,
      workers,
      weights,
      {
        samplingSeed: options.samplingSeed ?? false,
        sessionId: options.sessionLifecycle ?? false,
        priority: options.priorityScheduling ?? false,
        loraPath: options.loraPath,
        routedExperts: options.routedExperts ?? false
      },
      { retries: options.retries ?? 4, base: options.retryBase ?? "250 millis" },
      idsText,
      workerHealth
    )

    const fleet = { workers: Effect.sync(workerHealth.report), workerEvents: workerHealth.events }
    const engine = Engine.withSpans("SglangEngine", {
      generate,
      abort: (rid) => Effect.andThen(weights.abortWaiting(rid), Abort.abort(http, workers, rid)),
      weightVersion: Effect.sync(weights.version),
      updateWeights: weights.update,
      pauseGeneration: weights.pause,
      resumeGeneration: weights.resume,
      health: healthNow,
      closeSession: (sessionId) =>
        Effect.suspend(() => {
          idsText.forget(sessionId)
          return sessions.close(sessionId)
        }),
      takeStepMetrics: Effect.map(
        sessions.takeStepMetrics,
        (closes) => ({ ...closes, ...workerHealth.takeStepMetrics() })
      ),
      ...fleet,
      adapters: Adapters.make(http, workers),
      kvSnapshot: KvMetrics.read(http, workers, AdmissionOptions.constants.metricsTimeoutMs)
    })
    return { ...engine, ...fleet }
  })

/**
 * The prompts' id texts kept for reuse (src/engine/sglang/PromptIdsJson.ts), with the ids they encode, in all; past it the least
 * recently used Sessions write their whole prompt again (docs/performance.md section 1).
 */
const idsTextBytes = 64 * 1024 * 1024

export class SglangEngine {
  /** The `Engine` service over SGLang; building it checks every worker's health. */
  static readonly layer = (options: SglangEngineOptions): Layer.Layer<Engine.Engine, Engine.EngineError> =>
    Layer.effect(Engine.Engine, make(options))
  /** The same, checking at startup that the servers tokenize as the `Tokenizer` service does (see `tokenizer`). */
  static readonly layerCheckingTokenizer = (
    options: SglangEngineOptions
  ): Layer.Layer<Engine.Engine, Engine.EngineError, Tokenizer.Tokenizer> =>
    Layer.effect(
      Engine.Engine,
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        return yield* make({ ...options, tokenizer })
      })
    )
  static readonly make = make
  static readonly optionsOf = optionsOf
}
