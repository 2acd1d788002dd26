/**
 * The trainer-facing RPC: the `TrainerService` as an effect/rpc group served over HTTP with NDJSON framing, so any
 * trainer (TypeScript through the generated client, Python or curl through plain HTTP) can drive the rollout.
 *
 * **Details**
 * One route, `POST /rpc`. The body is one JSON request per line (every line ends in `\n`), the response is one JSON
 * message per line (`application/x-ndjson`): a `Chunk` line per batch of streamed values, then one `Exit` line per
 * request. docs/trainer.md is the wire reference. With a token every request needs `Authorization: Bearer <token>`;
 * without one the server must stay on loopback. `Shutdown` answers, then completes `shutdownRequested`: the program
 * that owns the layer (`relax-agentic serve`) closes the scope, which reaps every agent and closes both servers.
 */
import { NodeHttpClient, NodeHttpServer } from "@effect/platform-node"
import { Context, Data, Deferred, Effect, Layer, Schema, type Scope, Stream } from "effect"
import {
  HttpClient,
  HttpClientRequest,
  HttpRouter,
  HttpServer,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import { Rpc, RpcClient, type RpcClientError, RpcGroup, RpcSerialization, RpcServer } from "effect/rpc"
import { createHash, timingSafeEqual } from "node:crypto"
import { createServer } from "node:http"
import * as WeightVersion from "../../src/engine/WeightVersion.ts"
import * as WorkerEvents from "../../src/engine/WorkerEvents.ts"
import * as Thrown from "../../src/Thrown.ts"
import * as Results from "../../src/trainer/Results.ts"
import * as TrainerService from "./TrainerService.ts"

/** The route every RPC request goes to. */
export const rpcPath = "/rpc"

/** The RPC group: one procedure per `TrainerService` member, plus `Shutdown`. */
export class RolloutRpcs extends RpcGroup.make(
  Rpc.make("Step", {
    payload: { rolloutId: Schema.Int },
    success: Results.StepResult,
    error: Results.RolloutCallError
  }),
  Rpc.make("Groups", {
    payload: { from: Schema.optionalKey(Schema.Int), steps: Schema.optionalKey(Schema.Int) },
    success: Results.FinishedGroup,
    error: Results.RolloutCallError,
    stream: true
  }),
  Rpc.make("Evaluate", {
    payload: { rolloutId: Schema.Int },
    success: Results.EvalResult,
    error: Results.RolloutCallError
  }),
  Rpc.make("UpdateWeights", {
    payload: { version: Schema.optionalKey(Schema.String) },
    success: Results.WeightsAnswer,
    error: Results.RolloutCallError
  }),
  Rpc.make("PauseGeneration", {
    payload: { mode: Schema.optionalKey(WeightVersion.PauseMode) },
    error: Results.RolloutCallError
  }),
  Rpc.make("ResumeGeneration", {
    payload: { version: Schema.optionalKey(Schema.String) },
    success: Results.WeightsAnswer,
    error: Results.RolloutCallError
  }),
  Rpc.make("PublishAdapter", {
    payload: { path: Schema.String, digest: Schema.optionalKey(Schema.String) },
    success: Results.PublishedAdapter,
    error: Results.RolloutCallError
  }),
  Rpc.make("WorkerEvents", { payload: {}, success: WorkerEvents.WorkerEvent, stream: true }),
  Rpc.make("Status", { payload: {}, success: Results.RolloutStatus }),
  Rpc.make("Shutdown", { payload: {} })
) {}

export interface RpcServerOptions {
  /** Interface to bind. Default `127.0.0.1`. */
  readonly host?: string | undefined
  /** Port to bind; `0` lets the OS pick one (the real port is in `RolloutRpcServer.port`). Default `0`. */
  readonly port?: number | undefined
  /** When set, every request must carry `Authorization: Bearer <token>` (a 401 otherwise). */
  readonly token?: string | undefined
}

/** The RPC server cannot listen where it was told to. */
export class RpcServeError extends Data.TaggedError("RpcServeError")<{
  readonly host: string
  readonly port: number
  readonly detail: string
}> {
  override get message(): string {
    return `--rpc-host/--rpc-port: the trainer RPC cannot listen on ${this.host}:${this.port}: ${this.detail}; ` +
      "pick a free port (0: any free port) or another interface"
  }
}

export interface RolloutRpcServerShape {
  readonly host: string
  readonly port: number
  /** `http://<host>:<port>/rpc`. */
  readonly url: string
  /** Completes when a client called `Shutdown`. */
  readonly shutdownRequested: Effect.Effect<void>
}

/** The running RPC server. */
export class RolloutRpcServer extends Context.Service<RolloutRpcServer, RolloutRpcServerShape>()(
  "relax-agentic/RolloutRpcServer"
) {
  /** Serve the RPC group over the `TrainerService` for the lifetime of the layer. */
  static readonly layer = (
    options: RpcServerOptions = {}
  ): Layer.Layer<RolloutRpcServer, RpcServeError, TrainerService.TrainerService> => layerWith(options)
}

class ShutdownSignal
  extends Context.Service<ShutdownSignal, Deferred.Deferred<void>>()("relax-agentic/ShutdownSignal")
{}

const handlers = RolloutRpcs.toLayer(Effect.gen(function*() {
  const trainer = yield* TrainerService.TrainerService
  const shutdown = yield* ShutdownSignal
  return RolloutRpcs.of({
    Step: ({ rolloutId }) => trainer.step(rolloutId).pipe(Effect.mapError(Results.callError)),
    Groups: (payload) => trainer.stream(payload).pipe(Stream.mapError(Results.callError)),
    Evaluate: ({ rolloutId }) => trainer.evaluate(rolloutId).pipe(Effect.mapError(Results.callError)),
    UpdateWeights: ({ version }) =>
      trainer.updateWeights(version).pipe(
        Effect.flatMap((weightVersion) => Effect.map(trainer.workers, (w) => Results.weightsAnswer(weightVersion, w))),
        Effect.mapError(Results.callError)
      ),
    PauseGeneration: ({ mode }) => trainer.pauseGeneration(mode).pipe(Effect.mapError(Results.callError)),
    ResumeGeneration: ({ version }) =>
      trainer.resumeGeneration(version).pipe(
        Effect.flatMap((weightVersion) => Effect.map(trainer.workers, (w) => Results.weightsAnswer(weightVersion, w))),
        Effect.mapError(Results.callError)
      ),
    PublishAdapter: (input) => trainer.publishAdapter(input).pipe(Effect.mapError(Results.callError)),
    Status: () => trainer.status,
    WorkerEvents: () => trainer.workerEvents,
    Shutdown: () => Deferred.succeed(shutdown, undefined).pipe(Effect.asVoid)
  })
}))

const unauthorized = HttpServerResponse.jsonUnsafe(
  {
    error:
      "missing or wrong bearer token: send the token `relax-agentic serve --rpc-token` was given as `Authorization: Bearer <token>`"
  },
  { status: 401 }
)

const layerWith = (options: RpcServerOptions) => {
  const host = options.host ?? "127.0.0.1"
  // Compared as digests in constant time, so response timing says nothing about how much of a guess was right.
  const digest = (text: string) => createHash("sha256").update(text, "utf8").digest()
  const expected = options.token === undefined ? undefined : digest(`Bearer ${options.token}`)
  const port = options.port ?? 0
  const routes = HttpRouter.use(Effect.fnUntraced(function*(router) {
    const serve = yield* RpcServer.toHttpEffect(RolloutRpcs, { disableTracing: true })
    const authed = expected === undefined ? serve : Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      return timingSafeEqual(digest(request.headers["authorization"] ?? ""), expected) ? yield* serve : unauthorized
    })
    yield* router.add("POST", rpcPath, authed)
  }))
  const served = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provide(handlers),
    Layer.provide(RpcSerialization.layerNdjson),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { host, port, gracefulShutdownTimeout: "1 second" }))
  )
  const signal = Layer.effect(ShutdownSignal, Deferred.make<void>())
  return Layer.effect(
    RolloutRpcServer,
    Effect.gen(function*() {
      const address = (yield* HttpServer.HttpServer).address
      const bound = address._tag === "UnixPathAddress" ? 0 : address.port
      const shutdown = yield* ShutdownSignal
      return RolloutRpcServer.of({
        host,
        port: bound,
        url: `http://${host.includes(":") ? `[${host}]` : host}:${bound}${rpcPath}`,
        shutdownRequested: Deferred.await(shutdown)
      })
    })
  ).pipe(
    Layer.provide(served),
    Layer.provide(signal),
    Layer.catchTag("ServeError", (error) =>
      Layer.effect(
        RolloutRpcServer,
        Effect.fail(
          new RpcServeError({ host, port, detail: Thrown.messageOf(error.cause) })
        )
      ))
  )
}

export interface RpcClientOptions {
  /** The server's RPC URL (`http://127.0.0.1:PORT/rpc`, as `relax-agentic serve` prints it). */
  readonly url: string
  /** The server's `--rpc-token`, when it has one. */
  readonly token?: string | undefined
}

/** The generated client's type: one method per procedure (`client.Step({ rolloutId: 0 })`, `client.Groups({})`). */
export type RolloutRpcClient = RpcClient.FromGroup<typeof RolloutRpcs, RpcClientError.RpcClientError>

/**
 * The client's transport: HTTP with NDJSON framing and no read timeout (a step can take as long as its slowest
 * agent), any response size.
 */
export const clientProtocol = (options: RpcClientOptions): Layer.Layer<RpcClient.Protocol> => {
  const bearer = options.token === undefined
    ? undefined
    : HttpClientRequest.bearerToken(options.token)
  return RpcClient.layerProtocolHttp({
    url: options.url,
    ...(bearer === undefined ? {} : { transformClient: HttpClient.mapRequest(bearer) })
  }).pipe(
    Layer.provide(RpcSerialization.layerNdjsonWith({ maxBufferSize: "unbounded" })),
    Layer.provide(NodeHttpClient.layerUndiciOptions({ headersTimeout: 0, bodyTimeout: 0 }))
  )
}

/** A client of a running RPC server; it and its connections live as long as the enclosing scope. */
export const makeClient = (options: RpcClientOptions): Effect.Effect<RolloutRpcClient, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Built in the caller's scope: `Effect.provide(layer)` would close the HTTP client as soon as `make` returned.
    const protocol = yield* Layer.build(clientProtocol(options))
    return yield* RpcClient.make(RolloutRpcs).pipe(Effect.provide(protocol))
  })
