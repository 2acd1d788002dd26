/**
 * The gateway's one port for scale-out (docs/scale-out.md "One address for agents"): a runner of a cluster serves
 * here the model requests for Sessions another runner holds, and routes new connections before the HTTP server reads
 * them. The gateway knows nothing of the cluster; absent this service (single-process mode) the request path is
 * gateway → generation → engine and a Session this process does not hold is a 404.
 *
 * **Details**
 * The implementation lives in `layers/cluster/` (`Forward.ts`). It is offered every model request in Node's request
 * callback, before the gateway reads anything, and answers the ones it takes with the gateway's own writers
 * (`Answer.ts`); a request it leaves is served by the model route as any other.
 */
import { Context, type Effect } from "effect"
import type { IncomingMessage } from "node:http"
import type { Socket } from "node:net"
import type * as Completion from "../../src/protocol/Completion.ts"
import type * as ModelRoute from "./ModelRoute.ts"
import type * as Exchange from "./NodeExchange.ts"

/** What the model route lends the forwarder, once per gateway. */
export interface RouteAccess {
  readonly options: ModelRoute.Options
  /** Whether this process holds the Session of `token` (a map read). */
  readonly holds: (token: string) => boolean
  /** Serve the request here as any other model request; `read`: its body, when it was read already. */
  readonly serveHere: (ex: Exchange.Exchange, adapter: Completion.Adapter, read?: Exchange.BodyRead) => void
  /**
   * Run a request's effect as the route runs its own: as a task of the gateway's scheduler, on its context (clock,
   * logger, tracer) and in its scope (a client's disconnect does not interrupt it), as the span `Gateway.handle`.
   */
  readonly handle: (adapter: Completion.Adapter, effect: Effect.Effect<void>) => void
  /** The gateway clock's time (ms). */
  readonly now: () => number
  /** Run an effect on the gateway's context and in its scope, from a Node callback. */
  readonly run: (effect: Effect.Effect<void>) => void
}

/** A model request offered in Node's request callback: `true` when the forwarder took it (and answers it). */
export type Offer = (ex: Exchange.Exchange, adapter: Completion.Adapter) => boolean

/** Routes a new connection before the HTTP server reads it. */
export interface ConnectionRouter {
  /** Route `socket`; `serve` hands it (with what was read put back) to the gateway's HTTP server. */
  readonly accept: (socket: Socket, serve: (socket: Socket) => void) => void
  /** Close every connection this router took (the gateway closes). */
  readonly closeAll: () => void
}

export interface ForwarderShape {
  /** Whether this process counts the request in its metrics (one another runner relayed here is counted there). */
  readonly counts: (request: IncomingMessage) => boolean
  /** The model route's hook, made once per gateway. */
  readonly route: (access: RouteAccess) => Offer
  /** The gateway's connection router, made once per gateway; `holds` as in {@link RouteAccess}. */
  readonly connections: (
    maxHeadBytes: number,
    holds: (token: string) => boolean,
    run: (effect: Effect.Effect<void>) => void
  ) => ConnectionRouter
}

export class Forwarder extends Context.Service<Forwarder, ForwarderShape>()("relax-agentic/Forwarder") {}
