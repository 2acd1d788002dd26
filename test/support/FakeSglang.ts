/**
 * A loopback SGLang server for tests, following SGLang's native contract (docs/architecture.md, "SGLang's native API")
 * and backed by the embedded model.
 *
 * **Details**
 * - `POST /generate`: `input_ids` only; `sampling_params` is decoded strictly (every field the client must send,
 *   no unknown keys — SGLang raises on unknown sampling keys); SGLang's validation messages as HTTP 400
 *   `{"object":"error","message":…}`; context-length rejections with SGLang's wording.
 * - `POST /abort_request {rid}`: prefix match, 200 with an empty body; a held request answers its partial output
 *   with `finish_reason.type = "abort"`, and so does a request still generating in an engine with latency.
 *   `POST /update_weight_version` with `abort_all_requests` aborts every held request the same way before answering.
 * - A resumed request (`input_ids` = prompt ++ partial ids, fewer `max_new_tokens`, same `sampling_seed`) continues
 *   the aborted one exactly: the embedded model keys its draws on absolute positions.
 * - `POST /tokenize {prompt, add_special_tokens}` with the `tokenize` option (404 without, as older SGLang), and
 *   `GET /get_model_info`.
 * - `POST /close_session {session_id}`: recorded in `closedSessions`; 200 with an empty body, as SGLang answers (an
 *   unknown session is a no-op there too). `failCloseSession` answers 500 instead.
 * - Router mode (`routeTo`): `GET /workers` (or only `GET /list_workers`) and `/generate` proxied to the worker
 *   chosen by the `X-SMG-Routing-Key` header.
 * - Faults and latches for tests, with no sleeps: `failNext`, `dieOnNextGenerate`, `hold`/`release`,
 *   `awaitGenerates(n)` (resolves once n generate requests arrived).
 */
import { Effect, Exit, Result, Schema, type Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as Hash from "../../src/engine/Hash.ts"
import * as Sampling from "../../src/engine/Sampling.ts"
import * as Wire from "../../src/engine/Wire.ts"
import type { EngineShape, GenerateResult } from "../../layers/engine/Engine.ts"

export interface FakeSglangOptions {
  /** The model behind `/generate` (an instant embedded engine). */
  readonly engine?: EngineShape | undefined
  /** Context window for SGLang's context checks (default 32768). */
  readonly contextLength?: number | undefined
  /** Router mode: list these workers and proxy `/generate` to them. */
  readonly routeTo?: ReadonlyArray<string> | undefined
  /** Router mode: answer 404 on `/workers` so clients fall back to `/list_workers`. */
  readonly listWorkersOnly?: boolean | undefined
  /** `/close_session` answers HTTP 500. */
  readonly failCloseSession?: boolean | undefined
  /** The server's tokenizer behind `POST /tokenize`; without it `/tokenize` answers 404 (an older SGLang). */
  readonly tokenize?: ((text: string) => ReadonlyArray<number>) | undefined
  /** `model_path` of `GET /get_model_info` (default "/models/fake"). */
  readonly modelPath?: string | undefined
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
  /** rids received on `/abort_request`. */
  readonly aborts: Array<string>
  /** session ids received on `/close_session`. */
  readonly closedSessions: Array<string>
  /** The next `n` `/generate` calls answer `status` with an SGLang error body. */
  readonly failNext: (n: number, status: number, message?: string) => void
  /** The next `/generate` call closes its connection after reading the request, and the server stops. */
  readonly dieOnNextGenerate: () => void
  /** `/generate` answers only when aborted (with its first `tokens` tokens) or released (full output). */
  readonly hold: (tokens: number) => void
  readonly release: () => void
  /** Succeeds once `n` `/generate` requests have arrived (counting from the start). */
  readonly awaitGenerates: (n: number) => Effect.Effect<void>
  readonly generateCount: () => number
}

const StrictGenerateRequest = Schema.decodeUnknownExit(Wire.GenerateRequest, { onExcessProperty: "error" })

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const sendJson = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

const sendError = (res: ServerResponse, status: number, message: string): void =>
  sendJson(res, status, { object: "error", message, type: status === 400 ? "BadRequestError" : "InternalServerError", param: null, code: status })

const toResponse = (rid: string, result: GenerateResult, returnLogprob: boolean) => ({
  text: "",
  output_ids: result.outputIds,
  meta_info: {
    id: rid,
    finish_reason: Wire.fromFinishReason(result.finishReason),
    prompt_tokens: result.promptTokens,
    completion_tokens: result.outputIds.length,
    cached_tokens: result.cachedTokens,
    weight_version: result.weightVersion,
    e2e_latency: 0,
    ...(returnLogprob ? { output_token_logprobs: result.outputIds.map((id, i) => [result.logprobs[i] ?? 0, id, null]) } : {})
  }
})

interface Held {
  readonly rid: string
  readonly finish: (aborted: boolean) => void
}

/** Start a fake SGLang server on 127.0.0.1 (port 0), closed with the scope. */
export const make = (options: FakeSglangOptions): Effect.Effect<FakeSglang, never, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<RecordedRequest> = []
    const aborts: Array<string> = []
    const closedSessions: Array<string> = []
    const failures: Array<{ readonly status: number; readonly message: string }> = []
    let die = false
    let holdTokens: number | undefined
    const held: Array<Held> = []
    let generates = 0
    const waiters: Array<{ readonly n: number; readonly resume: () => void }> = []
    const contextLength = options.contextLength ?? 32768
    let weightVersion = "default"
    let roundRobin = 0

    const abortHeld = (matches: (h: Held) => boolean) => {
      for (const h of [...held]) {
        if (matches(h)) {
          held.splice(held.indexOf(h), 1)
          h.finish(true)
        }
      }
    }

    const notify = () => {
      for (const w of [...waiters]) {
        if (generates >= w.n) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resume()
        }
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
      const failure = failures.shift()
      if (failure !== undefined) return sendError(res, failure.status, failure.message)
      if (options.routeTo !== undefined) {
        const key = req.headers["x-smg-routing-key"]
        const index = typeof key === "string" ? Hash.hashString(key) % options.routeTo.length : roundRobin++ % options.routeTo.length
        const upstream = await fetch(`${options.routeTo[index]}/generate`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: raw
        })
        res.writeHead(upstream.status, { "content-type": "application/json" })
        res.end(await upstream.text())
        return
      }
      const decoded = StrictGenerateRequest(json)
      if (Exit.isFailure(decoded)) {
        const record = json !== null && typeof json === "object" ? (json as Record<string, unknown>) : {}
        if (!("input_ids" in record) && !("text" in record)) {
          return sendError(res, 400, "Either text, input_ids or input_embeds should be provided.")
        }
        return sendError(res, 400, `invalid /generate body (this fake requires every sampling field): ${String(decoded.cause)}`)
      }
      const body = decoded.value
      if (body.input_ids.length === 0) return sendError(res, 400, "input_ids cannot be empty")
      const s = body.sampling_params
      const verified = Sampling.verify({ maxNewTokens: s.max_new_tokens, temperature: s.temperature, topP: s.top_p, topK: s.top_k })
      if (Result.isFailure(verified)) return sendError(res, 400, verified.failure)
      const fits = Wire.checkContextLength(body.input_ids.length, s.max_new_tokens, contextLength)
      if (Result.isFailure(fits)) return sendError(res, 400, fits.failure)
      if (options.engine === undefined) return sendError(res, 500, "this fake has no engine")
      const exit = await Effect.runPromiseExit(options.engine.generate({
        inputIds: body.input_ids,
        sampling: {
          maxNewTokens: s.max_new_tokens,
          temperature: s.temperature,
          topP: s.top_p,
          topK: s.top_k,
          stop: s.stop,
          stopTokenIds: s.stop_token_ids,
          seed: s.sampling_seed
        },
        rid: body.rid,
        returnLogprob: true
      }))
      if (Exit.isFailure(exit)) return sendError(res, 500, String(exit.cause))
      const result = { ...exit.value, weightVersion }
      const tokens = holdTokens
      if (tokens === undefined) return sendJson(res, 200, toResponse(body.rid, result, body.return_logprob))
      held.push({
        rid: body.rid,
        finish: (aborted) => {
          const answer: GenerateResult = aborted
            ? {
              ...result,
              outputIds: result.outputIds.slice(0, tokens),
              logprobs: result.logprobs.slice(0, tokens),
              finishReason: { type: "abort", message: "Aborted" }
            }
            : result
          sendJson(res, 200, toResponse(body.rid, answer, body.return_logprob))
        }
      })
    }

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
      switch (`${req.method} ${path}`) {
        case "POST /generate":
        case "PUT /generate":
          return generate(req, res, raw, json)
        case "POST /abort_request": {
          const decoded = Schema.decodeUnknownExit(Wire.AbortRequest)(json)
          if (Exit.isFailure(decoded)) return sendError(res, 400, String(decoded.cause))
          const { rid, abort_all } = decoded.value
          aborts.push(rid)
          // SGLang matches by prefix; an empty rid without abort_all would match everything, so it is refused.
          if (rid.length > 0 || abort_all === true) abortHeld((h) => abort_all === true || h.rid.startsWith(rid))
          // A generation still running in the model (an engine with latency) ends with its partial output.
          if (rid.length > 0 && options.engine !== undefined) await Effect.runPromise(options.engine.abort(rid))
          res.writeHead(200)
          return res.end()
        }
        case "POST /close_session": {
          const decoded = Schema.decodeUnknownExit(Wire.CloseSessionRequest)(json)
          if (Exit.isFailure(decoded)) return sendError(res, 400, String(decoded.cause))
          closedSessions.push(decoded.value.session_id)
          if (options.failCloseSession === true) return sendError(res, 500, "close_session failed")
          res.writeHead(200)
          return res.end()
        }
        case "POST /tokenize": {
          if (options.tokenize === undefined) return sendJson(res, 404, { detail: "Not Found" })
          const decoded = Schema.decodeUnknownExit(Wire.TokenizeRequest)(json)
          if (Exit.isFailure(decoded)) return sendError(res, 400, String(decoded.cause))
          const tokens = options.tokenize(decoded.value.prompt)
          return sendJson(res, 200, { tokens, count: tokens.length, max_model_len: contextLength })
        }
        case "GET /get_model_info": {
          const modelPath = options.modelPath ?? "/models/fake"
          return sendJson(res, 200, { model_path: modelPath, tokenizer_path: modelPath, is_generation: true, weight_version: weightVersion })
        }
        case "GET /health":
        case "GET /health_generate":
          res.writeHead(200)
          return res.end()
        case "GET /get_weight_version":
          return sendJson(res, 200, { weight_version: weightVersion })
        case "POST /update_weight_version": {
          const decoded = Schema.decodeUnknownExit(Wire.UpdateWeightVersionRequest)(json)
          if (Exit.isFailure(decoded)) return sendError(res, 400, String(decoded.cause))
          weightVersion = decoded.value.new_version
          if (decoded.value.abort_all_requests) abortHeld(() => true)
          return sendJson(res, 200, { success: true, message: "Weight version updated", new_version: weightVersion })
        }
        case "GET /workers":
          if (options.routeTo === undefined || options.listWorkersOnly === true) return sendJson(res, 404, { detail: "Not Found" })
          return sendJson(res, 200, { workers: options.routeTo.map((url) => ({ url, is_healthy: true })), total: options.routeTo.length })
        case "GET /list_workers":
          if (options.routeTo === undefined) return sendJson(res, 404, { detail: "Not Found" })
          return sendJson(res, 200, { urls: options.routeTo })
        default:
          return sendJson(res, 404, { detail: "Not Found" })
      }
    }

    const server = createServer((req, res) => {
      handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, 500, String(error))
      })
    })
    yield* Effect.acquireRelease(
      Effect.callback<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.callback<void>((resume) => {
          for (const h of held.splice(0)) h.finish(false)
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
      failNext: (n, status, message = "Internal server error") => {
        for (let i = 0; i < n; i++) failures.push({ status, message })
      },
      dieOnNextGenerate: () => {
        die = true
      },
      hold: (tokens) => {
        holdTokens = tokens
      },
      release: () => {
        holdTokens = undefined
        for (const h of held.splice(0)) h.finish(false)
      },
      awaitGenerates: (n) =>
        Effect.callback<void>((resume) => {
          if (generates >= n) return resume(Effect.void)
          waiters.push({ n, resume: () => resume(Effect.void) })
        }),
      generateCount: () => generates
    } satisfies FakeSglang
  })
