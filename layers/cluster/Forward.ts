/**
 * A runner's gateway forwarding a model request to the runner that owns its Session (docs/scale-out.md "One address
 * for agents").
 *
 * **Details**
 * The Session id names its Group (`src/cluster/Routing.ts`), the Group entity's shard names the owner, and the request
 * travels as a `Forward` entity call. The owner answers it with `ModelRoute.answerForwarded`; a Session the owner
 * does not hold (its runner died, the shard moved) is a 404 `session_discarded`. The call waits as long as the
 * generation does (an agent's own client decides when to give up); if the cluster itself refuses it, the agent gets a
 * 503 it may retry.
 */
import { Effect, Layer } from "effect"
import type { Sharding } from "effect/cluster"
import * as Routing from "../../src/cluster/Routing.ts"
import * as ModelRoute from "../gateway/ModelRoute.ts"
import * as GroupEntity from "./GroupEntity.ts"

const unavailable = (detail: string) => ({
  kind: "json" as const,
  status: 503,
  headers: { "retry-after": "1" },
  body: JSON.stringify({
    error: {
      message: `the runner holding this Session cannot be reached now (${detail}); retry`,
      type: "unavailable",
      code: "runner_unavailable",
      param: null
    }
  })
})

/** The gateway's `Forwarder` over the cluster. */
export const layer: Layer.Layer<ModelRoute.Forwarder, never, Sharding.Sharding> = Layer.effect(
  ModelRoute.Forwarder,
  Effect.gen(function*() {
    const makeClient = yield* GroupEntity.Group.client
    return (request) => {
      const key = Routing.groupKeyOf(request.sessionId)
      if (key === undefined) return Effect.succeed(unavailable("not a cluster Session id"))
      return makeClient(key).Forward(request).pipe(
        Effect.catch((error) => Effect.succeed(unavailable(error._tag)))
      )
    }
  })
)
