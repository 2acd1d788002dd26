/**
 * The owner's side of a forwarded model request (docs/scale-out.md "One address for agents"): another runner's
 * gateway sent it over the cluster (`ForwardRoute.ts`), and this runner answers it as its gateway answers a request
 * sent to it directly, as one value instead of written to a socket.
 */
import { Clock, Effect, Exit, identity, Option, Result } from "effect"
import { randomBytes } from "node:crypto"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as ErrorAnswer from "../../src/protocol/ErrorAnswer.ts"
import * as JsonBody from "../../src/protocol/JsonBody.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as Received from "../../src/replay/Received.ts"
import * as Answer from "../gateway/Answer.ts"
import * as ModelRoute from "../gateway/ModelRoute.ts"
import * as Generation from "../generation/Generation.ts"
import * as ReplayRecorder from "../generation/ReplayRecorder.ts"
import * as Sessions from "../schedule/Sessions.ts"

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
 * `session_discarded`, never re-created), decoding, generation and rendering, exactly as the model route does, answered
 * as one value instead of written to a socket (Buffered SSE: the terminal frames only).
 */
export const make = (
  options: Pick<ModelRoute.Options, "maxJsonDepth"> & {
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
    // With debug dumps, the body and the answer go into the Session's replay record, as the model route's do.
    const recording = Option.isSome(yield* Effect.serviceOption(ReplayRecorder.ReplayRecorder))
    return (request) =>
      Effect.gen(function*() {
        const adapter = ModelRoute.adapterOf("POST", request.path)
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
        const exchange = recording ? ReplayRecorder.exchangeOf(request.body) : undefined
        const exit: Answer.Outcome = yield* generation.generate(session.success, canonical).pipe(
          exchange === undefined ? identity : Effect.provideService(ReplayRecorder.CurrentExchange, exchange),
          Effect.catch(Answer.failGeneration),
          Effect.exit
        )
        // The Session is held here: the answer names this gateway, so the Group's next requests take the direct hop.
        const owner = options.gateway === undefined ? {} : { gateway: options.gateway }
        if (!canonical.stream) {
          const rendered = Exit.isFailure(exit)
            ? Result.fail(Answer.failureError(exit))
            : Result.try({
              try: () => JSON.stringify(adapter.renderJson(exit.value, canonical)),
              catch: () => ProtocolError.GatewayError.internal("render")
            })
          const answer = Result.isFailure(rendered)
            ? error(rendered.failure)
            : { kind: "json", status: 200, headers: {}, body: rendered.success } as const
          exchange?.answered?.(Received.ofJson(answer.status, answer.body))
          return { ...answer, ...owner } satisfies ClusterWire.ForwardedResponse
        }
        const frames = Answer.renderTerminal(adapter, canonical, context, exit)
        exchange?.answered?.(Received.ofFrames(200, frames))
        return {
          kind: "sse",
          status: 200,
          headers: {},
          body: Sse.encodeAll(frames),
          ...owner
        } satisfies ClusterWire.ForwardedResponse
      })
  })
