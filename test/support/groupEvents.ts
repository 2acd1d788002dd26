/** Group events as the cluster tests script them: an empty result, its `Done` event, and a few scheduler turns. */
import { Effect } from "effect"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** A Session's result with nothing in it. */
export const emptyResult = (sessionId: string): ClusterWire.SessionResult => ({
  sessionId,
  samples: [],
  debug: [],
  parserFailures: 0
})

/** The event that ends a Session with {@link emptyResult}. */
export const done = (sessionId: string): ClusterWire.GroupEvent => ({
  _tag: "Done",
  sessionId,
  result: emptyResult(sessionId)
})

/** Ten scheduler turns: what the forked fibers set off has run. */
export const settle = Effect.gen(function*() {
  for (let i = 0; i < 10; i++) yield* Effect.yieldNow
})
