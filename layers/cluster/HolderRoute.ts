/**
 * The route of a placed Group's messages to its holder (docs/scale-out.md "Placement that outlives shard moves"): the
 * entity they go to now, found again (`Directory`) when one reaches another runner (`NotHolderError`: shards moved);
 * when no live runner is the holder any more, the call fails with `RunnerLostError` and the Group is lost with it.
 */
import { Effect } from "effect"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as Directory from "./Directory.ts"

/** How many times one call follows its holder to another entity before it gives up. */
const maxReroutes = 10

export interface HolderRoute {
  /** The entity id the holder's messages go to now. */
  readonly current: () => string
  /** Call `f` with the entity id; a `NotHolderError` finds the holder again and calls again. */
  readonly call: <A, E, R>(
    f: (key: string) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | ClusterError.RunnerLostError, R>
}

/** The route to runner `holder`, first through the entity `key` (the one it took the Group under). */
export const make = (directory: Directory.Directory, holder: string, key: string): HolderRoute => {
  let current = key
  const call = <A, E, R>(
    f: (key: string) => Effect.Effect<A, E, R>,
    reroutes = 0
  ): Effect.Effect<A, E | ClusterError.RunnerLostError, R> =>
    Effect.suspend(() => f(current)).pipe(
      Effect.catch((error) =>
        error instanceof ClusterError.NotHolderError
          ? Effect.flatMap(
            reroutes < maxReroutes ? directory.route(holder, current) : Effect.succeed(undefined),
            (next): Effect.Effect<A, E | ClusterError.RunnerLostError, R> => {
              if (next === undefined) {
                return Effect.fail(new ClusterError.RunnerLostError({ expected: holder, actual: error.runner }))
              }
              current = next
              return call(f, reroutes + 1)
            }
          )
          : Effect.fail(error)
      )
    )
  return { current: () => current, call }
}
