/**
 * `relax-agentic check --probe-engine`: a live conformance run against the configured SGLang workers or router, one
 * row per behaviour the gateway relies on (src/engine/sglang/ProbeReport.ts; docs/sglang.md, "Check your SGLang").
 *
 * **Details**
 * - Generation rows go to the first worker directly (so an abort or a pause reaches the server running the request);
 *   at most `budget` short `/generate` requests in all; a row that would exceed it is skipped.
 * - The server is left as found: the weight version is restored wherever the probe changed it, a pause is always
 *   followed by `/continue_generation`, every request it started is aborted or finished, its session is closed.
 * - A request is "running" once it has had `settle` to start (a short wait: the probe talks to a live server).
 */
import { Duration, Effect, Exit, Fiber, Option, Result, Schema, type Scope } from "effect"
import * as Http_ from "node:http"
import * as PrometheusKv from "../../../src/admission/PrometheusKv.ts"
import * as Rid from "../../../src/engine/Rid.ts"
import * as ProbeReport from "../../../src/engine/sglang/ProbeReport.ts"
import * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import * as Engine from "../Engine.ts"
import * as Generate from "./Generate.ts"
import * as Http from "./Http.ts"
import * as Workers from "./Workers.ts"

export interface ProbeOptions {
  readonly workerUrls?: ReadonlyArray<string> | undefined
  readonly routerUrl?: string | undefined
  readonly apiKey?: string | undefined
  /** The gateway's tokenizer (`--tokenizer`): the prompt and the parity texts. */
  readonly tokenizer: { readonly source: string; readonly encode: (text: string) => ReadonlyArray<number> }
  /** `--agentic-session-lifecycle`: the `/close_session` row runs. */
  readonly sessionLifecycle: boolean
  /** `--sglang-lora-path`: the `lora_path` row runs. */
  readonly loraPath?: string | undefined
  /** KV admission is on: missing `/metrics` gauges break it. */
  readonly admission: boolean
  /** `/generate` requests in all (`--probe-budget`, default 40). */
  readonly budget: number
  /** How long a request runs before it is aborted or paused (default 300 ms). */
  readonly settle?: Duration.Input | undefined
  /** How long the idle keep-alive row waits for the server to close a connection (default 6 s). */
  readonly idleWait?: Duration.Input | undefined
}

const doc = ProbeReport.docSection

/** Texts on which tokenizers differ: special tokens, digits, spaces, non-ASCII letters, code. */
const parityTexts = [
  "<|im_start|>user\nWhat is 12345 + 678?<|im_end|>\n<|im_start|>assistant\n",
  "héllo wörld 你好 — ünïcödé\t tabs  and   spaces",
  "def f(x):\n    return x ** 2  # comment\n"
]

const decode = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S, answer: Http.Answer) =>
  Result.getOrUndefined(
    Result.try((): S["Type"] => Schema.decodeUnknownSync(schema)(JSON.parse(answer.body)))
  )

/** Run every row against the configured servers; never fails (a server that does not answer is a row's `seen`). */
export const run = (options: ProbeOptions): Effect.Effect<ProbeReport.Report, Engine.EngineError, Scope.Scope> =>
  Effect.gen(function*() {
    const http = yield* Http.make({
      connections: 64,
      requestTimeout: "60 seconds",
      connectTimeout: "5 seconds",
      apiKey: options.apiKey
    })
    const settle = options.settle ?? "300 millis"
    const router = options.routerUrl === undefined ? undefined : Http.trimSlash(options.routerUrl)
    const listed = router === undefined ? undefined : yield* Effect.result(routerList(http, router))
    const workers = router === undefined
      ? (options.workerUrls ?? []).map(Http.trimSlash)
      : listed !== undefined && Result.isSuccess(listed)
      ? Workers.origins(listed.success.urls)
      : []
    const first = workers[0]
    const rows: Array<ProbeReport.Row> = []
    let sent = 0
    let turn = 0
    const encoded = options.tokenizer.encode(
      "<|im_start|>user\nCount from one to one hundred.<|im_end|>\n" +
        "<|im_start|>assistant\n"
    )
    const prompt = encoded.length > 0 ? encoded : [1, 2, 3]

    const body = (maxNewTokens: number, extra: { readonly stopTokenIds?: ReadonlyArray<number> } = {}) => {
      const request: Engine.GenerateRequest = {
        inputIds: prompt,
        sampling: {
          maxNewTokens,
          temperature: 0,
          topP: 1,
          topK: -1,
          stop: [],
          stopTokenIds: extra.stopTokenIds ?? []
        },
        rid: Rid.forAttempt({ sessionId: "relax-probe", parent: "probe", turn: turn++, attempt: 0 }),
        returnLogprob: true,
        sessionId: "relax-probe-session"
      }
      return Generate.toWire(request, {
        samplingSeed: false,
        sessionId: options.sessionLifecycle,
        priority: false,
        loraPath: options.loraPath,
        routedExperts: false
      })
    }
    const left = () => options.budget - sent
    const generate = (url: string, wire: SglangWire.GenerateBody) =>
      Effect.suspend(() => {
        sent++
        return http.request(url, "/generate", "POST", wire)
      })
    const answerOf = (answer: Http.Answer) => decode(SglangWire.GenerateResponse, answer)
    const idsOf = (response: SglangWire.GenerateResponse | undefined): ReadonlyArray<number> =>
      response === undefined
        ? []
        : (response.meta_info.output_token_logprobs?.map((entry) => entry[1]) ?? response.output_ids ?? [])
    const describe = (answer: Exit.Exit<Http.Answer, Engine.EngineError>): string => {
      if (Exit.isFailure(answer)) {
        const error = Option.getOrUndefined(Exit.findErrorOption(answer))
        return error === undefined ? "no answer" : error.message
      }
      const response = answerOf(answer.value)
      if (answer.value.status !== 200 || response === undefined) {
        return `HTTP ${answer.value.status}: ${Http.errorMessage(answer.value.body)}`
      }
      const meta = response.meta_info
      return `HTTP 200, ${idsOf(response).length} ids, finish ${JSON.stringify(meta.finish_reason)}, ` +
        `prompt_tokens ${meta.prompt_tokens ?? "absent"}, weight_version ${meta.weight_version ?? "absent"}`
    }
    const control = (url: string, path: string, method: "GET" | "POST", payload?: unknown) =>
      Effect.exit(http.request(url, path, method, payload, Http.noHeaders, 10_000))
    const row = (r: Omit<ProbeReport.Row, "doc">) => rows.push({ ...r, doc })
    const skip = (name: string, relied: string, why: string) =>
      row({ name, relied, sent: "nothing", expected: "-", seen: why, verdict: "skipped" })
    const versionOf = (url: string) =>
      Effect.map(control(url, "/get_weight_version", "GET"), (exit) =>
        Exit.isSuccess(exit) && exit.value.status === 200
          ? decode(SglangWire.WeightVersionResponse, exit.value)?.weight_version
          : undefined)
    const relabel = (url: string, version: string) =>
      control(url, "/update_weight_version", "POST", { new_version: version, abort_all_requests: false })
    /** Start a long request, let it run (`settle` × `slower`), then `during`; the request's answer. */
    const whileRunning = <A>(url: string, during: Effect.Effect<A>, slower = 1) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(Effect.exit(generate(url, body(256))))
        yield* Effect.sleep(Duration.times(Duration.fromInputUnsafe(settle), slower))
        const done = yield* during
        return { done, answer: yield* Fiber.join(fiber) }
      })

    // 1. Health and server info.
    {
      const urls = router === undefined ? workers : [router, ...workers]
      const health = yield* Effect.forEach(
        urls,
        (url) => Effect.map(control(url, "/health", "GET"), (e) => [url, e] as const)
      )
      const bad = health.filter(([, e]) => Exit.isFailure(e) || e.value.status !== 200)
      const info = first === undefined ? undefined : yield* control(first, "/get_server_info", "GET")
      const infoSeen = info === undefined || Exit.isFailure(info) || info.value.status !== 200
        ? "no /get_server_info"
        : "/get_server_info answered"
      row({
        name: "health and server info",
        relied: "every worker answers GET /health 200 (the startup check); /get_server_info gives the running limit",
        sent: `GET /health to ${urls.length} server(s), GET /get_server_info`,
        expected: "200 from every server",
        seen: bad.length === 0
          ? `all 200; ${infoSeen}`
          : `${
            bad.map(([url, e]) => `${url}: ${Exit.isFailure(e) ? "unreachable" : `HTTP ${e.value.status}`}`).join(", ")
          }`,
        verdict: bad.length > 0 || urls.length === 0 ? "breaks" : "ok"
      })
      // A first worker that does not answer leaves nothing else to probe.
      if (bad.some(([url]) => url === first)) {
        return { targets: router === undefined ? workers : [router], requests: sent, budget: options.budget, rows }
      }
    }
    if (first === undefined) {
      return { targets: router === undefined ? [] : [router], requests: sent, budget: options.budget, rows }
    }

    // 2. Tokenizer parity.
    {
      const seen = yield* Effect.forEach(
        parityTexts,
        (text) =>
          Effect.map(control(first, "/tokenize", "POST", { prompt: text, add_special_tokens: false }), (exit) => {
            if (Exit.isFailure(exit) || exit.value.status !== 200) return undefined
            return decode(SglangWire.TokenizeResponse, exit.value)?.tokens
          })
      )
      const missing = seen.some((tokens) => tokens === undefined)
      const differing = parityTexts.filter((text, i) => {
        const theirs = seen[i]
        const ours = options.tokenizer.encode(text)
        return theirs !== undefined && (theirs.length !== ours.length || theirs.some((id, j) => id !== ours[j]))
      })
      row({
        name: "tokenizer parity",
        relied: `the server tokenizes as --tokenizer ${options.tokenizer.source} (every token id sent is the model's)`,
        sent: `POST /tokenize of ${parityTexts.length} texts (special tokens, non-ASCII, code)`,
        expected: "the same ids as --tokenizer for every text",
        seen: missing
          ? "no /tokenize (an older SGLang): the startup check is skipped with a warning"
          : differing.length === 0
          ? "the same ids for every text"
          : `different ids for ${differing.length} text(s), e.g. ${JSON.stringify(differing[0])}`,
        verdict: missing ? "differs-but-handled" : differing.length === 0 ? "ok" : "breaks"
      })
    }

    // 3. /generate with input_ids, logprobs and stop reasons.
    if (left() < 2) {
      skip("/generate: ids, logprobs, stop reasons", "token ids in and out", "request budget spent")
    } else {
      const length = yield* Effect.exit(generate(first, body(4)))
      const lengthAnswer = Exit.isSuccess(length) ? answerOf(length.value) : undefined
      const ids = idsOf(lengthAnswer)
      const meta = lengthAnswer?.meta_info
      const stopId = ids[1]
      const stopped = stopId === undefined
        ? undefined
        : yield* Effect.exit(generate(first, body(16, { stopTokenIds: [stopId] })))
      const stopAnswer = stopped !== undefined && Exit.isSuccess(stopped) ? answerOf(stopped.value) : undefined
      const good = meta !== undefined && ids.length === 4 && meta.output_token_logprobs?.length === 4 &&
        meta.finish_reason?.type === "length" && meta.prompt_tokens === prompt.length &&
        stopAnswer?.meta_info.finish_reason?.type === "stop" && idsOf(stopAnswer).at(-1) === stopId
      row({
        name: "/generate: ids, logprobs, stop reasons",
        relied: "input_ids in; output ids, one logprob each, prompt_tokens and finish_reason (length / stop) out",
        sent: `POST /generate ${prompt.length} input_ids, max_new_tokens 4, return_logprob; then stop_token_ids ` +
          `[${stopId ?? "?"}]`,
        expected: `4 ids and 4 logprobs, finish length, prompt_tokens ${prompt.length}; then finish stop on that id`,
        seen: `${describe(length)}; ${stopped === undefined ? "no stop request" : describe(stopped)}`,
        verdict: good ? "ok" : "breaks"
      })
    }

    // 4. Abort of a running request.
    if (left() < 1) {
      skip("abort of a running request", "partial ids come back", "request budget spent")
    } else {
      // A request aborted before its first token answers no ids on any server: let it run longer and try again.
      const abortRunning = (slower: number) =>
        Effect.gen(function*() {
          const rid = Rid.forAttempt({ sessionId: "relax-probe", parent: "probe", turn, attempt: 0 })
          const { answer } = yield* whileRunning(first, control(first, "/abort_request", "POST", { rid }), slower)
          const response = Exit.isSuccess(answer) ? answerOf(answer.value) : undefined
          return { answer, response, ids: idsOf(response).length }
        })
      let tried = yield* abortRunning(1)
      if (tried.ids === 0 && left() > 0) tried = yield* abortRunning(3)
      const { answer, response, ids } = tried
      const aborted = response?.meta_info.finish_reason?.type === "abort"
      row({
        name: "abort of a running request",
        relied: "an aborted request answers 200 with the ids generated so far (resumed from them, never lost)",
        sent: "POST /generate max_new_tokens 256, then POST /abort_request {rid} while it runs",
        expected: "HTTP 200, finish abort, 0 < ids < 256",
        seen: describe(answer),
        verdict: aborted && ids > 0 && ids < 256
          ? "ok"
          : aborted && ids === 0
          ? "differs-but-handled"
          : "breaks"
      })
    }

    // 5. Abort of a waiting request.
    {
      const info = yield* control(first, "/get_server_info", "GET")
      const limit = Exit.isSuccess(info) && info.value.status === 200
        ? decode(ServerInfo, info.value)?.max_running_requests ?? undefined
        : undefined
      if (limit === undefined || limit + 1 > left()) {
        skip(
          "abort of a waiting request",
          "a request aborted in SGLang's waiting queue answers 200 with no ids",
          limit === undefined
            ? "the server reports no max_running_requests"
            : `filling its ${limit} running slots needs ${limit + 1} requests; ${left()} left in --probe-budget`
        )
      } else {
        const rids = Array.from(
          { length: limit + 1 },
          (_, i) => Rid.forAttempt({ sessionId: "relax-probe", parent: "probe", turn: turn + i, attempt: 0 })
        )
        // The running slots first, then the one that must wait (sent last, so it arrives last).
        const fillers = yield* Effect.forEach(
          rids.slice(0, limit),
          () => Effect.forkChild(Effect.exit(generate(first, body(256))))
        )
        yield* Effect.sleep(settle)
        const fibers = [...fillers, yield* Effect.forkChild(Effect.exit(generate(first, body(256))))]
        yield* Effect.sleep(settle)
        yield* control(first, "/abort_request", "POST", { rid: rids[limit] })
        const last = yield* Fiber.join(fibers[limit]!)
        // Leave the server as found: the others are aborted too.
        yield* Effect.forEach(rids.slice(0, limit), (rid) => control(first, "/abort_request", "POST", { rid }))
        yield* Effect.forEach(fibers.slice(0, limit), Fiber.join)
        const response = Exit.isSuccess(last) ? answerOf(last.value) : undefined
        row({
          name: "abort of a waiting request",
          relied:
            "a request aborted in the waiting queue answers 200, finish abort, no ids (prompt_tokens may be absent)",
          sent: `${limit + 1} POST /generate (max_running_requests ${limit}), then POST /abort_request of the last`,
          expected: "HTTP 200, finish abort, 0 ids",
          seen: describe(last),
          verdict: response?.meta_info.finish_reason?.type === "abort" && idsOf(response).length === 0
            ? "ok"
            : response?.meta_info.finish_reason?.type === "abort"
            ? "differs-but-handled"
            : "breaks"
        })
      }
    }

    // 6. pause_generation in each mode, continue_generation, and the version labels.
    const original = (yield* versionOf(first)) ?? "default"
    // The labels of the requests kept across a pause that relabelled the server: SGLang stamps them at answer time.
    const keptLabels: Array<{ readonly mode: string; readonly label: string; readonly seen: string | undefined }> = []
    for (const mode of ["abort", "retract", "in_place"] as const) {
      const name = `pause_generation ${mode} + continue_generation`
      if (left() < 1) {
        skip(name, "the two-phase weight update", "request budget spent")
        continue
      }
      const label = `relax-probe-${mode}`
      const { done, answer } = yield* whileRunning(
        first,
        Effect.gen(function*() {
          const paused = yield* control(first, "/pause_generation", "POST", { mode })
          const relabelled = yield* relabel(first, label)
          const continued = yield* control(first, "/continue_generation", "POST", {})
          return { paused, relabelled, continued }
        })
      )
      yield* relabel(first, original)
      const status = (e: Exit.Exit<Http.Answer, Engine.EngineError>) => Exit.isSuccess(e) ? e.value.status : 0
      const response = Exit.isSuccess(answer) ? answerOf(answer.value) : undefined
      const finish = response?.meta_info.finish_reason?.type
      const version = response?.meta_info.weight_version
      const expectedFinish = mode === "abort" ? "abort" : "length"
      const pausedOk = status(done.paused) === 200 && status(done.continued) === 200
      if (mode !== "abort" && finish === expectedFinish) keptLabels.push({ mode, label, seen: version })
      row({
        name,
        relied: mode === "abort"
          ? "the pause aborts what runs (partial ids, HTTP 200) and answers once they left"
          : `SGLang keeps the running request across the pause (${mode}); it finishes after continue`,
        sent: `POST /generate max_new_tokens 256; while it runs /pause_generation {"mode":"${mode}"}, ` +
          `/update_weight_version ${label}, /continue_generation; then the label restored to ${original}`,
        expected: `pause and continue 200; the request ends ${expectedFinish}`,
        seen: `pause HTTP ${status(done.paused)}, continue HTTP ${status(done.continued)}; ${describe(answer)}`,
        verdict: !pausedOk
          ? status(done.paused) === 404 ? "differs-but-handled" : "breaks"
          : finish === expectedFinish
          ? "ok"
          : mode === "abort"
          ? "breaks"
          : "differs-but-handled"
      })
    }
    if (keptLabels.length === 0) {
      skip("weight_version labels", "versions of attempts kept across a pause", "no request was kept across a pause")
    } else {
      const stale = keptLabels.filter((kept) => kept.seen !== kept.label)
      row({
        name: "weight_version labels",
        relied: "SGLang stamps weight_version when the answer leaves (the gateway derives each attempt's versions " +
          "from the update protocol around that rule)",
        sent: "the answers of the requests kept across the retract / in_place pauses above",
        expected: keptLabels.map((kept) => `${kept.mode}: ${kept.label}`).join(", "),
        seen: keptLabels.map((kept) => `${kept.mode}: ${kept.seen ?? "absent"}`).join(", "),
        // The gateway records versions from the protocol, not the label: another labelling costs nothing, but it
        // is not what SGLang's source does, so it is reported.
        verdict: stale.length === 0 ? "ok" : "differs-but-handled"
      })
    }

    // 7. update_weight_version round trip.
    {
      const probeVersion = "relax-probe-version"
      const updated = yield* relabel(first, probeVersion)
      const read = yield* versionOf(first)
      const restored = yield* relabel(first, original)
      const back = yield* versionOf(first)
      const success = Exit.isSuccess(updated) && updated.value.status === 200 &&
        decode(SglangWire.UpdateWeightVersionResponse, updated.value)?.success === true
      row({
        name: "update_weight_version round trip",
        relied: "the one-call weight update relabels every worker; /get_weight_version reads the label back",
        sent: `POST /update_weight_version ${probeVersion}, GET /get_weight_version, then back to ${original}`,
        expected: `success, then ${probeVersion}, then ${original}`,
        seen: `${success ? "success" : "refused or missing"}, then ${read ?? "no version"}, then ${
          Exit.isSuccess(restored) ? back ?? "no version" : "not restored"
        }`,
        verdict: success && read === probeVersion && back === original
          ? "ok"
          : read === undefined && !success
          ? "differs-but-handled"
          : "breaks"
      })
    }

    // 8. /close_session.
    if (!options.sessionLifecycle) {
      skip("/close_session", "a finished Session's cache is released", "--agentic-session-lifecycle is not set")
    } else {
      const closed = yield* control(first, "/close_session", "POST", { session_id: "relax-probe-session" })
      row({
        name: "/close_session",
        relied: "with --agentic-session-lifecycle a finished Session's cache is released (a failure is only counted)",
        sent: "POST /close_session {\"session_id\":\"relax-probe-session\"}",
        expected: "HTTP 200",
        seen: Exit.isSuccess(closed) ? `HTTP ${closed.value.status}` : "no answer",
        verdict: Exit.isSuccess(closed) && closed.value.status === 200 ? "ok" : "differs-but-handled"
      })
    }

    // 9. /metrics gauges.
    {
      const metrics = yield* control(first, "/metrics", "GET")
      const figures = Exit.isSuccess(metrics) && metrics.value.status === 200
        ? PrometheusKv.parse(metrics.value.body)
        : undefined
      row({
        name: "/metrics KV gauges",
        relied: "KV admission reads sglang:max_total_num_tokens and sglang:num_used_tokens / token_usage",
        sent: "GET /metrics",
        expected: "HTTP 200 with sglang:max_total_num_tokens and its usage",
        seen: figures === undefined
          ? `${
            Exit.isSuccess(metrics) ? `HTTP ${metrics.value.status}` : "no answer"
          }, no KV gauges (launch with --enable-metrics)`
          : `capacity ${figures.maxTotalNumTokens} tokens, usage ${figures.usage}`,
        verdict: figures !== undefined ? "ok" : options.admission ? "breaks" : "differs-but-handled"
      })
    }

    // 10. LoRA.
    if (options.loraPath === undefined) {
      skip("LoRA lora_path", "requests name the adapter", "no LoRA flag is set")
    } else if (left() < 1) {
      skip("LoRA lora_path", "requests name the adapter", "request budget spent")
    } else {
      const answer = yield* Effect.exit(generate(first, body(2)))
      row({
        name: "LoRA lora_path",
        relied: `--sglang-lora-path ${options.loraPath}: every request names the loaded adapter`,
        sent: `POST /generate with lora_path ${options.loraPath}`,
        expected: "HTTP 200",
        seen: describe(answer),
        verdict: Exit.isSuccess(answer) && answer.value.status === 200 ? "ok" : "breaks"
      })
    }

    // 11. The router's worker list.
    if (router === undefined) {
      skip("router worker list", "control calls reach every worker", "no --sglang-router-url")
    } else {
      const urls = listed !== undefined && Result.isSuccess(listed) ? listed.success.urls : []
      const ranked = urls.filter((url) => /@\d+$/.test(url))
      row({
        name: "router worker list",
        relied: "GET /workers lists the workers aborts, weight versions, pauses and closes go to",
        sent: "GET /workers (else /list_workers)",
        expected: "at least one worker URL",
        seen: urls.length === 0
          ? listed !== undefined && Result.isFailure(listed) ? listed.failure.message : "no worker listed"
          : `${urls.length} listed${ranked.length > 0 ? `, ${ranked.length} with a dp-aware @rank (stripped)` : ""}`,
        verdict: urls.length === 0 ? "breaks" : ranked.length > 0 ? "differs-but-handled" : "ok"
      })
    }

    // 12. Idle keep-alive close.
    {
      const closedAfter = yield* idleClose(
        first,
        Duration.toMillis(Duration.fromInputUnsafe(options.idleWait ?? "6 seconds"))
      )
      const limit = Http.keepAliveTimeoutMs
      row({
        name: "idle keep-alive close",
        relied: `the gateway drops idle connections after ${limit / 1000} s, before the server closes them`,
        sent: "GET /health on a keep-alive connection, then idle",
        expected: `the server keeps the idle connection at least ${limit / 1000} s (uvicorn: 5 s)`,
        seen: closedAfter === undefined
          ? "not closed while the probe waited"
          : `closed after ${(closedAfter / 1000).toFixed(1)} s`,
        verdict: closedAfter !== undefined && closedAfter < limit ? "breaks" : "ok"
      })
    }

    return { targets: router === undefined ? workers : [router], requests: sent, budget: options.budget, rows }
  })

/** `max_running_requests` of `/get_server_info` (null when unlimited). */
const ServerInfo = Schema.Struct({ max_running_requests: Schema.optionalKey(Schema.NullOr(Schema.Int)) })

/** The router's list as it gives it (with `@rank`), or its failure. */
const routerList = (http: Http.Http, router: string) =>
  http.request(router, "/workers", "GET").pipe(
    Effect.flatMap(Http.ok(router, "/workers")),
    Effect.flatMap((answer) => Http.decodeJson(SglangWire.WorkersResponse, router, "/workers", answer)),
    Effect.map((r) => ({ urls: r.workers.map((w) => w.url) }))
  )

/** How long (ms) the server at `url` keeps an idle keep-alive connection, or `undefined` past `waitMs`. */
const idleClose = (url: string, waitMs: number): Effect.Effect<number | undefined> =>
  Effect.callback<number | undefined>((resume) => {
    const agent = new Http_.Agent({ keepAlive: true, maxSockets: 1 })
    let timer: NodeJS.Timeout | undefined
    const done = (value: number | undefined) => {
      clearTimeout(timer)
      agent.destroy()
      resume(Effect.succeed(value))
    }
    const request = Http_.get(`${url}/health`, { agent }, (response) => {
      response.resume()
      response.on("end", () => {
        const idleSince = Date.now()
        const socket = request.socket
        if (socket === null) return done(undefined)
        socket.once("close", () => done(Date.now() - idleSince))
        timer = setTimeout(() => done(undefined), waitMs)
      })
    })
    request.on("error", () => done(0))
    return Effect.sync(() => {
      clearTimeout(timer)
      agent.destroy()
    })
  })
