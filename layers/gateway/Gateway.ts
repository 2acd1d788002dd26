/**
 * The agent's only door into the system: the HTTP gateway serving OpenAI Chat Completions, OpenAI Responses and
 * Anthropic Messages at `/agentic_api`, all three over the one generation core (`Generation`).
 *
 * **Details**
 * Every model route exists with and without `/v1`, so `RELAX_BASE_URL` can be handed unchanged to the OpenAI SDK
 * (which appends `/chat/completions`, `/responses`) and to the Anthropic SDK (which appends `/v1/messages`).
 * One Node server answers everything: a model `POST` goes to the model route (ModelRoute.ts: auth → body → decode →
 * generate → answer), served straight from node:http for speed (docs/architecture.md, "The model routes on
 * node:http"); every other route is registered on Effect's `HttpRouter` in {@link routes}, the place to add one.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Duration, Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServer, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { IncomingMessage, Server, type ServerOptions, ServerResponse } from "node:http"
import { Socket } from "node:net"
import * as Chat from "../../src/protocol/Chat.ts"
import * as ErrorAnswer from "../../src/protocol/ErrorAnswer.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import type * as Generation from "../generation/Generation.ts"
import * as MetricsServer from "../observability/MetricsServer.ts"
import * as Sessions from "../schedule/Sessions.ts"
import * as Forwarder from "./Forwarder.ts"
import * as ModelRoute from "./ModelRoute.ts"

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
  static readonly layer = (
    options: GatewayOptions = {}
  ): Layer.Layer<Gateway, HttpServerError.ServeError, Sessions.Sessions | Generation.Generation> => layerWith(options)
}

/** The route prefix agents see in `RELAX_BASE_URL`. */
export const mountPath = ModelRoute.mountPath

const defaultMaxBodyBytes = 64 * 1024 * 1024
/** Node's own default; larger request headers get a 431 from Node before any handler runs. */
const defaultMaxHeaderBytes = 16 * 1024
/** Python's json recursion limit is about 1000; real tool schemas nest a few dozen levels at most. */
/** Deepest JSON nesting a request body may have by default (deeper is a 400). */
export const defaultMaxJsonDepth = 512

/**
 * How long the gateway keeps an idle keep-alive connection open: longer than the clients in front of it keep theirs
 * (a load balancer's idle timeout, commonly 60 s; another runner's relay, 4 s: layers/cluster/OwnerRelay.ts). A client
 * that keeps a connection longer than the server races the server's close and its next request fails with a reset
 * (Node's own default is 5 s, a second above the relay's).
 */
export const keepAliveTimeoutMs = 65_000

/**
 * The gateway's HTTP server: a request the model route takes (a `POST` on a model path) is answered there; every
 * other request goes to the Effect router. The model route is given when the server is built.
 */
class GatewayServer extends Server {
  private readonly modelRoute: ModelRoute.Handler
  private readonly router: Forwarder.ConnectionRouter | undefined

  constructor(modelRoute: ModelRoute.Handler, router: Forwarder.ConnectionRouter | undefined, options: ServerOptions) {
    super(options)
    this.modelRoute = modelRoute
    this.router = router
    this.keepAliveTimeout = keepAliveTimeoutMs
  }

  override emit(event: string, ...args: Array<unknown>): boolean {
    if (event === "request" || event === "checkContinue") {
      const [request, response] = args
      if (
        request instanceof IncomingMessage && response instanceof ServerResponse &&
        this.modelRoute(request, response, event === "checkContinue")
      ) return true
    } else if (event === "connection" && this.router !== undefined && args[0] instanceof Socket) {
      // A cluster's runner: a new connection is routed before the HTTP server reads it (the Forwarder port).
      // It is handed back to Node's own listener (`super.emit` does not come through here again).
      this.router.accept(args[0], (socket) => super.emit("connection", socket))
      return true
    }
    return super.emit(event, ...args)
  }

  override close(callback?: (error?: Error) => void): this {
    super.close(callback)
    this.router?.closeAll()
    return this
  }
}

/** A path or method no route serves: 405 for a model path called with another method, else 404. */
const unknownRoute = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const path = request.url.split("?")[0] ?? request.url
  const adapter = path.endsWith("/messages") ? Messages.adapter : Chat.adapter
  const error = ModelRoute.paths.has(path)
    ? ProtocolError.GatewayError.methodNotAllowed(request.method, path)
    : ProtocolError.GatewayError.unknownRoute(request.method, path)
  const answer = ErrorAnswer.render(adapter, error)
  return HttpServerResponse.text(answer.body, {
    status: answer.status,
    headers: answer.headers,
    contentType: "application/json"
  })
})

/**
 * Every route but the model route, on Effect's router: the model list, health, Prometheus `/metrics`, and an error in the shape its path
 * suggests for everything else (never a bare 404). A new route is one `router.add` here.
 */
const routes = (modelName: string) =>
  HttpRouter.use(Effect.fnUntraced(function*(router) {
    const models = HttpServerResponse.jsonUnsafe({
      object: "list",
      data: [{ id: modelName, object: "model", created: 0, owned_by: "relax" }]
    })
    yield* router.add("GET", `${mountPath}/models`, Effect.succeed(models))
    yield* router.add("GET", `${mountPath}/v1/models`, Effect.succeed(models))
    const health = Effect.succeed(HttpServerResponse.jsonUnsafe({ ok: true }))
    yield* router.add("GET", `${mountPath}/health`, health)
    yield* router.add("GET", `${mountPath}/healthz`, health)
    yield* router.add("GET", "/metrics", MetricsServer.route)
    yield* router.add("*", `${mountPath}/*`, unknownRoute)
    yield* router.add("*", "*", unknownRoute)
  }))

/** Pending connections the gateway's socket queues before accepting them. */
const LISTEN_BACKLOG = 16_384

/** Whether `host` only accepts connections from this machine. */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^(::ffff:)?127\.\d+\.\d+\.\d+$/i.test(host)

const nonLoopbackWarning = (host: string, port: number) =>
  `The agentic gateway listens on ${host}:${port}, not on a loopback address: anyone who can reach this port and ` +
  "learns a live session id can use the model (the session id is the only credential). Bind 127.0.0.1 (--host) " +
  "unless your agents run on other machines, and then keep the port behind a firewall."

/**
 * The `Forwarder` port's connection router (a cluster's runner: a new connection may be spliced to the runner holding
 * its Session). Absent in single-process mode.
 */
const connectionRouter = (maxHeadBytes: number) =>
  Effect.gen(function*() {
    const forward = Option.getOrUndefined(yield* Effect.serviceOption(Forwarder.Forwarder))
    if (forward === undefined) return undefined
    const sessions = yield* Sessions.Sessions
    const context = yield* Effect.context<never>()
    return forward.connections(maxHeadBytes, sessions.holds, (effect) => {
      Effect.runForkWith(context)(effect)
    })
  })

const layerWith = (options: GatewayOptions) =>
  Layer.unwrap(Effect.gen(function*() {
    const host = options.host ?? "127.0.0.1"
    const maxHeaderSize = options.maxHeaderBytes ?? defaultMaxHeaderBytes
    const modelRoute = yield* ModelRoute.make({
      heartbeatInterval: Duration.fromInputUnsafe(options.heartbeatInterval ?? Sse.heartbeatInterval),
      maxBodyBytes: options.maxBodyBytes ?? defaultMaxBodyBytes,
      maxJsonDepth: options.maxJsonDepth ?? defaultMaxJsonDepth
    })
    const router = yield* connectionRouter(maxHeaderSize)
    const served = HttpRouter.serve(routes(options.modelName ?? "relax-agentic"), {
      disableLogger: true,
      disableListenLog: true
    }).pipe(
      Layer.provideMerge(
        NodeHttpServer.layer(() => new GatewayServer(modelRoute, router, { maxHeaderSize }), {
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
