/**
 * A loopback SGLang server for tests, following SGLang's native contract as SGLang's own source implements it
 * (docs/sglang.md; ../shared/docs/reference/sglang-real-behaviour.md has every item with its SGLang function), backed
 * by the embedded model.
 *
 * **Details**
 * Each behaviour names the SGLang function it follows:
 * - `POST /generate` (`http_server.generate_request`): `input_ids` only; `sampling_params` decoded strictly (every
 *   field the client must send); an unknown sampling key is a 500, as `SamplingParams(**kwargs)` raises TypeError,
 *   which the handler does not catch. Validation messages as HTTP 400 `{"error":{"message":…}}`
 *   (`_create_error_response`); context checks with `_validate_one_request`'s wording; a rid still in flight is a
 *   400 "Duplicate request ID detected" (`TokenizerManager._init_req_state`).
 * - A scheduler (`Scheduler`): at most `maxRunningRequests` run (`--max-running-requests`), the rest wait in a
 *   waiting queue (ordered by `priority` with `enablePriorityScheduling`); an input at or above `maxReqInputLen` is a
 *   400 with `validate_input_length`'s wording, or is truncated with `allowAutoTruncate`.
 * - `POST /abort_request {rid | abort_all}` (`http_server.abort_request`): answers 200 at once, before any aborted
 *   answer leaves (`TokenizerManager.abort_request` only sends an `AbortReq` to the scheduler, fire-and-forget); the
 *   scheduler then aborts on its next turn (`Scheduler.abort_request`): prefix match; a waiting request answers
 *   `output_ids: []`, finish `abort` "Abort in waiting queue" and no `prompt_tokens` / `cached_tokens`
 *   (`TokenizerManager._handle_abort_req`); a running one answers its partial output with finish `abort`. An empty rid
 *   without `abort_all` is ignored (`TokenizerManager.abort_request`), and so is a request still waiting on the pause
 *   condition (the scheduler has not seen it).
 * - `weight_version` is stamped when the answer leaves (`_handle_batch_output`), so `/update_weight_version` with
 *   `abort_all_requests` (`http_server.update_weight_version`: sends the abort, relabels, answers 200 at once; the
 *   scheduler aborts after) labels the aborted partials with the new version.
 * - `answers` records, for every answer, the versions its tokens were really computed under (`ranOn`): what a client
 *   must report, whatever the label says.
 * - `POST /pause_generation {mode}` / `POST /continue_generation` (`TokenizerManager.pause_generation`): new requests
 *   wait; `abort` aborts every request; `retract` moves the running ones back to the waiting queue; `in_place` keeps
 *   them where they are. Nothing is scheduled until `continue_generation`.
 * - `POST /update_weights_from_disk {model_path, weight_version}` (the trainer's push): waits for the requests in flight
 *   unless generation is paused (the model update writer lock), then swaps the label with the weights.
 * - `GET /health`: 503 for the first `startingHealthChecks` calls (`health_generate` while the server starts).
 * - Idle keep-alive connections close after `keepAliveTimeoutMs` (5 s: uvicorn's `timeout_keep_alive=5` in
 *   `launch_server`), without a `Keep-Alive: timeout` hint, as uvicorn sends none.
 * - `apiKey`: every route but `/health*` needs `Authorization: Bearer <key>`, else 401 (`add_api_key_middleware`).
 * - `GET /get_server_info` (`max_running_requests`, `context_length`); `divergence` departs from SGLang on purpose
 *   (for the conformance probe's tests: no partial ids on abort, labels stamped at arrival).
 * - `POST /tokenize` with the `tokenize` option (404 without, as older SGLang), `GET /get_model_info`,
 *   `POST /close_session` (200 empty; `failCloseSession` answers 500).
 * - Router mode (`routeTo`, the SGLang Model Gateway): `GET /workers` (or only `GET /list_workers`), with `dpSize`
 *   each worker listed once per DP rank as `url@rank` (`BasicWorkerBuilder::dp_config`), workers added and removed at
 *   runtime (`POST /workers`, `addWorker` / `removeWorker`), a 429 beyond `maxConcurrentRequests`
 *   (`middleware/concurrency.rs`), and `/generate` proxied to the worker chosen by the `X-SMG-Routing-Key` header.
 * - LoRA adapters (`/load_lora_adapter`, `/unload_lora_adapter`, `lora_path` on `/generate`): test/support/FakeSglangLora.ts,
 *   `maxLoadedLoras`; a request's tokens come from its adapter (the embedded engine's, EmbeddedAdapters.ts).
 * - A KV pool (`kvPool`, test/support/KvPool.ts): running requests hold KV for their prompt and generated tokens, and
 *   are retracted and recomputed when it overflows (counted on `kv`); `GET /metrics` serves its
 *   `sglang:max_total_num_tokens`, `sglang:num_used_tokens` and `sglang:token_usage` (`enableMetrics`; else 404, as
 *   SGLang without `--enable-metrics`).
 * - Faults and latches for tests, with no sleeps: `failNext`, `dieOnNextGenerate`, `hold`/`release`,
 *   `stallNextGenerate`, `awaitGenerates(n)`, `awaitQueued(n)`; for a server running as its own process
 *   (fakeSglangProcess.ts), `GET /_test/await_running?n=N` answers once N requests run (not an SGLang route).
 */
import { Effect, Exit, Result, Schema, type Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as CounterHash from "../../src/engine/CounterHash.ts"
import * as Sampling from "../../src/engine/Sampling.ts"
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import * as FakeSglangLora from "./FakeSglangLora.ts"
import * as KvPool from "./KvPool.ts"

export interface FakeSglangOptions {
  /** The model behind `/generate` (an instant embedded engine). */
  readonly engine?: Engine.EngineShape | undefined
  /** Context window for SGLang's context checks (default 32768). */
  readonly contextLength?: number | undefined
  /** `--max-running-requests`: requests beyond it wait in the waiting queue (default: no limit). */
  readonly maxRunningRequests?: number | undefined
  /** The scheduler's `max_req_input_len` (bounded by the KV pool; default: the context window). */
  readonly maxReqInputLen?: number | undefined
  /** `--allow-auto-truncate`: inputs at or above `maxReqInputLen` are cut instead of refused. */
  readonly allowAutoTruncate?: boolean | undefined
  /** `--enable-priority-scheduling`: the waiting queue is ordered by `priority` (larger first). */
  readonly enablePriorityScheduling?: boolean | undefined
  /**
   * `--enable-return-routed-experts`: a request with `return_routed_experts` gets `meta_info.routed_experts`
   * (see {@link fakeRouting}); without it the field is never sent, as a server launched without the flag.
   */
  readonly enableReturnRoutedExperts?: boolean | undefined
  /** `/health` answers 503 this many times first (the server is starting). */
  readonly startingHealthChecks?: number | undefined
  /** Idle keep-alive connections close after this long (default 5000, uvicorn's `timeout_keep_alive`). */
  readonly keepAliveTimeoutMs?: number | undefined
  /** `--api-key`: routes but `/health*` need `Authorization: Bearer <key>`. */
  readonly apiKey?: string | undefined
  /** Router mode: list these workers and proxy `/generate` to them. */
  readonly routeTo?: ReadonlyArray<string> | undefined
  /** Router mode: answer 404 on `/workers` so clients fall back to `/list_workers`. */
  readonly listWorkersOnly?: boolean | undefined
  /** Router mode (`--dp-aware`): list every worker once per DP rank as `url@rank`. */
  readonly dpSize?: number | undefined
  /** Router mode (`--max-concurrent-requests`): generations beyond this many in flight answer 429. */
  readonly maxConcurrentRequests?: number | undefined
  /** `/close_session` answers HTTP 500. */
  readonly failCloseSession?: boolean | undefined
  /** The server's tokenizer behind `POST /tokenize`; without it `/tokenize` answers 404 (an older SGLang). */
  readonly tokenize?: ((text: string) => ReadonlyArray<number>) | undefined
  /** `model_path` of `GET /get_model_info` (default "/models/fake"). */
  readonly modelPath?: string | undefined
  /** `--max-loaded-loras` (default: no limit; see FakeSglangLora.ts). */
  readonly maxLoadedLoras?: number | undefined
  /** A KV pool the running requests share (test/support/KvPool.ts); without it a request's output leaves at once. */
  readonly kvPool?: KvPool.KvPoolOptions | undefined
  /** `--enable-metrics`: `GET /metrics` serves the KV gauges (of `kvPool`, else of an unbounded pool). */
  readonly enableMetrics?: boolean | undefined
  /** The port to listen on (default 0: any free port); a restarted worker takes its old one. */
  readonly port?: number | undefined
  /** Deliberate departures from SGLang, for the conformance probe's tests (see {@link Divergence}). */
  readonly divergence?: Divergence | undefined
}

/**
 * Ways a server can depart from SGLang as relax-agentic relies on it (`relax-agentic check --probe-engine` must report
 * each): a running request's abort answers no ids; answers are labelled with the version at the request's arrival,
 * not at answer time. (A missing `/tokenize`, missing `/metrics` gauges and a short keep-alive are the options
 * `tokenize`, `enableMetrics` and `keepAliveTimeoutMs`.)
 */
export interface Divergence {
  readonly noPartialIdsOnAbort?: boolean | undefined
  readonly labelVersionAtArrival?: boolean | undefined
}

/** What ended a request early: the route whose abort reached it, or its client going away. */
export type AbortCause =
  | "abort_request"
  | "pause_generation"
  | "update_weight_version"
  | "update_weights_from_disk"
  | "disconnect"

/** One `/generate` answer, with the truth a test checks the client against. */
export interface Answer {
  readonly rid: string
  readonly sessionId: string | undefined
  /** Finished normally, aborted while running (partial output), or aborted in the waiting queue (no output). */
  readonly outcome: "finished" | "aborted-running" | "aborted-waiting"
  readonly abortedBy: AbortCause | undefined
  /**
   * The weight versions its tokens were computed under, oldest first (two when kept across a `retract` / `in_place`
   * pause); for a request that never ran, the version when it arrived.
   */
  readonly ranOn: ReadonlyArray<string>
}

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly body: unknown
}

export interface FakeSglang {
  readonly url: string
  readonly requests: Array<RecordedRequest>
  /** rids received on `/abort_request` (`"*"` for `abort_all`). */
  readonly aborts: Array<string>
  /** session ids received on `/close_session`. */
  readonly closedSessions: Array<string>
  /** Every `/generate` answer the scheduler sent, in order (not the 4xx refusals before it). */
  readonly answers: Array<Answer>
  /** The next `n` `/generate` calls answer `status` with an SGLang error body. */
  readonly failNext: (n: number, status: number, message?: string) => void
  /** The next `/generate` call closes its connection after reading the request, and the server stops. */
  readonly dieOnNextGenerate: () => void
  /**
   * The next `/generate` request is accepted and keeps running while its connection breaks, as when a reset hits a
   * request SGLang has already taken (it notices the disconnect only seconds later): until it is aborted, a re-send of
   * its rid is a duplicate.
   */
  readonly breakNextGenerate: () => void
  /** Running requests answer only when aborted (with their first `tokens` tokens) or released (full output). */
  readonly hold: (tokens: number) => void
  readonly release: () => void
  /**
   * The next `/generate` request stays in transit (not yet at the tokenizer manager) until the returned function is
   * called: a request sent before a pause that reaches the server after it.
   */
  readonly stallNextGenerate: () => () => void
  /** Succeeds once `n` `/generate` requests have arrived (counting from the start). */
  readonly awaitGenerates: (n: number) => Effect.Effect<void>
  /** Succeeds once `n` requests wait in the scheduler's waiting queue. */
  readonly awaitQueued: (n: number) => Effect.Effect<void>
  readonly generateCount: () => number
  /** Requests in the waiting queue and running, now. */
  readonly queued: () => number
  readonly running: () => number
  /** The weight version answers are stamped with now. */
  readonly weightVersion: () => string
  /** Router mode: register / remove a worker at runtime (as `POST /workers`, `DELETE /workers/{id}`). */
  readonly addWorker: (url: string) => void
  readonly removeWorker: (url: string) => void
  /**
   * Router mode: the worker's health checks fail (or pass again): it stays listed with `is_healthy: false` and gets
   * no request (SMG without `--remove-unhealthy-workers`).
   */
  readonly setWorkerHealthy: (url: string, healthy: boolean) => void
  /** Connections the server accepted so far (keep-alive reuse shows as fewer connections than requests). */
  readonly connections: () => number
  /** LoRA adapters (FakeSglangLora.ts). */
  readonly lora: FakeSglangLora.FakeLora
  /** The KV pool (`kvPool`): its retractions, recomputed tokens and first-token times. */
  readonly kv: KvPool.KvPool | undefined
}

const StrictGenerateRequest = Schema.decodeUnknownExit(SglangWire.GenerateRequest, { onExcessProperty: "error" })
const samplingKeys = new Set(Object.keys(SglangWire.SamplingParams.fields))

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const sendJson = (res: ServerResponse, status: number, body: unknown): void => {
  if (res.writableEnded || res.destroyed) return
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

/** `_create_error_response`: a ValueError from `/generate` is `{"error":{"message":…}}` with HTTP 400. */
const sendError = (res: ServerResponse, status: number, message: string): void =>
  sendJson(res, status, { error: { message } })

/** FastAPI's request-validation answer (`{"object":"error",…}`), for bodies the dataclass cannot take. */
const sendValidationError = (res: ServerResponse, message: string): void =>
  sendJson(res, 400, { object: "error", message, type: "BadRequestError", param: null, code: 400 })

/** The fake MoE's expert ids at sequence position `position` holding `token`: 2 layers × top-1, from both. */
export const fakeRouting = (token: number, position: number): ReadonlyArray<number> => [token % 64, position % 64]

/**
 * `meta_info.routed_experts` as SGLang's `RoutedExpertsCapturer` returns it (`get_routed_experts`, sent through
 * `TokenizerManager` as `pybase64.b64encode` of the int32 array): one row per position of the sequence that went
 * through the model, `prompt + output − 1` (the last output token is never fed back).
 */
const routedExpertsText = (inputIds: ReadonlyArray<number>, outputIds: ReadonlyArray<number>): string => {
  const sequence = [...inputIds, ...outputIds]
  return SglangWire.encodeRoutedExperts(sequence.slice(0, -1).map((token, position) => fakeRouting(token, position)))
}

const toResponse = (
  rid: string,
  result: Engine.GenerateResult,
  returnLogprob: boolean,
  weightVersion: string,
  routedFor?: ReadonlyArray<number>
) => ({
  text: "",
  output_ids: result.outputIds,
  meta_info: {
    id: rid,
    finish_reason: SglangWire.fromFinishReason(result.finishReason),
    prompt_tokens: result.promptTokens,
    completion_tokens: result.outputIds.length,
    cached_tokens: result.cachedTokens,
    weight_version: weightVersion,
    e2e_latency: 0,
    ...(returnLogprob
      ? { output_token_logprobs: result.outputIds.map((id, i) => [result.logprobs[i] ?? 0, id, null]) }
      : {}),
    ...(routedFor === undefined ? {} : { routed_experts: routedExpertsText(routedFor, result.outputIds) })
  }
})

/** `TokenizerManager._handle_abort_req`: the answer of a request aborted in the waiting queue. */
const waitingQueueAbort = (rid: string, returnLogprob: boolean, weightVersion: string) => ({
  text: "",
  output_ids: [],
  meta_info: {
    id: rid,
    finish_reason: { type: "abort", message: "Abort in waiting queue" },
    weight_version: weightVersion,
    e2e_latency: 0,
    completion_tokens: 0,
    ...(returnLogprob ? { output_token_logprobs: [] } : {})
  }
})

/**
 * What the double asks `engine` for a `/generate` body (its `inputIds`, truncated or not, under `rid`): the sampling
 * fields as SGLang reads them, logprobs always, the body's adapter where the engine has adapters. A test that checks an
 * answer's tokens generates the same request again with it.
 */
export const engineRequest = (
  engine: Engine.EngineShape,
  body: SglangWire.GenerateRequest,
  inputIds: ReadonlyArray<number> = body.input_ids,
  rid: string = body.rid
): Engine.GenerateRequest => {
  const s = body.sampling_params
  return {
    inputIds,
    sampling: {
      maxNewTokens: s.max_new_tokens,
      temperature: s.temperature,
      topP: s.top_p,
      topK: s.top_k,
      stop: s.stop,
      stopTokenIds: s.stop_token_ids,
      seed: s.sampling_seed
    },
    rid,
    returnLogprob: true,
    ...(body.lora_path === undefined || engine.adapters === undefined ? {} : { lora: body.lora_path })
  }
}

/** A request the scheduler knows (`rid_to_state`). */
interface Req {
  readonly rid: string
  readonly body: SglangWire.GenerateRequest
  readonly inputIds: ReadonlyArray<number>
  readonly res: ServerResponse
  readonly arrival: number
  /** The version when it arrived, and those it ran under (one more for each continue after a kept pause). */
  readonly arrivalVersion: string
  readonly ranOn: Array<string>
  phase: "waiting" | "running" | "done"
  /** The model's whole output, once computed. */
  result: Engine.GenerateResult | undefined
  /** Held: answers only when aborted or released. */
  held: boolean
  /** Its connection broke; it runs on until aborted. */
  broken: boolean
  /** Aborted while the model was still computing it (by what): it answers its partial output once it has one. */
  aborted: AbortCause | undefined
  /** Its output is being computed by the model (a retracted one continues that computation when it runs again). */
  computing: boolean
}

/** Start a fake SGLang server on 127.0.0.1 (port 0), closed with the scope. */
export const make = (options: FakeSglangOptions): Effect.Effect<FakeSglang, never, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<RecordedRequest> = []
    const aborts: Array<string> = []
    const closedSessions: Array<string> = []
    const answers: Array<Answer> = []
    const failures: Array<{ readonly status: number; readonly message: string }> = []
    let die = false
    let breakNext = false
    let stallNext: Promise<void> | undefined
    let holdTokens: number | undefined
    let generates = 0
    let arrivals = 0
    let connections = 0
    const waiters: Array<{ readonly ready: () => boolean; readonly resume: () => void }> = []
    const lora = FakeSglangLora.make({
      maxLoadedLoras: options.maxLoadedLoras,
      router: options.routeTo !== undefined,
      // The model behind it generates with the adapter too (a shared engine may hold it already).
      onLoaded: (name, path) =>
        options.engine?.adapters === undefined ? Promise.resolve() : Effect.runPromise(
          Effect.ignore(options.engine.adapters.load("embedded", { name, path, pinned: false }))
        )
    })
    const contextLength = options.contextLength ?? 32768
    const maxRunning = options.maxRunningRequests ?? Number.POSITIVE_INFINITY
    const maxReqInputLen = options.maxReqInputLen ?? contextLength
    let healthChecksLeft = options.startingHealthChecks ?? 0
    let weightVersion = "default"
    let roundRobin = 0
    const workers = [...(options.routeTo ?? [])]
    const unhealthy = new Set<string>()
    let routerInFlight = 0
    // rid_to_state, the waiting queue and the running batch.
    const states = new Map<string, Req>()
    const kv = options.kvPool === undefined ? undefined : new KvPool.KvPool(options.kvPool)
    const waiting: Array<Req> = []
    const running = new Set<Req>()
    // is_pause and the requests waiting on is_pause_cond; the scheduler's own pause (retract / in_place).
    let paused = false
    let schedulerPaused = false
    let aborting = false
    const pauseWaiters: Array<() => void> = []
    // update_weights_* calls waiting for the writer lock (every generation finished).
    const drainWaiters: Array<() => void> = []

    const notify = () => {
      for (const w of [...waiters]) {
        if (w.ready()) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resume()
        }
      }
      if (states.size === 0) { for (const resume of drainWaiters.splice(0)) resume() }
    }
    const awaitCondition = (ready: () => boolean) =>
      Effect.callback<void>((resume) => {
        if (ready()) return resume(Effect.void)
        waiters.push({ ready, resume: () => resume(Effect.void) })
      })

    /** The input whose routing the answer carries: only when the server captures it and the request asks. */
    const routedInput = (req: Req): ReadonlyArray<number> | undefined =>
      options.enableReturnRoutedExperts === true && req.body.return_routed_experts === true ? req.inputIds : undefined

    /** The request runs (again) under the current weights. */
    const runsOn = (req: Req) => {
      if (req.ranOn[req.ranOn.length - 1] !== weightVersion) req.ranOn.push(weightVersion)
    }

    /** The answer leaves: stamped with the weight version of this moment (`_handle_batch_output`). */
    const finish = (
      req: Req,
      answer: (version: string) => unknown,
      outcome: Answer["outcome"] = "finished",
      abortedBy?: AbortCause
    ) => {
      if (req.phase === "done") return
      answers.push({
        rid: req.rid,
        sessionId: req.body.session_id,
        outcome,
        abortedBy,
        ranOn: req.ranOn.length === 0 ? [req.arrivalVersion] : [...req.ranOn]
      })
      req.phase = "done"
      lora.release(req.body.lora_path)
      kv?.remove(req.rid)
      running.delete(req)
      const at = waiting.indexOf(req)
      if (at >= 0) waiting.splice(at, 1)
      states.delete(req.rid)
      sendJson(
        req.res,
        200,
        answer(options.divergence?.labelVersionAtArrival === true ? req.arrivalVersion : weightVersion)
      )
      schedule()
      notify()
    }

    const partialOf = (result: Engine.GenerateResult, tokens: number): Engine.GenerateResult => ({
      ...result,
      outputIds: result.outputIds.slice(0, options.divergence?.noPartialIdsOnAbort === true ? 0 : tokens),
      logprobs: result.logprobs.slice(0, options.divergence?.noPartialIdsOnAbort === true ? 0 : tokens),
      finishReason: { type: "abort", message: "Aborted" }
    })

    /** Held running requests whose hold was released finish, unless the scheduler is paused (`in_place`). */
    function finishHeld() {
      if (holdTokens !== undefined || schedulerPaused) return
      for (const r of [...running]) {
        if (r.held && r.result !== undefined) {
          finish(r, (v) => toResponse(r.rid, r.result!, r.body.return_logprob, v, routedInput(r)))
        }
      }
    }

    /** Run one request in the model; held ones wait for an abort or `release`. */
    const start = (req: Req) => {
      req.phase = "running"
      running.add(req)
      runsOn(req)
      if (req.result !== undefined) {
        // A retracted request continues: it already has its output.
        if (holdTokens === undefined) {
          finish(req, (v) => toResponse(req.rid, req.result!, req.body.return_logprob, v, routedInput(req)))
        } else req.held = true
        return
      }
      // Retracted while the model computed it: it runs again and that computation ends it.
      if (req.computing) return
      req.computing = true
      const engine = options.engine!
      const request = engineRequest(engine, req.body, req.inputIds, req.rid)
      void Effect.runPromiseExit(engine.generate(request)).then((exit) => {
        req.computing = false
        if (req.phase === "done") return
        if (Exit.isFailure(exit)) {
          req.phase = "done"
          lora.release(req.body.lora_path)
          running.delete(req)
          states.delete(req.rid)
          sendError(req.res, 500, String(exit.cause))
          schedule()
          notify()
          return
        }
        req.result = exit.value
        if (req.aborted !== undefined) {
          const partial = partialOf(exit.value, holdTokens ?? exit.value.outputIds.length)
          finish(
            req,
            (v) => toResponse(req.rid, partial, req.body.return_logprob, v, routedInput(req)),
            "aborted-running",
            req.aborted
          )
          return
        }
        // Broken, or frozen by an `in_place` pause: it answers after `continue_generation` (or an abort).
        if (req.broken || (schedulerPaused && req.phase === "running")) {
          req.held = true
          return
        }
        if (holdTokens === undefined || exit.value.finishReason.type === "abort" || req.phase !== "running") {
          if (req.phase === "running") {
            const answer = () =>
              finish(req, (v) => toResponse(req.rid, exit.value, req.body.return_logprob, v, routedInput(req)))
            if (kv === undefined) answer()
            else kv.add(req.rid, req.inputIds.length, exit.value.outputIds.length, answer)
          }
          return
        }
        req.held = true
      })
    }

    /** `Scheduler.get_next_batch_to_run`: admit waiting requests while the running batch has room. */
    function schedule() {
      if (schedulerPaused || paused || aborting) return
      while (running.size < maxRunning && waiting.length > 0) {
        if (options.enablePriorityScheduling === true) {
          waiting.sort((a, b) => (b.body.priority ?? 0) - (a.body.priority ?? 0) || a.arrival - b.arrival)
        }
        start(waiting.shift()!)
      }
    }

    /**
     * `Scheduler.abort_request`: the waiting queue first (those leave with the zero-token answer), then the running
     * batch (each with its partial output). Nothing is admitted from the queue until the whole abort is done.
     */
    const abortMatching = (matches: (rid: string) => boolean, cause: AbortCause): Promise<void> => {
      const inModel: Array<Promise<void>> = []
      aborting = true
      const matching = [...states.values()].filter((req) => matches(req.rid))
      for (const req of matching) {
        if (req.phase === "waiting") {
          finish(req, (v) => waitingQueueAbort(req.rid, req.body.return_logprob, v), "aborted-waiting", cause)
        }
      }
      for (const req of matching) {
        if (req.phase !== "running") continue
        if (req.result !== undefined) {
          const partial = partialOf(
            req.result,
            req.held ? holdTokens ?? 0 : kv?.progress(req.rid) ?? req.result.outputIds.length
          )
          finish(
            req,
            (v) => toResponse(req.rid, partial, req.body.return_logprob, v, routedInput(req)),
            "aborted-running",
            cause
          )
        } else {
          req.aborted = cause
          // A generation still running in the model (an engine with latency) ends with its partial output.
          if (options.engine !== undefined) inModel.push(Effect.runPromise(options.engine.abort(req.rid)))
        }
      }
      aborting = false
      schedule()
      return Promise.all(inModel).then(() => undefined)
    }

    const route = async (req: IncomingMessage, res: ServerResponse, raw: string) => {
      if (options.maxConcurrentRequests !== undefined && routerInFlight >= options.maxConcurrentRequests) {
        return sendJson(res, 429, { error: { message: "Too many concurrent requests", type: "rate_limit" } })
      }
      const key = req.headers["x-smg-routing-key"]
      const routable = workers.filter((url) => !unhealthy.has(url))
      if (routable.length === 0) return sendJson(res, 503, { error: { message: "No available workers" } })
      const index = typeof key === "string"
        ? CounterHash.hashString(key) % routable.length
        : roundRobin++ % routable.length
      routerInFlight++
      try {
        const upstream = await fetch(`${routable[index]}/generate`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(typeof req.headers.authorization === "string" ? { authorization: req.headers.authorization } : {})
          },
          body: raw
        })
        res.writeHead(upstream.status, { "content-type": "application/json" })
        res.end(await upstream.text())
      } finally {
        routerInFlight--
      }
    }

    const generate = async (req: IncomingMessage, res: ServerResponse, raw: string, json: unknown) => {
      generates++
      notify()
      if (die) {
        die = false
        req.socket.destroy()
        server.close()
        server.closeAllConnections()
        return
      }
      const stalled = stallNext
      stallNext = undefined
      if (stalled !== undefined) await stalled
      const failure = failures.shift()
      if (failure !== undefined) return sendError(res, failure.status, failure.message)
      if (options.routeTo !== undefined) return route(req, res, raw)
      const record = json !== null && typeof json === "object" ? (json as Record<string, unknown>) : {}
      const sampling = record["sampling_params"]
      if (sampling !== null && typeof sampling === "object") {
        // `SamplingParams(**kwargs)` raises TypeError on an unknown key; `/generate` catches only ValueError: a 500.
        const unknown = Object.keys(sampling).find((key) => !samplingKeys.has(key))
        if (unknown !== undefined) {
          return sendJson(res, 500, {
            detail: `SamplingParams.__init__() got an unexpected keyword argument '${unknown}'`
          })
        }
      }
      const decoded = StrictGenerateRequest(json)
      if (Exit.isFailure(decoded)) {
        if (!("input_ids" in record) && !("text" in record)) {
          return sendError(res, 400, "Either text, input_ids or input_embeds should be provided.")
        }
        return sendValidationError(
          res,
          `invalid /generate body (this fake requires every sampling field): ${String(decoded.cause)}`
        )
      }
      const body = decoded.value
      // `generate_request` waits on `is_pause_cond` before the request reaches the tokenizer manager's state.
      if (paused) await new Promise<void>((resume) => pauseWaiters.push(resume))
      // `TokenizerManager._validate_one_request`.
      if (body.input_ids.length === 0) return sendError(res, 400, "input_ids cannot be empty")
      const s = body.sampling_params
      const verified = Sampling.verify({
        maxNewTokens: s.max_new_tokens,
        temperature: s.temperature,
        topP: s.top_p,
        topK: s.top_k
      })
      if (Result.isFailure(verified)) return sendError(res, 400, verified.failure)
      const fits = SglangWire.checkContextLength(body.input_ids.length, s.max_new_tokens, contextLength)
      if (Result.isFailure(fits)) return sendError(res, 400, fits.failure)
      if (options.engine === undefined) return sendError(res, 500, "this fake has no engine")
      // `TokenizerManager._init_req_state`: a rid still in `rid_to_state` is a ValueError.
      if (states.has(body.rid)) return sendError(res, 400, `Duplicate request ID detected: ${body.rid}`)
      // `validate_input_length` (managers/utils.py), in the scheduler's `handle_generate_request`.
      let inputIds: ReadonlyArray<number> = body.input_ids
      if (inputIds.length >= maxReqInputLen) {
        if (options.allowAutoTruncate !== true) {
          return sendError(res, 400, SglangWire.inputLengthMessage(inputIds.length, maxReqInputLen))
        }
        inputIds = inputIds.slice(0, maxReqInputLen)
      }
      const loraRefused = lora.acquire(body.lora_path)
      if (loraRefused !== undefined) return sendError(res, 400, loraRefused)
      const broken = breakNext
      breakNext = false
      const state: Req = {
        rid: body.rid,
        body,
        inputIds,
        res,
        arrival: arrivals++,
        arrivalVersion: weightVersion,
        ranOn: [],
        phase: "waiting",
        result: undefined,
        held: false,
        broken,
        aborted: undefined,
        computing: false
      }
      states.set(body.rid, state)
      if (broken) req.socket.destroy()
      else {
        // A client that goes away aborts its request (`generate_request` on disconnect).
        res.on("close", () => {
          if (state.phase !== "done") void abortMatching((rid) => rid === state.rid, "disconnect")
        })
      }
      waiting.push(state)
      schedule()
      notify()
    }

    /** `GET /_test/await_running?n=N`: the `awaitCondition` latch over HTTP, for a test in another process. */
    const awaitRunningRoute = async (req: IncomingMessage, res: ServerResponse) => {
      const n = Number(new URL(req.url ?? "/", "http://fake").searchParams.get("n") ?? "1")
      await Effect.runPromise(awaitCondition(() => running.size >= n))
      sendJson(res, 200, { running: running.size })
    }

    const authorized = (req: IncomingMessage, path: string): boolean =>
      options.apiKey === undefined || path.startsWith("/health") ||
      req.headers.authorization === `Bearer ${options.apiKey}`

    const listedWorkers = () =>
      workers.flatMap((url) =>
        options.dpSize === undefined ? [url] : Array.from({ length: options.dpSize }, (_, rank) => `${url}@${rank}`)
      )

    const handle = async (req: IncomingMessage, res: ServerResponse) => {
      const raw = await readBody(req)
      let json: unknown = undefined
      if (raw.length > 0) {
        try {
          json = JSON.parse(raw)
        } catch {
          return sendError(res, 400, "request body is not JSON")
        }
      }
      const path = (req.url ?? "/").split("?")[0] ?? "/"
      requests.push({ method: req.method ?? "GET", path, headers: req.headers, body: json })
      if (!authorized(req, path)) return sendJson(res, 401, { error: "Unauthorized" })
      if (lora.route(req.method, path, json, res)) return
      switch (`${req.method} ${path}`) {
        case "POST /generate":
        case "PUT /generate":
          return generate(req, res, raw, json)
        case "POST /abort_request": {
          const decoded = Schema.decodeUnknownExit(SglangWire.AbortRequest)(json)
          if (Exit.isFailure(decoded)) return sendValidationError(res, String(decoded.cause))
          const { rid, abort_all } = decoded.value
          aborts.push(abort_all === true ? "*" : rid)
          res.writeHead(200)
          res.end()
          // The scheduler handles the AbortReq on its next turn, after the 200 left. An empty rid without abort_all
          // would startswith-match every request: the tokenizer manager ignores it.
          if (rid.length > 0 || abort_all === true) {
            setImmediate(() => void abortMatching((r) => abort_all === true || r.startsWith(rid), "abort_request"))
          }
          return
        }
        case "POST /pause_generation": {
          const decoded = Schema.decodeUnknownExit(SglangWire.PauseGenerationRequest)(json ?? { mode: "abort" })
          if (Exit.isFailure(decoded)) return sendValidationError(res, String(decoded.cause))
          paused = true
          const mode = decoded.value.mode
          // `abort`: the call returns once no request holds the model lock (every aborted answer has left).
          if (mode === "abort") await abortMatching(() => true, "pause_generation")
          else {
            schedulerPaused = true
            if (mode === "retract") {
              // `Scheduler.pause_generation(retract)`: running requests go back to the waiting queue, KV freed.
              for (const r of [...running]) {
                running.delete(r)
                r.phase = "waiting"
                r.held = false
                waiting.unshift(r)
              }
            }
          }
          res.writeHead(200)
          return res.end()
        }
        case "POST /continue_generation": {
          paused = false
          schedulerPaused = false
          // `in_place`: the running batch continues, now under the weights pushed meanwhile.
          for (const r of running) runsOn(r)
          for (const resume of pauseWaiters.splice(0)) resume()
          finishHeld()
          schedule()
          res.writeHead(200)
          return res.end()
        }
        case "POST /update_weights_from_disk": {
          const decoded = Schema.decodeUnknownExit(SglangWire.UpdateWeightsFromDiskRequest)(json)
          if (Exit.isFailure(decoded)) return sendValidationError(res, String(decoded.cause))
          if (decoded.value.abort_all_requests === true) await abortMatching(() => true, "update_weights_from_disk")
          // Not paused: the writer lock waits for every generation in flight.
          if (!paused && states.size > 0) await new Promise<void>((resume) => drainWaiters.push(resume))
          const next = decoded.value.weight_version
          if (next !== undefined && next !== null) weightVersion = next
          return sendJson(res, 200, {
            success: true,
            message: "Succeeded to update model weights.",
            num_paused_requests: 0
          })
        }
        case "POST /close_session": {
          const decoded = Schema.decodeUnknownExit(SglangWire.CloseSessionRequest)(json)
          if (Exit.isFailure(decoded)) return sendValidationError(res, String(decoded.cause))
          closedSessions.push(decoded.value.session_id)
          if (options.failCloseSession === true) return sendError(res, 500, "close_session failed")
          res.writeHead(200)
          return res.end()
        }
        case "POST /tokenize": {
          if (options.tokenize === undefined) return sendJson(res, 404, { detail: "Not Found" })
          const decoded = Schema.decodeUnknownExit(SglangWire.TokenizeRequest)(json)
          if (Exit.isFailure(decoded)) return sendValidationError(res, String(decoded.cause))
          const tokens = options.tokenize(decoded.value.prompt)
          return sendJson(res, 200, { tokens, count: tokens.length, max_model_len: contextLength })
        }
        case "GET /get_server_info":
          return sendJson(res, 200, {
            max_running_requests: options.maxRunningRequests ?? null,
            context_length: contextLength,
            version: "fake"
          })
        case "GET /get_model_info": {
          const modelPath = options.modelPath ?? "/models/fake"
          return sendJson(res, 200, {
            model_path: modelPath,
            tokenizer_path: modelPath,
            is_generation: true,
            weight_version: weightVersion
          })
        }
        case "GET /health":
        case "GET /health_generate":
          if (healthChecksLeft > 0) {
            healthChecksLeft--
            res.writeHead(503)
            return res.end()
          }
          res.writeHead(200)
          return res.end()
        case "GET /metrics":
          if (options.enableMetrics !== true) return sendJson(res, 404, { detail: "Not Found" })
          res.writeHead(200, { "content-type": "text/plain; version=0.0.4" })
          return res.end(KvPool.metricsText(kv))
        case "GET /_test/await_running":
          return awaitRunningRoute(req, res)
        case "GET /get_weight_version":
          return sendJson(res, 200, { weight_version: weightVersion })
        case "POST /update_weight_version": {
          const decoded = Schema.decodeUnknownExit(SglangWire.UpdateWeightVersionRequest)(json)
          if (Exit.isFailure(decoded)) return sendValidationError(res, String(decoded.cause))
          // `http_server.update_weight_version`: sends the abort (fire-and-forget), relabels and answers at once; the
          // scheduler aborts on its next turn, so the aborted answers leave after the 200 and carry the new label.
          weightVersion = decoded.value.new_version
          sendJson(res, 200, {
            success: true,
            message: `Weight version updated to ${weightVersion}`,
            new_version: weightVersion
          })
          if (decoded.value.abort_all_requests) {
            setImmediate(() => void abortMatching(() => true, "update_weight_version"))
          }
          return
        }
        case "GET /workers":
          if (options.routeTo === undefined || options.listWorkersOnly === true) {
            return sendJson(res, 404, { detail: "Not Found" })
          }
          return sendJson(res, 200, {
            workers: listedWorkers().map((url, i) => ({
              id: `worker-${i}`,
              url,
              is_healthy: !unhealthy.has(url.replace(/@\d+$/, "")),
              status: "ready",
              load: 0
            })),
            total: listedWorkers().length
          })
        case "POST /workers": {
          if (options.routeTo === undefined) return sendJson(res, 404, { detail: "Not Found" })
          const url = json !== null && typeof json === "object" ? (json as Record<string, unknown>)["url"] : undefined
          if (typeof url !== "string") return sendValidationError(res, "url is required")
          workers.push(url)
          return sendJson(res, 202, { status: "accepted", url })
        }
        case "GET /list_workers":
          if (options.routeTo === undefined) return sendJson(res, 404, { detail: "Not Found" })
          return sendJson(res, 200, { urls: workers })
        default:
          return sendJson(res, 404, { detail: "Not Found" })
      }
    }

    const server = createServer((req, res) => {
      handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, 500, String(error))
      })
    })
    // uvicorn closes a connection idle for `timeout_keep_alive` (5 s) and sends no `Keep-Alive: timeout` hint: the
    // idle close is modelled here (node's own keepAliveTimeout would announce itself in a header).
    server.keepAliveTimeout = 0
    const idleMs = options.keepAliveTimeoutMs ?? 5000
    const idle = new WeakMap<Socket, { active: number; readonly arm: () => void; readonly disarm: () => void }>()
    server.on("connection", (socket: Socket) => {
      connections++
      let timer: NodeJS.Timeout | undefined
      const disarm = () => clearTimeout(timer)
      const arm = () => {
        disarm()
        timer = setTimeout(() => socket.destroy(), idleMs)
        timer.unref()
      }
      idle.set(socket, { active: 0, arm, disarm })
      arm()
      socket.on("close", disarm)
    })
    server.on("request", (request: IncomingMessage, response: ServerResponse) => {
      const state = idle.get(request.socket)
      if (state === undefined) return
      state.active++
      state.disarm()
      response.on("close", () => {
        if (--state.active === 0) state.arm()
      })
    })
    yield* Effect.acquireRelease(
      Effect.callback<void>((resume) => {
        server.listen(options.port ?? 0, "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.callback<void>((resume) => {
          for (const r of [...states.values()]) {
            if (r.result !== undefined) {
              finish(r, (v) => toResponse(r.rid, r.result!, r.body.return_logprob, v, routedInput(r)))
            }
          }
          for (const resume of pauseWaiters.splice(0)) resume()
          kv?.close()
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )
    const { port } = server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      requests,
      aborts,
      closedSessions,
      answers,
      failNext: (n, status, message = "Internal server error") => {
        for (let i = 0; i < n; i++) failures.push({ status, message })
      },
      dieOnNextGenerate: () => {
        die = true
      },
      breakNextGenerate: () => {
        breakNext = true
      },
      hold: (tokens) => {
        holdTokens = tokens
      },
      release: () => {
        holdTokens = undefined
        finishHeld()
      },
      stallNextGenerate: () => {
        let release = () => {}
        stallNext = new Promise<void>((resume) => {
          release = resume
        })
        return release
      },
      awaitGenerates: (n) => awaitCondition(() => generates >= n),
      awaitQueued: (n) => awaitCondition(() => waiting.length >= n),
      generateCount: () => generates,
      queued: () => waiting.length,
      running: () => running.size,
      weightVersion: () => weightVersion,
      addWorker: (url) => {
        workers.push(url)
      },
      removeWorker: (url) => {
        const at = workers.indexOf(url)
        if (at >= 0) workers.splice(at, 1)
      },
      connections: () => connections,
      lora: lora.state,
      kv,
      setWorkerHealthy: (url, healthy) => {
        if (healthy) unhealthy.delete(url)
        else unhealthy.add(url)
      }
    } satisfies FakeSglang
  })
