/**
 * The gateway's model route (`POST` chat completions, responses, messages; docs/architecture.md, "The model routes on
 * node:http"): authenticate → read the body → decode → generate → answer JSON or Buffered SSE, with heartbeats.
 *
 * **Details**
 * Every `POST` whose path the gateway's router would match to a model path (same matcher and rules: query dropped,
 * doubled slashes collapsed, trailing slash and case ignored) is served here, straight from the Node request and
 * response: one Effect fiber per request on the gateway's context (its scheduler, clock, logger and tracer) in the
 * gateway's scope. A disconnect does not interrupt that fiber, so a client that goes away after the generation started
 * loses only the answer; the response is still committed to its SessionForest, and the 499 is logged.
 *
 * In cluster mode (docs/scale-out.md "One address for agents") a request for a Session this runner does not hold,
 * whose id names a Group (`src/cluster/Routing.ts`), goes to the runner owning the Session (the `Forwarder` service).
 * The first requests of a Group go over the cluster: decoded here (a malformed request gets its 400 from this
 * runner), sent as an entity call; for a streaming request this runner writes the connection frame and the heartbeats
 * while the owner generates, then the owner's frames. `answerForwarded` is the owner's side: the same lookup,
 * decoding, generation and rendering, answered as one value that also names the owner's gateway. Once it is known,
 * the Group's requests take the direct hop (`OwnerRelay.ts`), decided in Node's request callback and run there
 * without a fiber (`relayDirect`): the body is read and relayed as it came to the owner's gateway, which answers it as
 * its own; a relayed request for a Session the owner does not hold is refused, never forwarded again, and the
 * relaying runner then sends it over the cluster. Both close the agent's connection after the answer once the owner
 * answered for the Session, so the client's next connection is spliced to the owner's gateway (`OwnerSplice.ts`,
 * before this route sees anything); the owner's answers on a spliced connection say so.
 */
import { Clock, Context, Duration, Effect, Exit, Fiber, Option, Result, Scheduler, type Scope } from "effect"
import { FindMyWay } from "effect/http"
import { randomBytes } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import * as ApiKey from "../../src/protocol/ApiKey.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import * as Completion from "../../src/protocol/Completion.ts"
import * as EchoBody from "../../src/protocol/EchoBody.ts"
import * as ErrorAnswer from "../../src/protocol/ErrorAnswer.ts"
import * as JsonBody from "../../src/protocol/JsonBody.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Responses from "../../src/protocol/Responses.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as Generation from "../generation/Generation.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import * as Sessions from "../schedule/Sessions.ts"
import * as Exchange from "./NodeExchange.ts"
import * as OwnerRelay from "./OwnerRelay.ts"
import * as OwnerSplice from "./OwnerSplice.ts"

/** The route prefix agents see in `RELAX_BASE_URL`. */
export const mountPath = "/agentic_api"

const protocolPaths = {
  chat: ["/chat/completions", "/v1/chat/completions"],
  responses: ["/responses", "/v1/responses"],
  messages: ["/messages", "/v1/messages"]
} as const

/** Every model path (each exists with and without `/v1`) and the protocol adapter it speaks. */
const modelPaths = [Chat.adapter, Responses.adapter, Messages.adapter].flatMap((adapter) =>
  protocolPaths[adapter.protocol].map((path) => ({ path: `${mountPath}${path}` as const, adapter }))
)

/** The model paths as spelled in the API (a request to one of them with another method gets a 405). */
export const paths: ReadonlySet<string> = new Set(modelPaths.map((route) => route.path))

/**
 * The model paths under the matcher of Effect's `HttpRouter` with its default configuration, the one the gateway's
 * router uses: a model POST is recognized exactly as the router would recognize it.
 */
const matcher = FindMyWay.make<Completion.Adapter>()
for (const { adapter, path } of modelPaths) matcher.on("POST", path, adapter)

/** The protocol adapter of a request to a model route, or `undefined` when it is not a `POST` on a model path. */
export const adapterOf = (method: string | undefined, url: string): Completion.Adapter | undefined =>
  method === "POST" ? matcher.find("POST", url)?.handler : undefined

/**
 * Cluster mode: how a model request for a Session held by another runner reaches that runner. Absent in
 * single-process mode, where an unknown Session is a 404.
 */
export interface ForwarderShape {
  /** The request as an entity call to the Session's Group; the owner's answer, or a 503 `runner_unavailable`. */
  readonly viaCluster: (
    request: ClusterWire.ForwardedRequest
  ) => Effect.Effect<ClusterWire.ForwardedResponse, ProtocolError.GatewayError>
  /** The origin of the owner's gateway once an answer over the cluster named it (the direct hop), else `undefined`. */
  readonly ownerOf: (sessionId: string) => string | undefined
  /**
   * The origin of the gateway that answered for this very Session (over the cluster or relayed), else `undefined`: a
   * new connection whose first request is for it is spliced there (`OwnerSplice.ts`). Per Session, not per Group, so
   * a Group placed again elsewhere under the same key is never spliced to its former owner.
   */
  readonly spliceTo: (sessionId: string) => string | undefined
  /** Whether agents' connections are spliced (`--gateway-splice`); when not, `spliceTo` names no owner. */
  readonly splicing: boolean
  /** A request for this Session was relayed to `origin` and answered there. */
  readonly answered: (sessionId: string, origin: string) => void
  /** The direct hop to `origin` did not work for this Session (`unreachable`: keep off that origin for a while). */
  readonly directFailed: (
    sessionId: string,
    origin: string,
    outcome: OwnerRelay.Outcome & { readonly _tag: "Fallback" }
  ) => Effect.Effect<void>
  readonly relay: OwnerRelay.Relay
}

export class Forwarder extends Context.Service<Forwarder, ForwarderShape>()("relax-agentic/gateway/Forwarder") {}

/** The model route's limits (every one has its default in the gateway's options). */
export interface Options {
  /** Interval of Buffered-SSE heartbeat frames while a generation is pending. */
  readonly heartbeatInterval: Duration.Duration
  /** Largest accepted request body in bytes; larger bodies get a 413. */
  readonly maxBodyBytes: number
  /** Deepest JSON nesting accepted in a request body; deeper is a 400. */
  readonly maxJsonDepth: number
}

/**
 * Offer a Node request to the model route: `true` when it is a model request, which the route then answers (the
 * caller does nothing more with it), `false` when it is not. `continuePending`: the request came as `checkContinue`
 * (`Expect: 100-continue`, no `100 Continue` sent yet).
 */
export type Handler = (request: IncomingMessage, response: ServerResponse, continuePending: boolean) => boolean

/** The model route's handler, serving on the context and in the scope of the effect that makes it. */
export const make = (
  options: Options
): Effect.Effect<Handler, never, Sessions.Sessions | Generation.Generation | Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<never>()
    const scope = yield* Effect.scope
    const env: RouteEnv = {
      ...options,
      sessions: yield* Sessions.Sessions,
      generation: yield* Generation.Generation,
      forward: Option.getOrUndefined(yield* Effect.serviceOption(Forwarder)),
      tracing: StepSpan.isTracingIn(context),
      run: (effect) => {
        Fiber.runIn(Effect.runForkWith(context)(effect), scope)
      }
    }
    // A request starts as a task of the scheduler, not inside Node's I/O callback (as `FairScheduler.continueAsTask`
    // explains): a wave of connections parsed in one poll phase then costs Node's parsing only.
    const dispatcher = Context.get(context, Scheduler.Scheduler).makeDispatcher()
    return (request, response, continuePending) => {
      const adapter = adapterOf(request.method, request.url ?? "")
      if (adapter === undefined) return false
      const http1 = request.httpVersionMajor === 1
      // A request another runner relayed here is counted there, where the agent sent it (once across the cluster).
      const counted = request.headers[OwnerRelay.forwardedHeader] === undefined
      if (http1 || counted) {
        // One listener for both; prepended so the body's teardown runs before Node's own `finish` listener drains or
        // destroys.
        response.prependListener("finish", () => {
          if (http1) Exchange.teardownBody(request, response)
          if (counted) Instruments.countRequest(adapter.protocol, response.statusCode, context)
        })
      }
      const ex = Exchange.exchange(request, response, continuePending)
      const forward = env.forward
      if (forward !== undefined && OwnerSplice.isSpliced(request.socket)) ex.answerHeaders = viaSplice
      const owner = forward === undefined ? undefined : directOwner(env.sessions, forward, request)
      if (forward !== undefined && owner !== undefined) {
        relayDirect(env, forward, adapter, ex, owner, context, (handoff) =>
          dispatcher.scheduleTask(() =>
            serveModel(env, adapter, ex, handoff), 0))
      } else {dispatcher.scheduleTask(() =>
          serveModel(env, adapter, ex), 0)}
      return true
    }
  })

// ---------------------------------------------------------------------------------------------------------------
// One request

const { "content-type": sseContentType, ...sseHeaders } = Sse.headers
const sseResponseHeaders = { ...sseHeaders, "content-type": sseContentType }

interface RouteEnv extends Options {
  readonly sessions: Sessions.Sessions["Service"]
  readonly generation: Generation.GenerationShape
  readonly forward: Forwarder["Service"] | undefined
  /** Whether a tracer is installed (StepSpan): then a request is the span `Gateway.handle`, its trace's root. */
  readonly tracing: boolean
  /**
   * Run one request's fiber on the gateway's context (its scheduler, clock, logger and tracer) in the gateway's
   * scope: a client that disconnects does not interrupt it, so a started generation completes and is committed.
   */
  readonly run: (effect: Effect.Effect<void>) => void
}

type Outcome = Exit.Exit<Completion.Completion, ProtocolError.GatewayError>

/** The `Gateway.handle` span's attributes per protocol (made once, not per request). */
const protocolAttributes: Readonly<Record<Sse.Protocol, Readonly<Record<string, unknown>>>> = {
  chat: { protocol: "chat" },
  responses: { protocol: "responses" },
  messages: { protocol: "messages" }
}

/** Where a request is when its client goes away; a 499 is logged for `body` and `completion`. */
type Phase = "head" | "body" | "completion" | "stream" | "answered"

/**
 * Log a 499: the client went away (`phase` says when). Nobody reads the answer any more, so the log line (with the
 * status and code the reference answers with) is what records it.
 */
const logDisconnect = (phase: "body" | "completion", detail = "") => {
  const error = ProtocolError.GatewayError.clientDisconnect(phase)
  return Effect.logWarning(`${error.message}${detail}`, { status: error.status, code: error.code })
}

/** Answer with an error in the protocol's shape (docs/requests.md, "Error bodies"). */
const sendError = (
  ex: Exchange.Exchange,
  adapter: Completion.Adapter,
  error: ProtocolError.AnyError,
  headers?: Readonly<Record<string, string>>
): void => {
  const answer = ErrorAnswer.render(adapter, error)
  Exchange.sendJson(
    ex,
    answer.status,
    answer.body,
    headers === undefined ? answer.headers : { ...answer.headers, ...headers }
  )
}

/** A failed generation as its HTTP error; a 500 is logged with the failure's message (the answer does not say it). */
const failGeneration = (error: Generation.GenerationError): Effect.Effect<never, ProtocolError.GatewayError> => {
  const answer = ProtocolError.GatewayError.fromGeneration(error)
  return answer.status === 500
    ? Effect.logError(`Agentic generation failed: ${error.message}`).pipe(Effect.andThen(Effect.fail(answer)))
    : Effect.fail(answer)
}

/** Read the body under the size limit; `undefined` when the client went away meanwhile (already logged). */
const readBody = (
  ex: Exchange.Exchange,
  env: RouteEnv,
  claimDisconnectLog: () => boolean,
  alreadyRead?: Exchange.BodyRead
): Effect.Effect<Result.Result<Uint8Array, ProtocolError.GatewayError> | undefined> =>
  Effect.suspend(() => {
    const declared = Number(ex.request.headers["content-length"] ?? Number.NaN)
    if (Number.isFinite(declared) && declared > env.maxBodyBytes) {
      return Effect.succeed(Result.fail(ProtocolError.GatewayError.bodyTooLarge(env.maxBodyBytes)))
    }
    // A body Node already holds is read at once, in this task (no suspension, no hop after it).
    const task = FairScheduler.currentTask()
    const at = alreadyRead ?? Exchange.readBuffered(ex, env.maxBodyBytes)
    const read = at !== undefined
      ? Effect.succeed(at)
      : Effect.callback<Exchange.BodyRead>((resume) =>
        Exchange.readBody(ex, env.maxBodyBytes, (read) => resume(Effect.succeed(read)))
      )
    return read.pipe(
      Effect.flatMap((read): Effect.Effect<Result.Result<Uint8Array, ProtocolError.GatewayError> | undefined> => {
        switch (read._tag) {
          case "TooLarge":
            return Effect.succeed(Result.fail(ProtocolError.GatewayError.bodyTooLarge(env.maxBodyBytes)))
          case "Aborted":
            return claimDisconnectLog() ? logDisconnect("body").pipe(Effect.as(undefined)) : Effect.succeed(undefined)
          case "Body":
            // A body that completed inside an I/O callback is parsed as a task.
            return task !== undefined && FairScheduler.currentTask() === task
              ? Effect.succeed(Result.succeed<Uint8Array>(read.bytes))
              : FairScheduler.continueAsTask.pipe(Effect.as(Result.succeed<Uint8Array>(read.bytes)))
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
const serveModel = (
  env: RouteEnv,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  handoff?: Handoff
): void => {
  let phase: Phase = "head"
  let logged = false
  /** Claims the one 499 log line of this request; false once it was claimed. */
  const claimDisconnectLog = (): boolean => {
    if (logged) return false
    logged = true
    return true
  }
  ex.response.once("close", () => {
    if (ex.response.writableEnded) return
    if (phase === "body" && claimDisconnectLog()) env.run(logDisconnect("body"))
    else if (phase === "completion" && claimDisconnectLog()) {
      env.run(logDisconnect("completion", "; the generation still completes and is committed"))
    }
  })
  /** Auth, body and decoding: the canonical request, or `undefined` once the client got its error. */
  const accept = Effect.gen(function*() {
    const token = ApiKey.parse(ex.request.headers)
    if (Result.isFailure(token)) return sendError(ex, adapter, token.failure)
    const session = yield* env.sessions.lookup(token.success).pipe(Effect.result)
    // Cluster mode: a request another runner relayed here is answered here or refused, never forwarded again.
    const relayed = env.forward !== undefined && ex.request.headers[OwnerRelay.forwardedHeader] !== undefined
    const remote = Result.isFailure(session) && env.forward !== undefined && !relayed &&
      Routing.groupKeyOf(token.success) !== undefined
    if (Result.isFailure(session) && !remote) {
      const closed = ProtocolError.GatewayError.sessionClosed(token.success)
      return relayed
        ? sendError(ex, adapter, closed, { [OwnerRelay.notOwnerHeader]: "1" })
        : sendError(ex, adapter, closed)
    }
    phase = "body"
    const body = yield* readBody(ex, env, claimDisconnectLog, handoff?.read)
    if (body === undefined) return sendError(ex, adapter, ProtocolError.GatewayError.clientDisconnect("body"))
    if (Result.isFailure(body)) return sendError(ex, adapter, body.failure)
    const bytes = body.success
    if (Result.isFailure(session)) {
      // Cluster mode: another runner holds this Session and the direct hop was not taken (or could not be used).
      return remoteRequest(env, adapter, ex, token.success, bytes)
    }
    // A Chat body that repeats the previous request's history byte for byte reuses its canonical messages
    // (src/protocol/RawEcho.ts) and is parsed without them (src/protocol/EchoBody.ts); the generation core checks the
    // reuse when matching. The scan runs before the body is parsed, and its mark is kept only for a body that decoded.
    const echo = adapter.protocol === "chat" && env.generation.echo !== undefined
      ? env.generation.echo(session.success, bytes)
      : undefined
    const decoded = EchoBody.decode(bytes, env.maxJsonDepth, echo?.known, adapter.decode)
    if (Result.isFailure(decoded)) return sendError(ex, adapter, decoded.failure)
    const canonical: Completion.CanonicalRequest = echo?.mark === undefined ? decoded.success : {
      ...decoded.success,
      echo: {
        mark: echo.mark,
        known: echo.known === undefined ? undefined : { state: echo.known.state, messages: echo.known.messages.length }
      }
    }
    return { kind: "local", session: session.success, canonical } as const
  })
  const handled = Effect.gen(function*() {
    const failed = handoff?.relayFailed
    if (failed !== undefined && env.forward !== undefined) {
      yield* env.forward.directFailed(failed.sessionId, failed.origin, failed.outcome)
    }
    // The parsed body is not held while the request waits: only the canonical request it decoded to.
    const accepted = yield* accept
    if (accepted === undefined) return
    const setPhase = (next: Phase) => {
      phase = next
    }
    if (accepted.kind === "remote" && env.forward !== undefined) {
      return yield* serveForwarded(
        env,
        env.forward,
        adapter,
        ex,
        accepted.remote,
        accepted.canonical.stream,
        setPhase
      )
    }
    if (accepted.kind !== "local") return
    const { session, canonical } = accepted
    // One request is one trace; it links to its Session's span (docs/observability.md, "Traces").
    if (env.tracing && session.span !== undefined) {
      yield* StepSpan.linkTo(session.span, { sessionId: session.sessionId })
    }
    const generation: Effect.Effect<Outcome> = env.generation.generate(session, canonical).pipe(
      Effect.catch(failGeneration),
      Effect.exit
    )

    if (!canonical.stream) {
      phase = "completion"
      const exit = yield* generation
      // The answer arrived in an I/O or promise callback: render and write it as a task; a client gone meanwhile is a 499.
      yield* FairScheduler.continueAsTask
      phase = "answered"
      if (Exit.isFailure(exit)) return sendError(ex, adapter, failureError(exit))
      const rendered = Result.try(() => JSON.stringify(adapter.renderJson(exit.value, canonical)))
      return Result.isFailure(rendered)
        ? sendError(ex, adapter, ProtocolError.GatewayError.internal("render"))
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
    // The answer arrived in an I/O or promise callback: render and write it as a task.
    yield* FairScheduler.continueAsTask
    yield* Fiber.interrupt(heartbeats)
    if (Exchange.writable(ex)) ex.response.end(Sse.encodeAll(renderTerminal(adapter, canonical, context, exit)))
  })
  env.run(StepSpan.spanIf(env.tracing, handled, "Gateway.handle", protocolAttributes[adapter.protocol]))
}

/**
 * A heartbeat frame every `interval` while the client is there. Each one is written as a task after its timer fired
 * (`continueAsTask`), so the heartbeats of thousands of held requests that fall due together are written in the
 * scheduler's slices, not in one long timer phase. One effect, built once per request, runs for every beat (no
 * schedule state per beat: 10,000 held requests write 10,000 heartbeats a second).
 */
const heartbeat = (ex: Exchange.Exchange, frame: string, interval: Duration.Duration): Effect.Effect<void> => {
  const beat = Effect.sleep(interval).pipe(
    Effect.andThen(FairScheduler.continueAsTask),
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

const failureError = (
  exit: Exit.Failure<Completion.Completion, ProtocolError.GatewayError>
): ProtocolError.GatewayError => {
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason !== undefined ? reason.error : ProtocolError.GatewayError.internal("request")
}

const renderTerminal = (
  adapter: Completion.Adapter,
  request: Completion.CanonicalRequest,
  context: Completion.FailureContext,
  exit: Outcome
): ReadonlyArray<Sse.SseFrame> => {
  if (Exit.isFailure(exit)) return adapter.renderSseError(failureError(exit), context)
  const frames = Result.try(() => adapter.renderSse(exit.value, request))
  return Result.isFailure(frames)
    ? adapter.renderSseError(ProtocolError.GatewayError.internal("render"), context)
    : frames.success
}

// ---------------------------------------------------------------------------------------------------------------
// Cluster mode: forwarding (docs/scale-out.md "One address for agents")

/**
 * Forward a request for another runner's Session and write the owner's answer: JSON as the owner rendered it; for a
 * streaming request, the connection frame and heartbeats from here while the owner generates, then its frames (an
 * owner's error, e.g. the `session_discarded` of a Session whose runner died, arrives as the protocol's SSE error).
 */
const serveForwarded = (
  env: RouteEnv,
  forward: ForwarderShape,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  request: ClusterWire.ForwardedRequest,
  stream: boolean,
  setPhase: (phase: Phase) => void
): Effect.Effect<void> =>
  Effect.gen(function*() {
    // A connection another runner spliced here for another Session is closed after this answer: the client's next
    // one is routed again (OwnerSplice.ts).
    if (OwnerSplice.isSpliced(ex.request.socket)) ex.closeAfter = true
    if (!stream) {
      setPhase("completion")
      const answer = yield* forward.viaCluster(request).pipe(Effect.result)
      setPhase("answered")
      // The owner's gateway is known now: the client's next connection is spliced there.
      if (spliceNext(forward, ex, request.sessionId)) ex.closeAfter = true
      if (Result.isFailure(answer)) return sendError(ex, adapter, answer.failure, viaCluster)
      return Exchange.sendJson(ex, answer.success.status, answer.success.body, {
        ...answer.success.headers,
        ...viaCluster
      })
    }
    setPhase("stream")
    const frames = sseFrames[adapter.protocol]
    if (spliceNext(forward, ex, request.sessionId)) ex.closeAfter = true
    if (Exchange.writable(ex)) {
      Exchange.writeHead(ex, 200, { ...sseResponseHeaders, ...viaCluster }, true)
      ex.response.write(frames.connected)
    }
    const heartbeats = yield* Effect.forkChild(heartbeat(ex, frames.heartbeat, env.heartbeatInterval))
    const answer = yield* forward.viaCluster(request).pipe(Effect.result)
    setPhase("answered")
    yield* Fiber.interrupt(heartbeats)
    if (!Exchange.writable(ex)) return
    // The owner renders a streaming request's errors as SSE frames too; its body is the rest of the stream.
    if (Result.isSuccess(answer)) return ex.response.end(answer.success.body)
    ex.response.end(Sse.encodeAll(adapter.renderSseError(answer.failure, yield* failureContext(""))))
  })

/**
 * Whether to close this agent's connection after the answer so its next one is spliced to the Session's owner: the
 * owner answered for the Session, and the connection is the agent's own (not a load balancer's, shared by Sessions).
 */
const spliceNext = (forward: ForwarderShape, ex: Exchange.Exchange, sessionId: string): boolean =>
  forward.spliceTo(sessionId) !== undefined && OwnerSplice.ownConnection(ex.request.headers)

const viaCluster = { [OwnerRelay.viaHeader]: "cluster" }
/** On the answers to requests on a connection another runner spliced here (OwnerSplice.ts). */
const viaSplice = { [OwnerRelay.viaHeader]: "spliced" }

/** The id and time of an answer that failed, as the error frames of a stream carry them. */
const failureContext = (model: string): Effect.Effect<Completion.FailureContext> =>
  Effect.map(Clock.currentTimeMillis, (now) => ({
    id: randomBytes(16).toString("hex"),
    created: Math.floor(now / 1000),
    model
  }))

/**
 * A request for another runner's Session, decoded here (a malformed request gets its 400 here) to be sent over the
 * cluster; `undefined` once the client got its 400.
 */
const remoteRequest = (
  env: RouteEnv,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  sessionId: string,
  body: Uint8Array
) => {
  const decoded = EchoBody.decode(body, env.maxJsonDepth, undefined, adapter.decode)
  if (Result.isFailure(decoded)) return sendError(ex, adapter, decoded.failure)
  return {
    kind: "remote",
    remote: { sessionId, path: ex.request.url ?? "", body },
    canonical: decoded.success
  } as const
}

/**
 * A request the direct hop handed over to the fiber path: its body as it was read, and, after a relay that could not
 * be used, why (the cluster then carries it).
 */
interface Handoff {
  readonly read: Exchange.BodyRead
  readonly relayFailed?: {
    readonly sessionId: string
    readonly origin: string
    readonly outcome: OwnerRelay.Outcome & { readonly _tag: "Fallback" }
  }
}

/**
 * Cluster mode: the owner's gateway for a request this runner should relay directly, decided in Node's request
 * callback: a Session id this runner does not hold, naming a Group whose owner's gateway is known, on a request that
 * is not itself relayed. `undefined`: the request takes the fiber path (a local Session, the cluster, or an error).
 */
const directOwner = (
  sessions: Sessions.SessionsShape,
  forward: ForwarderShape,
  request: IncomingMessage
): { readonly sessionId: string; readonly origin: string } | undefined => {
  if (request.headers[OwnerRelay.forwardedHeader] !== undefined) return undefined
  const token = ApiKey.parse(request.headers)
  if (Result.isFailure(token)) return undefined
  // A known owner first (a map read): a Session held here is then not digested twice (here and in its lookup).
  const origin = forward.ownerOf(token.success)
  return origin === undefined || sessions.holds(token.success) ? undefined : { sessionId: token.success, origin }
}

/**
 * The direct hop, without a fiber: read the body (a declared length over the limit, a body over it or a client gone
 * goes to the fiber path, which answers or logs it as for any request), relay it to the owner's gateway and pipe its
 * answer. The owner answers everything else, its errors and its disconnect log included. A relay that could not be
 * used (the owner does not hold the Session, or its gateway cannot be reached) is handed over with its body.
 */
const relayDirect = (
  env: RouteEnv,
  forward: ForwarderShape,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  owner: { readonly sessionId: string; readonly origin: string },
  context: Context.Context<never>,
  handOver: (handoff?: Handoff) => void
): void => {
  const declared = Number(ex.request.headers["content-length"] ?? Number.NaN)
  if (Number.isFinite(declared) && declared > env.maxBodyBytes) return handOver()
  Exchange.readBody(ex, env.maxBodyBytes, (read) => {
    if (read._tag !== "Body") return handOver({ read })
    const now = Context.get(context, Clock.Clock).currentTimeMillisUnsafe()
    // The client's next connection is routed again: spliced to the owner once it answered for this Session.
    ex.closeAfter = forward.splicing && OwnerSplice.ownConnection(ex.request.headers)
    forward.relay.start(ex, owner.origin, read.bytes, brokenRelay(env, adapter, ex, read.bytes, now), (outcome) => {
      if (outcome._tag === "Fallback") {
        handOver({ read, relayFailed: { sessionId: owner.sessionId, origin: owner.origin, outcome } })
      } else forward.answered(owner.sessionId, owner.origin)
    })
  })
}

/** What the direct hop writes when the owner's connection fails after the request was sent. */
const brokenRelay = (
  env: RouteEnv,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  body: Uint8Array,
  now: number
): OwnerRelay.Broken => {
  const error = ProtocolError.GatewayError.runnerUnavailable("its connection was lost while it answered")
  return {
    beforeHeaders: () => sendError(ex, adapter, error),
    sseTail: () => {
      const decoded = EchoBody.decode(body, env.maxJsonDepth, undefined, adapter.decode)
      const context: Completion.FailureContext = {
        id: randomBytes(16).toString("hex"),
        created: Math.floor(now / 1000),
        model: Result.isSuccess(decoded) ? decoded.success.model : ""
      }
      return Sse.encodeAll(adapter.renderSseError(error, context))
    }
  }
}

const jsonAnswer = (
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {}
): ClusterWire.ForwardedResponse => ({
  kind: "json",
  status,
  headers: { ...headers },
  body: JSON.stringify(body)
})

/**
 * The owner's side of a forwarded request: lookup (an unknown Session — one whose runner died — is the 404
 * `session_discarded`, never re-created), decoding, generation and rendering, exactly as `serveModel` does, answered
 * as one value instead of written to a socket (Buffered SSE: the terminal frames only).
 */
export const answerForwarded = (
  options: Pick<Options, "maxJsonDepth"> & {
    /** This runner's gateway origin as the other runners reach it, named in the answers for a Session held here. */
    readonly gateway?: string | undefined
  }
): Effect.Effect<
  (request: ClusterWire.ForwardedRequest) => Effect.Effect<ClusterWire.ForwardedResponse>,
  never,
  Sessions.Sessions | Generation.Generation
> =>
  Effect.gen(function*() {
    const sessions = yield* Sessions.Sessions
    const generation = yield* Generation.Generation
    return (request) =>
      Effect.gen(function*() {
        const adapter = adapterOf("POST", request.path)
        if (adapter === undefined) {
          return jsonAnswer(404, { error: { message: `no model route ${request.path}`, type: "not_found_error" } })
        }
        const error = (e: ProtocolError.AnyError) => {
          const answer = ErrorAnswer.render(adapter, e)
          return { kind: "json", status: answer.status, headers: { ...answer.headers }, body: answer.body } as const
        }
        // The forwarding runner decoded this body already (a malformed request got its 400 there).
        const body = JsonBody.parseObject(request.body, options.maxJsonDepth)
        if (Result.isFailure(body)) return error(body.failure)
        const decoded = adapter.decode(body.success)
        if (Result.isFailure(decoded)) return error(decoded.failure)
        const canonical = decoded.success
        const context: Completion.FailureContext = {
          id: randomBytes(16).toString("hex"),
          created: Math.floor((yield* Clock.currentTimeMillis) / 1000),
          model: canonical.model
        }
        const session = yield* sessions.lookup(request.sessionId).pipe(Effect.result)
        if (Result.isFailure(session)) {
          const discarded = ProtocolError.GatewayError.sessionClosed(request.sessionId)
          return canonical.stream
            ? { kind: "sse", status: 200, headers: {}, body: Sse.encodeAll(adapter.renderSseError(discarded, context)) }
            : error(discarded)
        }
        const exit: Outcome = yield* generation.generate(session.success, canonical).pipe(
          Effect.catch(failGeneration),
          Effect.exit
        )
        // The Session is held here: the answer names this gateway, so the Group's next requests take the direct hop.
        const owner = options.gateway === undefined ? {} : { gateway: options.gateway }
        if (!canonical.stream) {
          if (Exit.isFailure(exit)) return { ...error(failureError(exit)), ...owner }
          const rendered = Result.try(() => JSON.stringify(adapter.renderJson(exit.value, canonical)))
          return Result.isFailure(rendered)
            ? { ...error(ProtocolError.GatewayError.internal("render")), ...owner }
            : {
              kind: "json",
              status: 200,
              headers: {},
              body: rendered.success,
              ...owner
            } satisfies ClusterWire.ForwardedResponse
        }
        return {
          kind: "sse",
          status: 200,
          headers: {},
          body: Sse.encodeAll(renderTerminal(adapter, canonical, context, exit)),
          ...owner
        } satisfies ClusterWire.ForwardedResponse
      })
  })
