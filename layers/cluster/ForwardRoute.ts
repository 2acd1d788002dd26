/**
 * The gateway's `Forwarder` port on a runner (docs/scale-out.md "One address for agents"): a model request for a
 * Session another runner holds, whose id names a Group (`src/cluster/Routing.ts`), goes to the runner holding it.
 *
 * **Details**
 * The first requests of a Group go over the cluster (`Transport.viaCluster`): decoded here (a malformed request gets
 * its 400 from this runner), sent as an entity call; for a streaming request this runner writes the connection frame
 * and the heartbeats while the owner generates, then the owner's frames. Once the owner's gateway is known, the
 * Group's requests take the direct hop (`OwnerRelay.ts`), decided in Node's request callback and run there without a
 * fiber: the body is read and relayed as it came to the owner's gateway, which answers it as its own; a relayed
 * request for a Session the owner does not hold is refused there, never forwarded again, and this runner then sends it
 * over the cluster. Both close the agent's connection after the answer once the owner answered for the Session, so
 * the client's next connection is spliced to the owner's gateway (`OwnerSplice.ts`, the port's connection router,
 * before the gateway sees anything); the owner's answers on a spliced connection say so.
 */
import { Effect, Fiber, Result } from "effect"
import { randomBytes } from "node:crypto"
import type { IncomingMessage } from "node:http"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import * as ApiKey from "../../src/protocol/ApiKey.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as EchoBody from "../../src/protocol/EchoBody.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as Answer from "../gateway/Answer.ts"
import * as Forwarder from "../gateway/Forwarder.ts"
import * as Exchange from "../gateway/NodeExchange.ts"
import * as OwnerRelay from "./OwnerRelay.ts"
import * as OwnerSplice from "./OwnerSplice.ts"

/** How a request for another runner's Session reaches that runner (`Forward.ts` over the cluster). */
export interface Transport {
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

const viaCluster = { [OwnerRelay.viaHeader]: "cluster" }
/** On the answers to requests on a connection another runner spliced here (OwnerSplice.ts). */
const viaSplice = { [OwnerRelay.viaHeader]: "spliced" }

/** The gateway's port over `transport`. */
export const port = (transport: Transport): Forwarder.ForwarderShape => ({
  // A request another runner relayed here is counted there, where the agent sent it (once across the cluster).
  counts: (request: IncomingMessage) => request.headers[OwnerRelay.forwardedHeader] === undefined,
  route: (access) => (ex, adapter) => {
    if (OwnerSplice.isSpliced(ex.request.socket)) ex.answerHeaders = viaSplice
    const token = ApiKey.parse(ex.request.headers)
    // No key: the gateway answers its 401; a Session held here: served here.
    if (Result.isFailure(token) || access.holds(token.success)) return false
    const sessionId = token.success
    if (ex.request.headers[OwnerRelay.forwardedHeader] !== undefined) {
      // Relayed here by another runner: answered here or refused, never forwarded again (the relaying runner then
      // asks the cluster).
      access.handle(
        adapter,
        Effect.sync(() =>
          Answer.sendError(ex, adapter, ProtocolError.GatewayError.sessionClosed(sessionId), {
            [OwnerRelay.notOwnerHeader]: "1"
          })
        )
      )
      return true
    }
    if (Routing.groupKeyOf(sessionId) === undefined) return false
    const origin = transport.ownerOf(sessionId)
    if (origin === undefined) {
      access.handle(adapter, serveForwarded(access, transport, adapter, ex, sessionId))
      return true
    }
    relayDirect(access, transport, adapter, ex, { sessionId, origin }, (read, failed) => {
      // A Session held here after all is served here; any other goes over the cluster.
      if (access.holds(sessionId)) {
        access.run(transport.directFailed(failed.sessionId, failed.origin, failed.outcome))
        return access.serveHere(ex, adapter, read)
      }
      access.handle(
        adapter,
        Effect.andThen(
          transport.directFailed(failed.sessionId, failed.origin, failed.outcome),
          serveForwarded(access, transport, adapter, ex, sessionId, read)
        )
      )
    }, (read) => access.handle(adapter, serveForwarded(access, transport, adapter, ex, sessionId, read)))
    return true
  },
  connections: (maxHeadBytes, holds, run) =>
    OwnerSplice.make(
      (key) => holds(key) ? undefined : transport.spliceTo(key),
      (key, origin, detail) =>
        run(transport.directFailed(key, origin, { _tag: "Fallback", reason: "unreachable", detail })),
      maxHeadBytes
    )
})

/**
 * Whether to close this agent's connection after the answer so its next one is spliced to the Session's owner: the
 * owner answered for the Session, and the connection is the agent's own (not a load balancer's, shared by Sessions).
 */
const spliceNext = (transport: Transport, ex: Exchange.Exchange, sessionId: string): boolean =>
  transport.spliceTo(sessionId) !== undefined && OwnerSplice.ownConnection(ex.request.headers)

/**
 * Read and decode a request for another runner's Session (a malformed request gets its 400 here), forward it over the
 * cluster and write the owner's answer: JSON as the owner rendered it; for a streaming request, the connection frame
 * and heartbeats from here while the owner generates, then its frames (an owner's error, e.g. the
 * `session_discarded` of a Session whose runner died, arrives as the protocol's SSE error).
 */
const serveForwarded = (
  access: Forwarder.RouteAccess,
  transport: Transport,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  sessionId: string,
  read?: Exchange.BodyRead
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const phase = Answer.watchDisconnect(ex, access.run)
    phase.set("body")
    const body = yield* Answer.readBody(ex, access.options.maxBodyBytes, phase.claim, read)
    if (body === undefined) return Answer.sendError(ex, adapter, ProtocolError.GatewayError.clientDisconnect("body"))
    if (Result.isFailure(body)) return Answer.sendError(ex, adapter, body.failure)
    const decoded = EchoBody.decode(body.success, access.options.maxJsonDepth, undefined, adapter.decode)
    if (Result.isFailure(decoded)) return Answer.sendError(ex, adapter, decoded.failure)
    const request: ClusterWire.ForwardedRequest = { sessionId, path: ex.request.url ?? "", body: body.success }
    // A connection another runner spliced here for another Session is closed after this answer: the client's next
    // one is routed again (OwnerSplice.ts).
    if (OwnerSplice.isSpliced(ex.request.socket)) ex.closeAfter = true
    if (!decoded.success.stream) {
      phase.set("completion")
      const answer = yield* transport.viaCluster(request).pipe(Effect.result)
      phase.set("answered")
      // The owner's gateway is known now: the client's next connection is spliced there.
      if (spliceNext(transport, ex, sessionId)) ex.closeAfter = true
      if (Result.isFailure(answer)) return Answer.sendError(ex, adapter, answer.failure, viaCluster)
      return Exchange.sendJson(ex, answer.success.status, answer.success.body, {
        ...answer.success.headers,
        ...viaCluster
      })
    }
    phase.set("stream")
    const frames = Answer.sseFrames[adapter.protocol]
    if (spliceNext(transport, ex, sessionId)) ex.closeAfter = true
    if (Exchange.writable(ex)) {
      Exchange.writeHead(ex, 200, { ...Answer.sseResponseHeaders, ...viaCluster }, true)
      ex.response.write(frames.connected)
    }
    const heartbeats = yield* Effect.forkChild(
      Answer.heartbeat(ex, frames.heartbeat, access.options.heartbeatInterval)
    )
    const answer = yield* transport.viaCluster(request).pipe(Effect.result)
    phase.set("answered")
    yield* Fiber.interrupt(heartbeats)
    if (!Exchange.writable(ex)) return
    // The owner renders a streaming request's errors as SSE frames too; its body is the rest of the stream.
    if (Result.isSuccess(answer)) return ex.response.end(answer.success.body)
    ex.response.end(Sse.encodeAll(adapter.renderSseError(answer.failure, yield* Answer.failureContext(""))))
  })

/**
 * The direct hop, without a fiber: read the body (a declared length over the limit, a body over it or a client gone
 * is handed to `fiberPath`, which answers or logs it as for any request), relay it to the owner's gateway and pipe its
 * answer. The owner answers everything else, its errors and its disconnect log included. A relay that could not be
 * used (the owner does not hold the Session, or its gateway cannot be reached) is handed to `fallback` with its body.
 */
const relayDirect = (
  access: Forwarder.RouteAccess,
  transport: Transport,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  owner: { readonly sessionId: string; readonly origin: string },
  fallback: (
    read: Exchange.BodyRead,
    failed: {
      readonly sessionId: string
      readonly origin: string
      readonly outcome: OwnerRelay.Outcome & { readonly _tag: "Fallback" }
    }
  ) => void,
  fiberPath: (read?: Exchange.BodyRead) => void
): void => {
  const declared = Number(ex.request.headers["content-length"] ?? Number.NaN)
  if (Number.isFinite(declared) && declared > access.options.maxBodyBytes) return fiberPath()
  Exchange.readBody(ex, access.options.maxBodyBytes, (read) => {
    if (read._tag !== "Body") return fiberPath(read)
    // The client's next connection is routed again: spliced to the owner once it answered for this Session.
    ex.closeAfter = transport.splicing && OwnerSplice.ownConnection(ex.request.headers)
    transport.relay.start(ex, owner.origin, read.bytes, brokenRelay(access, adapter, ex, read.bytes), (outcome) => {
      if (outcome._tag === "Fallback") fallback(read, { sessionId: owner.sessionId, origin: owner.origin, outcome })
      else transport.answered(owner.sessionId, owner.origin)
    })
  })
}

/** What the direct hop writes when the owner's connection fails after the request was sent. */
const brokenRelay = (
  access: Forwarder.RouteAccess,
  adapter: Completion.Adapter,
  ex: Exchange.Exchange,
  body: Uint8Array
): OwnerRelay.Broken => {
  const error = ProtocolError.GatewayError.runnerUnavailable("its connection was lost while it answered")
  return {
    beforeHeaders: () => Answer.sendError(ex, adapter, error),
    sseTail: () => {
      const decoded = EchoBody.decode(body, access.options.maxJsonDepth, undefined, adapter.decode)
      const context: Completion.FailureContext = {
        id: randomBytes(16).toString("hex"),
        created: Math.floor(access.now() / 1000),
        model: Result.isSuccess(decoded) ? decoded.success.model : ""
      }
      return Sse.encodeAll(adapter.renderSseError(error, context))
    }
  }
}
