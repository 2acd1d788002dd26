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
 * A cluster's runner offers every model request to the gateway's `Forwarder` port first (`Forwarder.ts`,
 * implemented in `layers/cluster/`): it takes the ones for Sessions another runner holds. Without it (single-process
 * mode) a request's path is this route → generation → engine, and a Session this process does not hold is a 404.
 */
import { Clock, Context, Duration, Effect, Exit, Fiber, identity, Option, Result, Scheduler, type Scope } from "effect"
import { FindMyWay } from "effect/http"
import { randomBytes } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import * as ApiKey from "../../src/protocol/ApiKey.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import * as Completion from "../../src/protocol/Completion.ts"
import * as EchoBody from "../../src/protocol/EchoBody.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Responses from "../../src/protocol/Responses.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as Received from "../../src/replay/Received.ts"
import * as Generation from "../generation/Generation.ts"
import * as ReplayRecorder from "../generation/ReplayRecorder.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import * as Sessions from "../schedule/Sessions.ts"
import * as Answer from "./Answer.ts"
import * as Forwarder from "./Forwarder.ts"
import * as HeartbeatWheel from "./HeartbeatWheel.ts"
import * as LeaseParking from "./LeaseParking.ts"
import * as Exchange from "./NodeExchange.ts"

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
    const run = (effect: Effect.Effect<void>) => {
      Fiber.runIn(Effect.runForkWith(context)(effect), scope)
    }
    // A request starts as a task of the scheduler, not inside Node's I/O callback (as `FairScheduler.continueAsTask`
    // explains): a wave of connections parsed in one poll phase then costs Node's parsing only.
    const dispatcher = Context.get(context, Scheduler.Scheduler).makeDispatcher()
    const generation = yield* Generation.Generation
    const tracing = StepSpan.isTracingIn(context)
    const recording = Option.isSome(yield* Effect.serviceOption(ReplayRecorder.ReplayRecorder))
    const env: RouteEnv = {
      ...options,
      sessions: yield* Sessions.Sessions,
      generation,
      tracing,
      recording,
      run,
      heartbeats: HeartbeatWheel.make(options.heartbeatInterval, run),
      parking: {
        generation,
        inOneFiber: tracing || recording,
        run,
        schedule: (task) => dispatcher.scheduleTask(task, 0)
      }
    }
    const forwarder = Option.getOrUndefined(yield* Effect.serviceOption(Forwarder.Forwarder))
    const offer = forwarder?.route({
      options,
      holds: env.sessions.holds,
      serveHere: (ex, adapter, read) => dispatcher.scheduleTask(() => serveModel(env, adapter, ex, read), 0),
      handle: (adapter, effect) => dispatcher.scheduleTask(() => env.run(handleSpan(env, adapter, effect)), 0),
      now: () => Context.get(context, Clock.Clock).currentTimeMillisUnsafe(),
      run: env.run
    })
    return (request, response, continuePending) => {
      const adapter = adapterOf(request.method, request.url ?? "")
      if (adapter === undefined) return false
      const http1 = request.httpVersionMajor === 1
      const counted = forwarder === undefined || forwarder.counts(request)
      if (http1 || counted) {
        // One listener for both; prepended so the body's teardown runs before Node's own `finish` listener drains or
        // destroys.
        response.prependListener("finish", () => {
          if (http1) Exchange.teardownBody(request, response)
          if (counted) Instruments.countRequest(adapter.protocol, response.statusCode, context)
        })
      }
      const ex = Exchange.exchange(request, response, continuePending)
      if (offer === undefined || !offer(ex, adapter)) dispatcher.scheduleTask(() => serveModel(env, adapter, ex), 0)
      return true
    }
  })

// ---------------------------------------------------------------------------------------------------------------
// One request

interface RouteEnv extends Options {
  readonly sessions: Sessions.Sessions["Service"]
  readonly generation: Generation.GenerationShape
  /** Whether a tracer is installed (StepSpan): then a request is the span `Gateway.handle`, its trace's root. */
  readonly tracing: boolean
  /** Whether requests are recorded for replay (debug dumps): the body and the answer go to the recorder. */
  readonly recording: boolean
  /**
   * Run one request's fiber on the gateway's context (its scheduler, clock, logger and tracer) in the gateway's
   * scope: a client that disconnects does not interrupt it, so a started generation completes and is committed.
   */
  readonly run: (effect: Effect.Effect<void>) => void
  /** The held Buffered-SSE requests' heartbeats, written from one timer. */
  readonly heartbeats: HeartbeatWheel.HeartbeatWheel
  /** How a request waiting for its lease waits (LeaseParking.ts). */
  readonly parking: LeaseParking.Parking
}

/** The `Gateway.handle` span's attributes per protocol (made once, not per request). */
const protocolAttributes: Readonly<Record<Sse.Protocol, Readonly<Record<string, unknown>>>> = {
  chat: { protocol: "chat" },
  responses: { protocol: "responses" },
  messages: { protocol: "messages" }
}

/** A request's effect as the span `Gateway.handle` (its trace's root) when a tracer is installed. */
const handleSpan = (env: RouteEnv, adapter: Completion.Adapter, effect: Effect.Effect<void>): Effect.Effect<void> =>
  StepSpan.spanIf(env.tracing, effect, "Gateway.handle", protocolAttributes[adapter.protocol])

/**
 * One model request: authenticate (before the body is read, so an unauthenticated caller learns nothing about request
 * validity) → read the body under a size limit → decode the protocol → generate → answer JSON, or Buffered SSE: the
 * protocol's connection frame at once, a heartbeat every `heartbeatInterval` until the generation ends, then the
 * terminal frames. The generation runs in this request's fiber, which a disconnect does not interrupt: a client that
 * goes away loses only the answer; the response is still committed to its SessionForest. `read`: the body, when the
 * `Forwarder` read it already (a request it handed back).
 */
const serveModel = (
  env: RouteEnv,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  read?: Exchange.BodyRead
): void => {
  const phase = Answer.watchDisconnect(ex, env.run)
  /** Auth, body and decoding: the canonical request, or `undefined` once the client got its error. */
  const accept = Effect.gen(function*() {
    const token = ApiKey.parse(ex.request.headers)
    if (Result.isFailure(token)) return Answer.sendError(ex, adapter, token.failure)
    const session = yield* env.sessions.lookup(token.success).pipe(Effect.result)
    if (Result.isFailure(session)) {
      return Answer.sendError(ex, adapter, ProtocolError.GatewayError.sessionClosed(token.success))
    }
    phase.set("body")
    const body = yield* Answer.readBody(ex, env.maxBodyBytes, phase.claim, read)
    if (body === undefined) return Answer.sendError(ex, adapter, ProtocolError.GatewayError.clientDisconnect("body"))
    if (Result.isFailure(body)) return Answer.sendError(ex, adapter, body.failure)
    const bytes = body.success
    // A Chat body that repeats the previous request's history byte for byte reuses its canonical messages
    // (src/protocol/RawEcho.ts) and is parsed without them (src/protocol/EchoBody.ts); the generation core checks the
    // reuse when matching. The scan runs before the body is parsed, and its mark is kept only for a body that decoded.
    const echo = adapter.protocol === "chat" && env.generation.echo !== undefined
      ? env.generation.echo(session.success, bytes)
      : undefined
    const decoded = EchoBody.decode(bytes, env.maxJsonDepth, echo?.known, adapter.decode)
    if (Result.isFailure(decoded)) return Answer.sendError(ex, adapter, decoded.failure)
    // A large body's copy, scan and parse were milliseconds of this task: the generation goes on in the next.
    if (bytes.length >= Answer.LARGE_BODY_BYTES) yield* FairScheduler.continueAsTask
    const canonical: Completion.CanonicalRequest = echo?.mark === undefined ? decoded.success : {
      ...decoded.success,
      echo: {
        mark: echo.mark,
        known: echo.known === undefined ? undefined : { state: echo.known.state, messages: echo.known.messages.length }
      }
    }
    const exchange = env.recording ? ReplayRecorder.exchangeOf(bytes) : undefined
    return { session: session.success, canonical, exchange } as const
  })
  const handled = Effect.gen(function*() {
    // The parsed body is not held while the request waits: only the canonical request it decoded to.
    const accepted = yield* accept
    if (accepted === undefined) return
    const { session, canonical, exchange } = accepted
    // One request is one trace; it links to its Session's span (docs/observability.md, "Traces").
    if (env.tracing && session.span !== undefined) {
      yield* StepSpan.linkTo(session.span, { sessionId: session.sessionId })
    }
    const outcome = (
      generation: Effect.Effect<Completion.Completion, Generation.GenerationError>
    ): Effect.Effect<Answer.Outcome> =>
      generation.pipe(
        exchange === undefined ? identity : Effect.provideService(ReplayRecorder.CurrentExchange, exchange),
        Effect.catch(Answer.failGeneration),
        Effect.exit
      )

    if (!canonical.stream) {
      phase.set("completion")
      const answer = function*(generation: Effect.Effect<Completion.Completion, Generation.GenerationError>) {
        const exit = yield* outcome(generation)
        // The answer arrived in an I/O or promise callback: render and write it as a task; a client gone meanwhile is a 499.
        yield* FairScheduler.continueAsTask
        phase.set("answered")
        if (Exit.isFailure(exit)) return Answer.sendError(ex, adapter, Answer.failureError(exit), undefined, exchange)
        const rendered = Result.try(() => JSON.stringify(adapter.renderJson(exit.value, canonical)))
        if (Result.isFailure(rendered)) {
          return Answer.sendError(ex, adapter, ProtocolError.GatewayError.internal("render"), undefined, exchange)
        }
        exchange?.answered?.(Received.ofJson(200, rendered.success))
        return Exchange.sendJson(ex, 200, rendered.success)
      }
      // Nothing to wait for (a lease held, as for every turn after a Group's first): the answer runs inline, in this
      // generator, as before parking (a generator and a fiber step fewer a request).
      if (!LeaseParking.parks(env.parking, session)) return yield* answer(env.generation.generate(session, canonical))
      // A request waiting for its lease waits parked (LeaseParking.ts): this fiber ends, the answer runs later.
      return yield* LeaseParking.generate(
        env.parking,
        session,
        canonical,
        (generation) => Effect.gen(() => answer(generation))
      )
    }

    const context: Completion.FailureContext = {
      id: randomBytes(16).toString("hex"),
      created: Math.floor((yield* Clock.currentTimeMillis) / 1000),
      model: canonical.model
    }
    phase.set("stream")
    if (!Exchange.writable(ex)) {
      // Nobody reads the frames; the generation still completes and is committed.
      return yield* LeaseParking.generate(
        env.parking,
        session,
        canonical,
        (generation) => Effect.asVoid(outcome(generation))
      )
    }
    Exchange.writeHead(ex, 200, Answer.sseResponseHeaders, true)
    const frames = Answer.sseFrames[adapter.protocol]
    ex.response.write(frames.connected)
    const stopHeartbeats = env.heartbeats.add(() => {
      if (!Exchange.writable(ex)) return false
      Exchange.writeNow(ex, frames.heartbeat)
      return true
    })
    const answered = LeaseParking.generate(env.parking, session, canonical, (generation) =>
      Effect.gen(function*() {
        const exit = yield* Effect.ensuring(outcome(generation), Effect.sync(stopHeartbeats))
        phase.set("answered")
        // The answer arrived in an I/O or promise callback: render and write it as a task.
        yield* FairScheduler.continueAsTask
        if (Exchange.writable(ex)) {
          const terminal = Answer.renderTerminal(adapter, canonical, context, exit)
          exchange?.answered?.(Received.ofFrames(200, terminal))
          ex.response.end(Sse.encodeAll(terminal))
        }
      }))
    // Interrupted before the generation reached the answer (the gateway's scope closing): no more heartbeats.
    return yield* Effect.onInterrupt(answered, () => Effect.sync(stopHeartbeats))
  })
  env.run(handleSpan(env, adapter, handled))
}
