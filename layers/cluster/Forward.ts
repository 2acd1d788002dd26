/**
 * A runner's gateway forwarding a model request to the runner that owns its Session (docs/scale-out.md "One address
 * for agents").
 *
 * **Details**
 * The Session id names its Group and the runner holding it (`src/cluster/Routing.ts`), and the request travels as a
 * `Forward` entity call to an entity whose shard the holder owns now (the Group key, or one the `Directory` finds after
 * shards moved: `HolderRoute.ts`). The holder answers it with `ForwardAnswer.ts`; a Session it no longer holds, or one
 * whose holder no live runner is (it died), is a 404 `session_discarded`. The call waits as long as the
 * generation does (an agent's own client decides when to give up); if the cluster itself refuses it, the agent gets a
 * 503 `runner_unavailable` it may retry.
 *
 * The direct hop: an owner's answer names its gateway, remembered per Group, and the Group's next requests are
 * relayed there over plain HTTP (`layers/cluster/OwnerRelay.ts`), which costs the owner what a request sent to it
 * directly costs and this runner a relay; the entity call's machinery on both runners is the larger cost it saves.
 * An owner gateway that cannot be reached from here (a runner gone, a gateway bound to loopback on another machine)
 * is avoided for {@link unreachableFor} and its Groups go over the cluster, which stays the authority on ownership.
 */
import { Clock, Duration, Effect, Layer } from "effect"
import type { Sharding } from "effect/cluster"
import * as Routing from "../../src/cluster/Routing.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Forwarder from "../gateway/Forwarder.ts"
import * as Directory from "./Directory.ts"
import * as ForwardRoute from "./ForwardRoute.ts"
import * as GroupEntity from "./GroupEntity.ts"
import * as HolderRoute from "./HolderRoute.ts"
import * as OwnerRelay from "./OwnerRelay.ts"

/** How long an owner gateway that could not be reached is not tried again. */
export const unreachableFor = Duration.seconds(30)
/** Groups whose owner is remembered; the oldest is forgotten past this (a forgotten Group asks the cluster again). */
const maxRemembered = 50_000

/** How this runner forwards. */
export interface Options {
  /** `--cluster-shards` and the deadline of a `Where` (the `Directory` finds a Session's holder after shards moved). */
  readonly shards: number
  readonly callTimeout: Duration.Duration
  /**
   * Splice an agent's connection to the owner's gateway once the owner answered for its Session (`--gateway-splice`,
   * layers/cluster/OwnerSplice.ts). Default `true`; `false` relays each request.
   */
  readonly splice?: boolean | undefined
}

/** The gateway's `Forwarder` port over the cluster; `self` names this runner to the owners it relays to. */
export const layer = (
  self: string,
  options: Options
): Layer.Layer<Forwarder.Forwarder, never, Sharding.Sharding> =>
  Layer.effect(
    Forwarder.Forwarder,
    Effect.gen(function*() {
      const makeClient = yield* GroupEntity.Group.client
      const directory = yield* Directory.make(options)
      const clock = yield* Clock.Clock
      const relay = yield* OwnerRelay.make(self)
      // Per Group key (the direct hop) and per Session (the splice of a new connection: OwnerSplice.ts).
      const owners = new Map<string, string>()
      const answeredBy = new Map<string, string>()
      const splicing = options.splice ?? true
      const unreachableUntil = new Map<string, number>()
      const reachable = (origin: string) => (unreachableUntil.get(origin) ?? 0) <= clock.currentTimeMillisUnsafe()
      const remember = (map: Map<string, string>, key: string, origin: string) => {
        if (!reachable(origin)) return
        map.delete(key)
        map.set(key, origin)
        if (map.size > maxRemembered) map.delete(map.keys().next().value!)
      }
      return ForwardRoute.port({
        relay,
        viaCluster: (request) => {
          const key = Routing.groupKeyOf(request.sessionId)
          const holder = Routing.holderOf(request.sessionId)
          if (key === undefined || holder === undefined) {
            return Effect.fail(ProtocolError.GatewayError.runnerUnavailable("not a cluster Session id"))
          }
          // To the runner holding the Session, through any entity whose shard it owns now. A forwarded request is
          // sent once only (the holder may have generated for it already), even when the holder's cluster interrupted it.
          const route = HolderRoute.make(directory, holder, directory.known(holder) ?? key, { followInterrupts: false })
          return route.call((k) => makeClient(k).Forward(request)).pipe(
            Effect.map((answer) => {
              if (answer.gateway !== undefined) {
                remember(owners, key, answer.gateway)
                remember(answeredBy, request.sessionId, answer.gateway)
              }
              return answer
            }),
            // A holder that is no live runner any more (it died) lost its Sessions: 404 `session_discarded`.
            Effect.mapError((error) =>
              error._tag === "RunnerLostError"
                ? ProtocolError.GatewayError.sessionClosed(request.sessionId)
                : ProtocolError.GatewayError.runnerUnavailable(error._tag)
            )
          )
        },
        ownerOf: (sessionId) => {
          const key = Routing.groupKeyOf(sessionId)
          const origin = key === undefined ? undefined : owners.get(key)
          return origin === undefined || !reachable(origin) ? undefined : origin
        },
        splicing,
        spliceTo: (sessionId) => {
          const origin = splicing ? answeredBy.get(sessionId) : undefined
          return origin === undefined || !reachable(origin) ? undefined : origin
        },
        answered: (sessionId, origin) => {
          if (splicing) remember(answeredBy, sessionId, origin)
        },
        directFailed: (sessionId, origin, outcome) =>
          Effect.suspend(() => {
            const key = Routing.groupKeyOf(sessionId)
            if (key !== undefined && owners.get(key) === origin) owners.delete(key)
            if (answeredBy.get(sessionId) === origin) answeredBy.delete(sessionId)
            if (outcome.reason !== "unreachable") return Effect.void
            const now = clock.currentTimeMillisUnsafe()
            const quarantined = (unreachableUntil.get(origin) ?? 0) > now
            unreachableUntil.set(origin, now + Duration.toMillis(unreachableFor))
            return quarantined ? Effect.void : Effect.logWarning(
              `the gateway of the runner holding Session ${sessionId} cannot be reached from this runner ` +
                `(${outcome.detail}); its requests go over the cluster for ${Duration.format(unreachableFor)}. ` +
                "If this repeats, give every runner's gateway an address the other runners can reach " +
                "(docs/scale-out.md \"One address for agents\")"
            )
          })
      })
    })
  )
