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
import { ByteSize, Cause, Clock, Context, Deferred, Duration, Effect, Exit, Layer, Queue, Result, Scope, Stream } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServer, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { randomBytes } from "node:crypto"
import { createServer } from "node:http"
import * as Generation from "./Generation.ts"
import * as Completion from "../src/protocol/completion.ts"
import * as Errors from "../src/protocol/errors.ts"
import * as Sse from "../src/protocol/sse.ts"
import * as Chat from "../src/protocol/chat.ts"
import * as Responses from "../src/protocol/responses.ts"
import * as Messages from "../src/protocol/messages.ts"
import { Sessions } from "./Sessions.ts"
import * as Json from "../src/json/Json.ts"

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
export const apiKey = (
  headers: Readonly<Record<string, string | undefined>>
): Result.Result<string, Errors.GatewayError> => {
  const header = headers["authorization"]
  if (header === undefined) {
    const key = headers["x-api-key"]?.trim()
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
    case "SessionDiscarded":
      return Effect.succeed(Errors.GatewayError.sessionDiscarded(error.sessionId))
    case "ContextLengthError":
      return Effect.succeed(Errors.GatewayError.contextLength({
        limit: error.limit ?? undefined,
        promptTokens: error.promptTokens,
        completionTokens: error.completionTokens
      }))
    case "TemplateRejected":
      return Effect.succeed(Errors.GatewayError.templateRejected(error.reason))
    case "ImageRejected":
      return Effect.succeed(Errors.GatewayError.imageRejected(error.reason))
    default:
      return Effect.logError(`Agentic generation failed: ${error.message}`).pipe(
        Effect.as(Errors.GatewayError.internal("chat"))
      )
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Buffered SSE (docs/agent-contract.md, "The model API": Streaming)

const { "content-type": sseContentType, ...sseHeaders } = Sse.headers

/** A Buffered-SSE body and how its terminal frames get there. */
export interface SseBody {
  readonly body: Stream.Stream<Uint8Array>
  /**
   * Hand over the terminal frames (called once, by the generation's fiber): written after the frames so far, then the
   * body ends. `terminal` never fails: a failed generation is rendered as the protocol's error frames.
   */
  readonly complete: (terminal: ReadonlyArray<Sse.SseFrame>) => void
}

/**
 * The Buffered-SSE body: the protocol's connection frame at once, a heartbeat every `interval` until `complete` is
 * called, then the terminal frames.
 *
 * **Details**
 * A held request is the one response fiber writing the body and one heartbeat fiber sleeping between heartbeats:
 * `complete` puts the terminal frames into the body's queue directly (no fiber waits for them), and the heartbeat
 * fiber ends with the body. Each heartbeat is written as a scheduled task (`Effect.yieldNow` after the timer fired),
 * so the heartbeats of thousands of held requests that fall due together are written in the scheduler's slices, not
 * in one long timer phase.
 */
export const sseBody = (protocol: Sse.Protocol, interval: Duration.Input): SseBody => {
  const heartbeat = Sse.encode(Sse.heartbeat(protocol))
  let terminal: ReadonlyArray<Sse.SseFrame> | undefined
  let open: Queue.Queue<string, Cause.Done> | undefined
  const finish = (queue: Queue.Queue<string, Cause.Done>, frames: ReadonlyArray<Sse.SseFrame>): void => {
    Queue.offerUnsafe(queue, Sse.encodeAll(frames))
    Queue.endUnsafe(queue)
  }
  const body = Stream.callback<string>((queue) => {
    Queue.offerUnsafe(queue, Sse.encode(Sse.connected(protocol)))
    if (terminal !== undefined) {
      finish(queue, terminal)
      return Effect.void
    }
    open = queue
    return Effect.sleep(interval).pipe(
      Effect.andThen(Effect.yieldNow),
      Effect.andThen(Effect.sync(() => Queue.offerUnsafe(queue, heartbeat))),
      Effect.forever
    )
  }).pipe(Stream.encodeText)
  return {
    body,
    complete: (frames) => {
      if (open === undefined) terminal = frames
      else finish(open, frames)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One route per protocol

/**
 * Log a 499: the client went away (`phase` says when). Nobody reads the answer any more, so the log line (with the
 * status and code the reference answers with) is what records it.
 */
const logDisconnect = (phase: "body" | "completion", detail = "") => {
  const error = Errors.GatewayError.clientDisconnect(phase)
  return Effect.logWarning(`${error.message}${detail}`, { status: error.status, code: error.code })
}

/** Whether the client aborted the request before its body was complete (the socket closed mid-body). */
const bodyAborted = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const incoming = NodeHttpServerRequest.toIncomingMessage(request)
  return incoming.readableAborted || (incoming.destroyed && !incoming.complete)
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

const readJsonObject = (
  request: HttpServerRequest.HttpServerRequest,
  maxBodyBytes: number,
  maxJsonDepth: number
): Effect.Effect<Record<string, unknown>, Errors.GatewayError> =>
  Effect.gen(function*() {
    const declared = Number(request.headers["content-length"] ?? Number.NaN)
    if (Number.isFinite(declared) && declared > maxBodyBytes) {
      return yield* Effect.fail(Errors.GatewayError.bodyTooLarge(maxBodyBytes))
    }
    const bytes = yield* request.arrayBuffer.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(maxBodyBytes)),
      Effect.mapError((error) =>
        error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
          ? Errors.GatewayError.bodyTooLarge(maxBodyBytes)
          : bodyAborted(request)
          ? Errors.GatewayError.clientDisconnect("body")
          : Errors.GatewayError.invalidJson(error.message)
      )
    )
    let text: string
    try {
      text = strictUtf8.decode(bytes)
    } catch {
      return yield* Effect.fail(Errors.GatewayError.invalidJson("the body is not valid UTF-8; send JSON encoded as UTF-8"))
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch (cause) {
      return yield* Effect.fail(Errors.GatewayError.invalidJson(cause instanceof Error ? cause.message : String(cause)))
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return yield* Effect.fail(Errors.GatewayError.bodyNotObject())
    }
    // Everything after this point (canonicalization, hashing, templates) may recurse once per level.
    const tooDeep = Json.pathBeyondDepth(parsed, maxJsonDepth)
    if (tooDeep !== undefined) return yield* Effect.fail(Errors.GatewayError.nestedTooDeep(tooDeep, maxJsonDepth))
    // Decoding boundary: a JSON object parsed from the wire.
    return parsed as Record<string, unknown>
  })

interface RouteEnv {
  readonly sessions: Sessions["Service"]
  readonly generation: Generation.GenerationShape
  /** Generations run here, not in the request fiber: a disconnect must not interrupt a started generation. */
  readonly scope: Scope.Scope
  readonly heartbeatInterval: Duration.Input
  readonly maxBodyBytes: number
  readonly maxJsonDepth: number
}

type Outcome = Exit.Exit<Completion.Completion, Errors.GatewayError>

const handler = (adapter: Completion.Adapter, env: RouteEnv) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const fail = (error: Errors.AnyError) => Effect.succeed(errorResponse(adapter, error))

    const token = apiKey(request.headers)
    if (Result.isFailure(token)) return yield* fail(token.failure)
    const session = yield* env.sessions.lookup(token.success).pipe(Effect.result)
    if (Result.isFailure(session)) return yield* fail(Errors.GatewayError.sessionDiscarded(token.success))

    // A client that goes away mid-body either interrupts this fiber (the socket closed) or fails the body stream
    // (the request aborted), whichever Node reports first; both are the reference's 499 `client_disconnect`.
    const body = yield* readJsonObject(request, env.maxBodyBytes, env.maxJsonDepth).pipe(
      Effect.onInterrupt(() => logDisconnect("body")),
      Effect.result
    )
    if (Result.isFailure(body)) {
      if (body.failure.code === "client_disconnect") yield* logDisconnect("body")
      return yield* fail(body.failure)
    }
    // The body completed inside an I/O callback; continuing as a scheduled task lets the rollout's scheduler
    // (FairScheduler) interleave a burst of requests with timers and sockets instead of running them back to back.
    yield* Effect.yieldNow
    const decoded = adapter.decode(body.success)
    if (Result.isFailure(decoded)) return yield* fail(decoded.failure)
    const canonical = decoded.success

    const generation: Effect.Effect<Outcome> = env.generation.generate(session.success, canonical).pipe(
      Effect.catch((error) => Effect.flatMap(gatewayError(error), Effect.fail)),
      Effect.exit
    )

    if (canonical.stream) {
      const context: Completion.FailureContext = {
        id: randomBytes(16).toString("hex"),
        created: Math.floor((yield* Clock.currentTimeMillis) / 1000),
        model: canonical.model
      }
      // The generation's fiber renders the terminal frames and hands them to the body itself: a held streaming
      // request has no fiber waiting for another.
      const sse = sseBody(adapter.protocol, env.heartbeatInterval)
      yield* generation.pipe(
        Effect.map((exit) => sse.complete(renderTerminal(adapter, canonical, context, exit))),
        Effect.forkIn(env.scope)
      )
      return HttpServerResponse.stream(sse.body, {
        contentType: sseContentType,
        headers: sseHeaders
      })
    }

    const outcome = yield* Deferred.make<Outcome>()
    yield* generation.pipe(Effect.flatMap((exit) => Deferred.succeed(outcome, exit)), Effect.forkIn(env.scope))
    const exit = yield* Deferred.await(outcome).pipe(
      Effect.onInterrupt(() => logDisconnect("completion", "; the generation still completes and is committed"))
    )
    if (Exit.isFailure(exit)) return yield* fail(failureError(exit))
    const rendered = Result.try(() => adapter.renderJson(exit.value, canonical))
    return Result.isFailure(rendered)
      ? errorResponse(adapter, Errors.GatewayError.internal("render"))
      : HttpServerResponse.jsonUnsafe(rendered.success)
  })

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

// ---------------------------------------------------------------------------------------------------------------
// Wiring

const allModelPaths: ReadonlyArray<string> = Object.values({
  chat: ["/chat/completions", "/v1/chat/completions"],
  responses: ["/responses", "/v1/responses"],
  messages: ["/messages", "/v1/messages"]
}).flat().map((path) => `${mountPath}${path}`)

/** A path or method no route serves: 405 for a model route called with another method, else 404. */
const unknownRoute = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const path = request.url.split("?")[0] ?? request.url
  const adapter = path.endsWith("/messages") ? Messages.adapter : Chat.adapter
  const error = allModelPaths.includes(path)
    ? Errors.GatewayError.methodNotAllowed(request.method, path)
    : Errors.GatewayError.unknownRoute(request.method, path)
  const response = errorResponse(adapter, error)
  return error.status === 405 ? HttpServerResponse.setHeader(response, "allow", "POST") : response
})

const modelPaths = {
  chat: ["/chat/completions", "/v1/chat/completions"],
  responses: ["/responses", "/v1/responses"],
  messages: ["/messages", "/v1/messages"]
} as const

const adapters: ReadonlyArray<Completion.Adapter> = [Chat.adapter, Responses.adapter, Messages.adapter]

/** Pending connections the gateway's socket queues before accepting them. */
const LISTEN_BACKLOG = 16_384

/** Whether `host` only accepts connections from this machine. */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^(::ffff:)?127\.\d+\.\d+\.\d+$/i.test(host)

const nonLoopbackWarning = (host: string, port: number) =>
  `The agentic gateway listens on ${host}:${port}, not on a loopback address: anyone who can reach this port and ` +
  "learns a live session id can use the model (the session id is the only credential). Bind 127.0.0.1 (--host) " +
  "unless your agents run on other machines, and then keep the port behind a firewall."

const layerWith = (options: GatewayOptions) => {
  const host = options.host ?? "127.0.0.1"
  const modelName = options.modelName ?? "relax-agentic"
  const routes = HttpRouter.use(Effect.fnUntraced(function*(router) {
    const env: RouteEnv = {
      sessions: yield* Sessions,
      generation: yield* Generation.Generation,
      scope: yield* Effect.scope,
      heartbeatInterval: options.heartbeatInterval ?? Sse.heartbeatInterval,
      maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes,
      maxJsonDepth: options.maxJsonDepth ?? defaultMaxJsonDepth
    }
    for (const adapter of adapters) {
      for (const path of modelPaths[adapter.protocol]) yield* router.add("POST", `${mountPath}${path}`, handler(adapter, env).pipe(Effect.withSpan("Gateway.handle", { attributes: { protocol: adapter.protocol } })))
    }
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
  const maxHeaderSize = options.maxHeaderBytes ?? defaultMaxHeaderBytes
  const served = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provideMerge(
      NodeHttpServer.layer(() => createServer({ maxHeaderSize }), {
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
      const server = yield* HttpServer.HttpServer
      const address = server.address
      const port = address._tag === "UnixPathAddress" ? 0 : address.port
      const baseUrl = `http://${host}:${port}${mountPath}`
      if (!isLoopback(host)) yield* Effect.logWarning(nonLoopbackWarning(host, port))
      return Gateway.of({ host, port, baseUrl, agentBaseUrl: `${baseUrl}/` })
    })
  ).pipe(Layer.provide(served))
}
