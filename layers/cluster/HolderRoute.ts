/**
 * The route of a placed Group's messages to its holder (docs/scale-out.md "Placement that outlives shard moves"): the
 * entity they go to now, found again (`Directory`) when one reaches another runner (`NotHolderError`: shards moved);
 * when no live runner is the holder any more, the call fails with `RunnerLostError` and the Group is lost with it.
 *
 * **Details**
 * A call the holder's cluster interrupted is followed the same way: a runner whose shard-lock storage stops answering
 * in time (`--cluster-lock-refresh`) drops every shard at once and interrupts its entities' calls, while the Sessions
 * they followed go on in its host; the call is sent again through an entity the directory finds (the holder again,
 * once it took shards back), and a holder found nowhere is lost. Only the calls that are safe to deliver twice follow
 * an interrupt (`followInterrupts`); the caller's own interruption is never caught.
 */
import { Cause, Effect, Option } from "effect"
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

export interface HolderRouteOptions {
  /**
   * A call the cluster interrupted on the holder's side (its entity stopped) is sent again, through the entity the
   * directory finds: for calls that are safe to deliver twice. Default: true.
   */
  readonly followInterrupts?: boolean
}

/** The route to runner `holder`, first through the entity `key` (the one it took the Group under). */
export const make = (
  directory: Directory.Directory,
  holder: string,
  key: string,
  options: HolderRouteOptions = {}
): HolderRoute => {
  let current = key
  const followInterrupts = options.followInterrupts ?? true
  const call = <A, E, R>(
    f: (key: string) => Effect.Effect<A, E, R>,
    reroutes = 0
  ): Effect.Effect<A, E | ClusterError.RunnerLostError, R> => {
    const reroute = (runner: string) =>
      Effect.flatMap(
        reroutes < maxReroutes ? directory.route(holder, current) : Effect.succeed(undefined),
        (next): Effect.Effect<A, E | ClusterError.RunnerLostError, R> => {
          if (next === undefined) {
            return Effect.fail(new ClusterError.RunnerLostError({ expected: holder, actual: runner }))
          }
          current = next
          return call(f, reroutes + 1)
        }
      )
    return Effect.suspend(() => f(current)).pipe(
      Effect.catchCause((cause) => {
        const error = Cause.findErrorOption(cause)
        if (Option.isSome(error) && error.value instanceof ClusterError.NotHolderError) {
          return reroute(error.value.runner)
        }
        // Only an interrupt that came back as the call's answer reaches here: the caller's own interruption ends it.
        if (followInterrupts && Cause.hasInterruptsOnly(cause)) {
          return Effect.andThen(
            Effect.logWarning(
              `a call to runner ${holder} through entity ${current} was interrupted by the cluster there ` +
                "(its entity stopped: shards dropped); following the runner again"
            ),
            Effect.suspend(() => reroute(directory.ownerOf(current) ?? `none (entity ${current} was interrupted)`))
          )
        }
        return Effect.failCause(cause)
      })
    )
  }
  return { current: () => current, call }
}
