/**
 * The SGLang client's transport: undici agents (a data pool for `/generate`, a control pool for everything else),
 * one request function, and the classification of what comes back.
 *
 * **Details**
 * - Control calls (abort, health, weight versions, session close) get their own connections: with every data
 *   connection busy on a long generation, an abort queued behind them would never be sent.
 * - A connection error is retryable; a timed-out request is not (the generation may still be running on the server,
 *   and retrying would run it twice). A non-2xx answer is an {@link statusError}, retryable when it is a 5xx.
 * - Idle connections are kept 4 seconds: SGLang's uvicorn closes a connection idle for 5 seconds
 *   (`timeout_keep_alive=5` in `launch_server`) without announcing it, and a request written onto a socket the server
 *   is closing fails with a reset (which marks a healthy worker down and moves its sticky Sessions).
 * - With `apiKey` (`--sglang-api-key`) every request carries `Authorization: Bearer <key>` (servers and gateways
 *   launched with `--api-key` answer 401 without it).
 * - A request is dispatched to its pool with a handler that collects the answer's bytes ({@link Collector}): no
 *   response stream, promise or abort signal per request, answers and errors as undici's `request` gives them
 *   (test/engine/Http.dispatch.test.ts compares the two).
 * - Error bodies: SGLang's `{"object":"error","message":…}`, FastAPI's `{"detail":…}`, or raw text (cut at 500
 *   characters) in messages.
 */
import { Duration, Effect, Result, Schema, type Scope } from "effect"
import { Agent, type Dispatcher, errors } from "undici"
import * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import * as Thrown from "../../../src/Thrown.ts"
import * as Engine from "../Engine.ts"

/** An HTTP answer: its status and its whole body as text. */
export interface Answer {
  readonly status: number
  readonly body: string
}

/** The transport's limits (documented defaults in `SglangEngineOptions`). */
export interface Options {
  /** Keep-alive connections per origin on the data pool. */
  readonly connections: number
  /** Time for a whole answer (headers and body), unless a call gives its own. */
  readonly requestTimeout: Duration.Input
  /** Time to open a connection. */
  readonly connectTimeout: Duration.Input
  /** Sent as `Authorization: Bearer <apiKey>` on every request. */
  readonly apiKey?: string | undefined
}

/** Idle keep-alive time: below SGLang's 5 s (uvicorn `timeout_keep_alive`), so the client never reuses a closing socket. */
export const keepAliveTimeoutMs = 4_000

/** The transport: one request function over the two pools. */
export interface Http {
  /**
   * A request; `body` is sent as JSON (a `Uint8Array` is sent as it is: JSON text already encoded). `/generate` goes
   * over the data pool, every other path over the control pool.
   */
  readonly request: (
    url: string,
    path: string,
    method: "GET" | "POST",
    body?: unknown,
    headers?: Record<string, string>,
    timeoutMs?: number
  ) => Effect.Effect<Answer, Engine.EngineError>
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
  const text = Thrown.messageOf(error)
  return code === undefined || text.includes(code) ? text : `${code}: ${text}`
}

/** Shared header objects (never written to): most requests send no header of their own. */
export const noHeaders: Record<string, string> = {}

/** A base URL without its trailing slashes. */
export const trimSlash = (url: string): string => url.replace(/\/+$/, "")

/** The human-readable message of an SGLang error body (JSON `message` / `error.message` / `detail`, or the raw text). */
export const errorMessage = (body: string): string => {
  try {
    const parsed = Schema.decodeUnknownSync(SglangWire.ErrorBody)(JSON.parse(body))
    if (parsed.message !== undefined) return parsed.message
    if (typeof parsed.error === "string") return parsed.error
    if (parsed.error?.message !== undefined) return parsed.error.message
    if (typeof parsed.detail === "string") return parsed.detail
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.length > 500 ? `${body.slice(0, 500)}…` : body
}

/** An answer's body parsed as JSON and decoded with `decode`, or the error naming the server and path. */
export const decodeAnswer = <A>(
  decode: (input: unknown) => Result.Result<A, Schema.SchemaError>,
  url: string,
  path: string,
  answer: Answer
): Result.Result<A, Engine.EngineError> => {
  let json: unknown
  try {
    json = JSON.parse(answer.body)
  } catch {
    return Result.fail(
      new Engine.EngineError({
        reason: "bad-answer",
        detail: `SGLang at ${url}${path} answered non-JSON: ${errorMessage(answer.body)}`,
        url
      })
    )
  }
  const decoded = decode(json)
  return Result.isSuccess(decoded) ? Result.succeed(decoded.success) : Result.fail(
    new Engine.EngineError({
      reason: "bad-answer",
      detail: `SGLang at ${url}${path} answered an unexpected shape: ${decoded.failure.message}`,
      url,
      cause: decoded.failure
    })
  )
}

/** {@link decodeAnswer} with `schema`, as an Effect. */
export const decodeJson = <S extends Schema.Top & { readonly DecodingServices: never }>(
  schema: S,
  url: string,
  path: string,
  answer: Answer
): Effect.Effect<S["Type"], Engine.EngineError> =>
  Effect.suspend(() => Effect.fromResult(decodeAnswer(Schema.decodeUnknownResult(schema), url, path, answer)))

/** The error of a non-2xx answer; a 5xx may succeed on another attempt. */
export const statusError = (url: string, path: string, answer: Answer): Engine.EngineError =>
  new Engine.EngineError({
    reason: "status",
    detail: `SGLang at ${url}${path} answered HTTP ${answer.status}: ${errorMessage(answer.body)}`,
    url,
    status: answer.status
  })

/** Succeeds with the answer when it is a 200, else fails with its {@link statusError}. */
export const ok = (url: string, path: string) => (answer: Answer): Effect.Effect<Answer, Engine.EngineError> =>
  answer.status === 200 ? Effect.succeed(answer) : Effect.fail(statusError(url, path, answer))

/** What a failed request is: a timeout (final), a broken connection (retryable) or another transport failure. */
export const transportError = (url: string, path: string, error: unknown): Engine.EngineError => {
  const code = errorCode(error)
  const timedOut = code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT"
  // A timed-out generation may still be running: retrying would run it twice (reason `timeout` is final).
  // An error without a code (a socket closed under undici) counts as a broken connection.
  const reason = timedOut
    ? "timeout"
    : code === undefined || connectionErrorCodes.has(code)
    ? "unreachable"
    : "protocol"
  return new Engine.EngineError({
    reason,
    detail: timedOut
      ? `SGLang at ${url}${path} did not answer within the request timeout (${describe(error)})`
      : `cannot reach SGLang at ${url}${path}: ${describe(error)}`,
    url,
    cause: error
  })
}

/**
 * One request's answer collected straight from undici's dispatcher: its status and body bytes, decoded as text as
 * undici's `request(…).body.text()` decodes it (UTF-8, a leading byte-order mark skipped), without the response stream,
 * the promise and the abort signal that `request` and `Effect.tryPromise` make per request. Informational (1xx)
 * answers are skipped, as `request` skips them.
 */
class Collector implements Dispatcher.DispatchHandler {
  private status = 0
  private readonly chunks: Array<Buffer> = []
  private length = 0
  private controller: Dispatcher.DispatchController | undefined
  private aborted: Error | undefined
  private done = false

  private readonly succeed: (answer: Answer) => void
  private readonly fail: (error: unknown) => void

  constructor(succeed: (answer: Answer) => void, fail: (error: unknown) => void) {
    this.succeed = succeed
    this.fail = fail
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.aborted !== undefined) controller.abort(this.aborted)
    else this.controller = controller
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    if (statusCode >= 200) this.status = statusCode
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk)
    this.length += chunk.length
  }

  onResponseEnd(): void {
    if (this.done) return
    this.done = true
    const bytes = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.length)
    const bom = bytes.length > 2 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0
    this.succeed({ status: this.status, body: bytes.toString("utf8", bom) })
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: unknown): void {
    if (this.done) return
    this.done = true
    this.fail(error)
  }

  /** Stop the request: now if it started, else as soon as undici starts it. */
  abort(): void {
    if (this.done) return
    const reason = new errors.RequestAbortedError()
    if (this.controller !== undefined) this.controller.abort(reason)
    else this.aborted = reason
  }
}

/** The two pools, closed with the scope. */
export const make = (options: Options): Effect.Effect<Http, never, Scope.Scope> =>
  Effect.gen(function*() {
    const requestTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.requestTimeout))
    const connectTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.connectTimeout))
    const makeAgent = (connections: number) =>
      Effect.acquireRelease(
        Effect.sync(() =>
          new Agent({
            connections,
            keepAliveTimeout: keepAliveTimeoutMs,
            keepAliveMaxTimeout: keepAliveTimeoutMs,
            connect: { timeout: connectTimeoutMs },
            headersTimeout: requestTimeoutMs,
            bodyTimeout: requestTimeoutMs
          })
        ),
        (a) => Effect.promise(() => a.destroy())
      )
    const auth: Record<string, string> = options.apiKey === undefined
      ? {}
      : { authorization: `Bearer ${options.apiKey}` }
    const plainHeaders: Record<string, string> = auth
    const jsonHeaders: Record<string, string> = { ...auth, "content-type": "application/json" }
    const dataAgent = yield* makeAgent(options.connections)
    const controlAgent = yield* makeAgent(8)

    const request: Http["request"] = (url, path, method, body, headers = noHeaders, timeoutMs) =>
      Effect.callback<Answer, Engine.EngineError>((resume) => {
        const collector = new Collector(
          (answer) => resume(Effect.succeed(answer)),
          (error) => resume(Effect.fail(transportError(url, path, error)))
        )
        try {
          ;(path === "/generate" ? dataAgent : controlAgent).dispatch({
            origin: url,
            path,
            method,
            headers: headers === noHeaders
              ? (body === undefined ? plainHeaders : jsonHeaders)
              : { ...(body === undefined ? plainHeaders : jsonHeaders), ...headers },
            body: body === undefined ? null : body instanceof Uint8Array ? body : JSON.stringify(body),
            ...(timeoutMs === undefined ? {} : { headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
          }, collector)
        } catch (error) {
          collector.onResponseError(undefined, error)
        }
        // Interrupted: stop the request (its connection is closed, as undici does for an aborted `request`).
        return Effect.sync(() => collector.abort())
      })
    return { request }
  })
