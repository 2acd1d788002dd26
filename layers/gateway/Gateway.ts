/**
 * The agent's only door into the system: the HTTP gateway serving OpenAI Chat Completions, OpenAI Responses and
 * Anthropic Messages at `/agentic_api`, all three over the one generation core (`Generation`).
 *
 * **Details**
 * Every model route exists with and without `/v1`, so `RELAX_BASE_URL` can be handed unchanged to the OpenAI SDK
 * (which appends `/chat/completions`, `/responses`) and to the Anthropic SDK (which appends `/v1/messages`).
 * The pipeline of one request: authenticate (before the body is read, so an unauthenticated caller learns nothing
 * about request validity) → read the body under a size limit → decode the protocol → generate → render JSON or
 * Buffered SSE. The generation runs in a fiber owned by the gateway, not by the request: a client that disconnects
 * after generation started loses only the answer; the response is still committed to its SessionForest.
 */
import { NodeHttpServer, NodeHttpServerRequest } from "@effect/platform-node"
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Result, Scheduler } from "effect"
import { HttpRouter, HttpServer, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { randomBytes } from "node:crypto"
import { type IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from "node:http"
import * as Generation from "../generation/Generation.ts"
import * as Exchange from "./NodeExchange.ts"
import * as Completion from "../../src/protocol/completion.ts"
import * as Errors from "../../src/protocol/errors.ts"
import * as Sse from "../../src/protocol/sse.ts"
import * as Chat from "../../src/protocol/chat.ts"
import * as Responses from "../../src/protocol/responses.ts"
import * as Messages from "../../src/protocol/messages.ts"
import { Sessions } from "../schedule/Sessions.ts"
import * as BodyDepth from "../../src/protocol/BodyDepth.ts"

/** Options of the gateway; every field has a documented default. */
export interface GatewayOptions {
  /**
   * Interface to bind. Default `127.0.0.1` (agents run on the same machine); any other address logs a warning, since
   * the session id is the only credential.
   */
  readonly host?: string | undefined
  /** Port to bind; `0` lets the OS pick one (the real port is in `Gateway.port`). Default `0`. */
  readonly port?: number | undefined
  /** Interval of Buffered-SSE heartbeat frames while a generation is pending. Default 15 seconds. */
  readonly heartbeatInterval?: Duration.Input | undefined
  /** Largest accepted request body in bytes; larger bodies get a 413. Default 64 MiB (inline images are big). */
  readonly maxBodyBytes?: number | undefined
  /** Largest accepted request header block in bytes; larger gets a 431. Default 16 KiB. */
  readonly maxHeaderBytes?: number | undefined
  /** Deepest JSON nesting accepted in a request body (objects and arrays); deeper is a 400. Default 512. */
  readonly maxJsonDepth?: number | undefined
  /** Model id listed by `GET /models`. Default `"relax-agentic"`. */
  readonly modelName?: string | undefined
}

export interface GatewayShape {
  /** `http://<host>:<port>/agentic_api`: the API root (clients append `/v1/...` or, for the OpenAI SDK, `/chat/completions`). */
  readonly baseUrl: string
  /** What agents get as `RELAX_BASE_URL`: {@link baseUrl} with a trailing slash, as Relax sets it. */
  readonly agentBaseUrl: string
  readonly host: string
  readonly port: number
}

/** The running gateway: where agents reach it. */
export class Gateway extends Context.Service<Gateway, GatewayShape>()("relax-agentic/Gateway") {
  /** Serve the gateway for the lifetime of the layer; needs `Sessions` and `Generation`. */
  static readonly layer = (options: GatewayOptions = {}): Layer.Layer<Gateway, HttpServerError.ServeError, Sessions | Generation.Generation> =>
    layerWith(options)
}

/** The route prefix agents see in `RELAX_BASE_URL`. */
export const mountPath = "/agentic_api"

const defaultMaxBodyBytes = 64 * 1024 * 1024
/** Node's own default; larger request headers get a 431 from Node before any handler runs. */
const defaultMaxHeaderBytes = 16 * 1024
/** Python's json recursion limit is about 1000; real tool schemas nest a few dozen levels at most. */
const defaultMaxJsonDepth = 512

// ---------------------------------------------------------------------------------------------------------------
// Errors and auth (docs/requests.md, "Error bodies"); auth runs before the body is read

const errorResponse = (adapter: Completion.Adapter, error: Errors.AnyError): HttpServerResponse.HttpServerResponse => {
  const rendered = adapter.renderError(error)
  return HttpServerResponse.jsonUnsafe(rendered.body, { status: rendered.status, headers: rendered.headers })
}

/**
 * The API key of a request: the `Authorization: Bearer <token>` header, or `x-api-key` (which the Anthropic SDK sends
 * when given an API key) when there is no `Authorization` header.
 */
export const apiKey = (headers: IncomingHttpHeaders): Result.Result<string, Errors.GatewayError> => {
  const header = headers.authorization
  if (header === undefined) {
    // Node joins a repeated `x-api-key` into one string (only `set-cookie` comes as a list).
    const value = headers["x-api-key"]
    const key = typeof value === "string" ? value.trim() : undefined
    return key !== undefined && key.length > 0 ? Result.succeed(key) : Result.fail(Errors.GatewayError.missingAuthorization())
  }
  const match = /^\s*(\S+)\s+(\S+)\s*$/.exec(header)
  if (match === null || match[1]?.toLowerCase() !== "bearer" || match[2] === undefined) {
    return Result.fail(Errors.GatewayError.malformedAuthorization())
  }
  return Result.succeed(match[2])
}

// ---------------------------------------------------------------------------------------------------------------
// Generation failures: the only place they become HTTP errors

/**
 * The HTTP answer of a failed generation: 404 for a Session closed while its request waited, 400 for a context length,
 * a conversation the chat template rejects or images that cannot get their training tokens, and a logged 500 `internal_error` for everything else.
 */
export const gatewayError = (error: Generation.GenerationError): Effect.Effect<Errors.GatewayError> => {
  switch (error._tag) {
    case "SessionClosedError":
      return Effect.succeed(Errors.GatewayError.sessionClosed(error.sessionId))
    case "ContextLengthError":
      return Effect.succeed(Errors.GatewayError.contextLength({
        limit: error.limit ?? undefined,
        promptTokens: error.promptTokens,
        completionTokens: error.completionTokens
      }))
    case "TemplateError":
      return Effect.succeed(Errors.GatewayError.templateRejected(error.detail))
    case "ImageRejectedError":
      return Effect.succeed(Errors.GatewayError.imageRejected(error.detail))
    default:
      return Effect.logError(`Agentic generation failed: ${error.message}`).pipe(
        Effect.as(Errors.GatewayError.internal("chat"))
      )
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The model routes, served from node:http (docs/architecture.md, "The model routes on node:http")

const { "content-type": sseContentType, ...sseHeaders } = Sse.headers
const sseResponseHeaders = { ...sseHeaders, "content-type": sseContentType }

interface RouteEnv {
  readonly sessions: Sessions["Service"]
  readonly generation: Generation.GenerationShape
  readonly heartbeatInterval: Duration.Duration
  readonly maxBodyBytes: number
  readonly maxJsonDepth: number
  /**
   * Run one request's fiber on the gateway's context (its scheduler, clock, logger and tracer) in the gateway's
   * scope: a client that disconnects does not interrupt it, so a started generation completes and is committed.
   */
  readonly run: (effect: Effect.Effect<void>) => void
}

type Outcome = Exit.Exit<Completion.Completion, Errors.GatewayError>

/**
 * The `Gateway.handle` span's options per protocol. Its call site is always `serveModel`, so no stack trace is
 * captured for it (that would be an `Error` allocated per request and held while the request waits).
 */
const spanOptions: Readonly<Record<Sse.Protocol, { readonly attributes: Record<string, unknown>; readonly captureStackTrace: false }>> = {
  chat: { attributes: { protocol: "chat" }, captureStackTrace: false },
  responses: { attributes: { protocol: "responses" }, captureStackTrace: false },
  messages: { attributes: { protocol: "messages" }, captureStackTrace: false }
}

/** Where a request is when its client goes away; a 499 is logged for `body` and `completion`. */
type Phase = "head" | "body" | "completion" | "stream" | "answered"

/**
 * Log a 499: the client went away (`phase` says when). Nobody reads the answer any more, so the log line (with the
 * status and code the reference answers with) is what records it.
 */
const logDisconnect = (phase: "body" | "completion", detail = "") => {
  const error = Errors.GatewayError.clientDisconnect(phase)
  return Effect.logWarning(`${error.message}${detail}`, { status: error.status, code: error.code })
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

/** The request body as one JSON object, or the error the client gets. */
const parseJsonObject = (bytes: Uint8Array, maxJsonDepth: number): Result.Result<Record<string, unknown>, Errors.GatewayError> => {
  let text: string
  try {
    text = strictUtf8.decode(bytes)
  } catch {
    return Result.fail(Errors.GatewayError.invalidJson("the body is not valid UTF-8; send JSON encoded as UTF-8"))
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (cause) {
    return Result.fail(Errors.GatewayError.invalidJson(cause instanceof Error ? cause.message : String(cause)))
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return Result.fail(Errors.GatewayError.bodyNotObject())
  // Everything after this point (canonicalization, hashing, templates) may recurse once per level.
  const tooDeep = BodyDepth.pathBeyondDepth(parsed, maxJsonDepth)
  if (tooDeep !== undefined) return Result.fail(Errors.GatewayError.nestedTooDeep(tooDeep, maxJsonDepth))
  // Decoding boundary: a JSON object parsed from the wire.
  return Result.succeed(parsed as Record<string, unknown>)
}

const sendError = (ex: Exchange.Exchange, adapter: Completion.Adapter, error: Errors.AnyError): void => {
  const rendered = adapter.renderError(error)
  Exchange.sendJson(ex, rendered.status, JSON.stringify(rendered.body), rendered.headers)
}

/** Read the body under the size limit; `undefined` when the client went away meanwhile (already logged). */
const readJsonObject = (
  ex: Exchange.Exchange,
  env: RouteEnv,
  disconnected: () => boolean
): Effect.Effect<Result.Result<Record<string, unknown>, Errors.GatewayError> | undefined> =>
  Effect.suspend(() => {
    const declared = Number(ex.request.headers["content-length"] ?? Number.NaN)
    if (Number.isFinite(declared) && declared > env.maxBodyBytes) {
      return Effect.succeed(Result.fail(Errors.GatewayError.bodyTooLarge(env.maxBodyBytes)))
    }
    return Effect.callback<Exchange.BodyRead>((resume) => Exchange.readBody(ex, env.maxBodyBytes, (read) => resume(Effect.succeed(read)))).pipe(
      Effect.flatMap((read) => {
        switch (read._tag) {
          case "TooLarge":
            return Effect.succeed(Result.fail(Errors.GatewayError.bodyTooLarge(env.maxBodyBytes)))
          case "Aborted":
            return disconnected() ? logDisconnect("body").pipe(Effect.as(undefined)) : Effect.succeed(undefined)
          case "Body":
            // The body completed inside an I/O callback; continuing (parse included) as a scheduled task lets the
            // rollout's scheduler (FairScheduler) interleave a burst of requests with timers and sockets instead of
            // running them back to back.
            return Effect.yieldNow.pipe(Effect.andThen(Effect.sync(() => parseJsonObject(read.bytes, env.maxJsonDepth))))
        }
      })
    )
  })

/**
 * One model request: authenticate (before the body is read, so an unauthenticated caller learns nothing about request
 * validity) → read the body under a size limit → decode the protocol → generate → answer JSON, or Buffered SSE: the
 * protocol's connection frame at once, a heartbeat every `heartbeatInterval` until the generation ends, then the
 * terminal frames. The generation runs in this request's fiber, which a disconnect does not interrupt: a client that
 * goes away loses only the answer; the response is still committed to its SessionForest.
 */
const serveModel = (env: RouteEnv, adapter: Completion.Adapter, ex: Exchange.Exchange): void => {
  let phase: Phase = "head"
  let logged = false
  /** Claims the one 499 log line of this request; false once it was written. */
  const disconnected = (): boolean => {
    if (logged) return false
    logged = true
    return true
  }
  ex.response.once("close", () => {
    if (ex.response.writableEnded) return
    if (phase === "body" && disconnected()) env.run(logDisconnect("body"))
    else if (phase === "completion" && disconnected()) {
      env.run(logDisconnect("completion", "; the generation still completes and is committed"))
    }
  })
  /** Auth, body and decoding: the canonical request, or `undefined` once the client got its error. */
  const accept = Effect.gen(function*() {
    const token = apiKey(ex.request.headers)
    if (Result.isFailure(token)) return sendError(ex, adapter, token.failure)
    const session = yield* env.sessions.lookup(token.success).pipe(Effect.result)
    if (Result.isFailure(session)) return sendError(ex, adapter, Errors.GatewayError.sessionClosed(token.success))
    phase = "body"
    const body = yield* readJsonObject(ex, env, disconnected)
    if (body === undefined) return sendError(ex, adapter, Errors.GatewayError.clientDisconnect("body"))
    if (Result.isFailure(body)) return sendError(ex, adapter, body.failure)
    const decoded = adapter.decode(body.success)
    if (Result.isFailure(decoded)) return sendError(ex, adapter, decoded.failure)
    return { session: session.success, canonical: decoded.success }
  })
  env.run(Effect.withSpan(Effect.gen(function*() {
    // The parsed body is not held while the request waits: only the canonical request it decoded to.
    const accepted = yield* accept
    if (accepted === undefined) return
    const { session, canonical } = accepted
    const generation: Effect.Effect<Outcome> = env.generation.generate(session, canonical).pipe(
      Effect.catch((error) => Effect.flatMap(gatewayError(error), Effect.fail)),
      Effect.exit
    )

    if (!canonical.stream) {
      phase = "completion"
      const exit = yield* generation
      // Rendered and written as a scheduled task (see the streaming answer below); a client gone meanwhile is a 499.
      yield* Effect.yieldNow
      phase = "answered"
      if (Exit.isFailure(exit)) return sendError(ex, adapter, failureError(exit))
      const rendered = Result.try(() => JSON.stringify(adapter.renderJson(exit.value, canonical)))
      return Result.isFailure(rendered)
        ? sendError(ex, adapter, Errors.GatewayError.internal("render"))
        : Exchange.sendJson(ex, 200, rendered.success)
    }

    const context: Completion.FailureContext = {
      id: randomBytes(16).toString("hex"),
      created: Math.floor((yield* Clock.currentTimeMillis) / 1000),
      model: canonical.model
    }
    phase = "stream"
    if (!Exchange.writable(ex)) {
      // Nobody reads the frames; the generation still completes and is committed.
      yield* generation
      return
    }
    Exchange.writeHead(ex, 200, sseResponseHeaders, true)
    const frames = sseFrames[adapter.protocol]
    ex.response.write(frames.connected)
    const heartbeats = yield* Effect.forkChild(heartbeat(ex, frames.heartbeat, env.heartbeatInterval))
    const exit = yield* generation
    phase = "answered"
    // The answer arrived in an I/O or promise callback, which resumes every request finishing there at once: render
    // and write it as a scheduled task (FairScheduler's slices) instead.
    yield* Effect.yieldNow
    yield* Fiber.interrupt(heartbeats)
    if (Exchange.writable(ex)) ex.response.end(Sse.encodeAll(renderTerminal(adapter, canonical, context, exit)))
  }), "Gateway.handle", spanOptions[adapter.protocol]))
}

/**
 * A heartbeat frame every `interval` while the client is there. Each one is written as a scheduled task
 * (`Effect.yieldNow` after the timer fired), so the heartbeats of thousands of held requests that fall due together
 * are written in the scheduler's slices, not in one long timer phase. One effect, built once per request, runs for
 * every beat (no schedule state per beat: 10,000 held requests write 10,000 heartbeats a second).
 */
const heartbeat = (ex: Exchange.Exchange, frame: string, interval: Duration.Duration): Effect.Effect<void> => {
  const beat = Effect.sleep(interval).pipe(
    Effect.andThen(Effect.yieldNow),
    Effect.andThen(Effect.sync(() => {
      if (Exchange.writable(ex)) ex.response.write(frame)
    }))
  )
  return Effect.whileLoop({ while: () => Exchange.writable(ex), body: () => beat, step: () => {} })
}

/** The connection and heartbeat frames of each protocol, encoded once. */
const sseFrames: Readonly<Record<Sse.Protocol, { readonly connected: string; readonly heartbeat: string }>> = {
  chat: { connected: Sse.encode(Sse.connected("chat")), heartbeat: Sse.encode(Sse.heartbeat("chat")) },
  responses: { connected: Sse.encode(Sse.connected("responses")), heartbeat: Sse.encode(Sse.heartbeat("responses")) },
  messages: { connected: Sse.encode(Sse.connected("messages")), heartbeat: Sse.encode(Sse.heartbeat("messages")) }
}

const failureError = (exit: Exit.Failure<Completion.Completion, Errors.GatewayError>): Errors.GatewayError => {
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason !== undefined ? reason.error : Errors.GatewayError.internal("request")
}

const renderTerminal = (
  adapter: Completion.Adapter,
  request: Completion.CanonicalRequest,
  context: Completion.FailureContext,
  exit: Outcome
): ReadonlyArray<Sse.SseFrame> => {
  if (Exit.isFailure(exit)) return adapter.renderSseError(failureError(exit), context)
  const frames = Result.try(() => adapter.renderSse(exit.value, request))
  return Result.isFailure(frames) ? adapter.renderSseError(Errors.GatewayError.internal("render"), context) : frames.success
}

/**
 * The gateway's HTTP server: the model routes (`POST` on an exact model path) go straight to `serveModel`; every
 * other request, and a model route spelled another way (e.g. with a doubled slash), goes to the Effect router.
 */
class GatewayServer extends Server {
  /** Set once the routes are built; until then everything goes to the Effect router. */
  serveModel: ((adapter: Completion.Adapter, ex: Exchange.Exchange) => void) | undefined

  override emit(event: string, ...args: Array<unknown>): boolean {
    if ((event === "request" || event === "checkContinue") && this.serveModel !== undefined) {
      const [request, response] = args
      if (request instanceof IncomingMessage && response instanceof ServerResponse && request.method === "POST") {
        const url = request.url ?? ""
        const query = url.indexOf("?")
        const adapter = modelRoutes.get(query === -1 ? url : url.slice(0, query))
        if (adapter !== undefined) {
          if (request.httpVersionMajor === 1) {
            // Prepended so it runs before Node's own `finish` listener drains or destroys.
            response.prependListener("finish", () => Exchange.teardownBody(request, response))
          }
          this.serveModel(adapter, Exchange.exchange(request, response, event === "checkContinue"))
          return true
        }
      }
    }
    return super.emit(event, ...args)
  }
}

/**
 * A model route that reached the Effect router (a path the exact match did not take): served by `serveModel` on the
 * same Node request and response; the router's response is never written (the exchange already answered).
 */
const routedModel = (serve: (adapter: Completion.Adapter, ex: Exchange.Exchange) => void, adapter: Completion.Adapter) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
    const outgoing = NodeHttpServerRequest.toServerResponse(request)
    if (!(incoming instanceof IncomingMessage) || !(outgoing instanceof ServerResponse)) {
      return errorResponse(adapter, Errors.GatewayError.internal("request"))
    }
    yield* Effect.callback<void>((resume) => {
      outgoing.once("close", () => resume(Effect.void))
      serve(adapter, Exchange.exchange(incoming, outgoing, Exchange.expectsContinue(incoming)))
    })
    return HttpServerResponse.empty()
  })

// ---------------------------------------------------------------------------------------------------------------
// Wiring

const modelPaths = {
  chat: ["/chat/completions", "/v1/chat/completions"],
  responses: ["/responses", "/v1/responses"],
  messages: ["/messages", "/v1/messages"]
} as const

/** Every model route (each exists with and without `/v1`) and the protocol it speaks. */
const modelRouteList = [Chat.adapter, Responses.adapter, Messages.adapter].flatMap((adapter) =>
  modelPaths[adapter.protocol].map((path) => ({ path: `${mountPath}${path}` as const, adapter }))
)
const modelRoutes: ReadonlyMap<string, Completion.Adapter> = new Map(modelRouteList.map((route) => [route.path, route.adapter]))

/** A path or method no route serves: 405 for a model route called with another method, else 404. */
const unknownRoute = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const path = request.url.split("?")[0] ?? request.url
  const adapter = path.endsWith("/messages") ? Messages.adapter : Chat.adapter
  const error = modelRoutes.has(path)
    ? Errors.GatewayError.methodNotAllowed(request.method, path)
    : Errors.GatewayError.unknownRoute(request.method, path)
  const response = errorResponse(adapter, error)
  return error.status === 405 ? HttpServerResponse.setHeader(response, "allow", "POST") : response
})

/** Pending connections the gateway's socket queues before accepting them. */
const LISTEN_BACKLOG = 16_384

/** Whether `host` only accepts connections from this machine. */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^(::ffff:)?127\.\d+\.\d+\.\d+$/i.test(host)

const nonLoopbackWarning = (host: string, port: number) =>
  `The agentic gateway listens on ${host}:${port}, not on a loopback address: anyone who can reach this port and ` +
  "learns a live session id can use the model (the session id is the only credential). Bind 127.0.0.1 (--host) " +
  "unless your agents run on other machines, and then keep the port behind a firewall."

const layerWith = (options: GatewayOptions) =>
  Layer.unwrap(Effect.sync(() => {
    const host = options.host ?? "127.0.0.1"
    const modelName = options.modelName ?? "relax-agentic"
    const maxHeaderSize = options.maxHeaderBytes ?? defaultMaxHeaderBytes
    // This build's server: the routes hand it the model routes once they are built.
    let server: GatewayServer | undefined
    const routes = HttpRouter.use(Effect.fnUntraced(function*(router) {
      const context = yield* Effect.context<never>()
      const scope = yield* Effect.scope
      const env: RouteEnv = {
        sessions: yield* Sessions,
        generation: yield* Generation.Generation,
        heartbeatInterval: Duration.fromInputUnsafe(options.heartbeatInterval ?? Sse.heartbeatInterval),
        maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes,
        maxJsonDepth: options.maxJsonDepth ?? defaultMaxJsonDepth,
        run: (effect) => {
          Fiber.runIn(Effect.runForkWith(context)(effect), scope)
        }
      }
      // A request starts as a scheduled task, not inside Node's I/O callback: a wave of connections parsed in one poll
      // phase then costs Node's parsing only, and the requests' own work runs in the scheduler's slices
      // (FairScheduler), interleaved with timers and sockets (docs/performance.md, section 3).
      const dispatcher = Context.get(context, Scheduler.Scheduler).makeDispatcher()
      const serve = (adapter: Completion.Adapter, ex: Exchange.Exchange) =>
        dispatcher.scheduleTask(() => serveModel(env, adapter, ex), 0)
      if (server !== undefined) server.serveModel = serve
      for (const { path, adapter } of modelRouteList) yield* router.add("POST", path, routedModel(serve, adapter))
      const models = HttpServerResponse.jsonUnsafe({
        object: "list",
        data: [{ id: modelName, object: "model", created: 0, owned_by: "relax" }]
      })
      yield* router.add("GET", `${mountPath}/models`, Effect.succeed(models))
      yield* router.add("GET", `${mountPath}/v1/models`, Effect.succeed(models))
      const health = Effect.succeed(HttpServerResponse.jsonUnsafe({ ok: true }))
      yield* router.add("GET", `${mountPath}/health`, health)
      yield* router.add("GET", `${mountPath}/healthz`, health)
      // Everything else under the mount (and outside it) gets an error in the shape its path suggests, never a bare 404.
      yield* router.add("*", `${mountPath}/*`, unknownRoute)
      yield* router.add("*", "*", unknownRoute)
    }))
    const served = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }).pipe(
      Layer.provideMerge(
        NodeHttpServer.layer(() => (server = new GatewayServer({ maxHeaderSize })), {
          host,
          port: options.port ?? 0,
          // Thousands of agents connect at once (a step's first requests): Node's default backlog of 511 pending
          // connections overflows and connections are reset; the kernel caps this at net.core.somaxconn.
          backlog: LISTEN_BACKLOG,
          gracefulShutdownTimeout: "1 second"
        })
      )
    )
    return Layer.effect(
      Gateway,
      Effect.gen(function*() {
        const address = (yield* HttpServer.HttpServer).address
        const port = address._tag === "UnixPathAddress" ? 0 : address.port
        const baseUrl = `http://${host}:${port}${mountPath}`
        if (!isLoopback(host)) yield* Effect.logWarning(nonLoopbackWarning(host, port))
        return Gateway.of({ host, port, baseUrl, agentBaseUrl: `${baseUrl}/` })
      })
    ).pipe(Layer.provide(served))
  }))
