/**
 * The event streams that follow a runner's hosted Sessions (`RunSession`'s answer: `Started`, `FirstRequest`,
 * `Alive`, `Gate`, `Done`), without fibers of their own: each stream reads one queue that the host fills as things
 * happen, and one runner-wide loop sends every stream its `Alive` and ends the streams whose entity's shard moved
 * away (docs/scale-out.md "How a Group runs on a runner").
 *
 * **Details**
 * A stream per Session built from merged sub-streams (a ticker for `Alive`, a wait for the first request, a wait for
 * the result, a route check) kept about ten fibers, their scopes and continuations alive per held Session: most of
 * what a runner held per Session beyond one process (docs/performance.md, section 6, "Heap per held Session"). Here a
 * stream is a queue and its reader. A stream opened again for the same Session (a re-delivered `RunSession`) starts
 * from the Session's state: `Started`, then `FirstRequest` if the agent asked already, its gate state (partial
 * rollout / fully async), and `Done` (or the failure) if it ended. `Done` ends every stream of the Session.
 * `Started` waits for the stream's next event (the agent's first request, usually) and goes out with it: every chunk
 * of a stream is a cluster message and an acknowledgement back, and the controller does nothing on `Started` alone
 * (docs/performance.md, section 6, "One controller, many runners").
 */
import { Cause, Duration, Effect, Exit, Queue, Schedule, Stream } from "effect"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** How often every running Session's stream says it is alive (the controller's idle deadline is a multiple of it). */
export const aliveInterval = Duration.seconds(2)

/** How often each stream checks that its entity's shard is still this runner's. */
const routeCheck = Duration.millis(500)

/**
 * The entity a stream came through: its id and whether this runner still owns its shard. A stream through an entity
 * whose shard moved away ends (`NotHolderError`), so its controller follows the Session through another entity.
 */
export interface Placement {
  readonly key: string
  readonly owned: () => boolean
}

interface Follower {
  readonly queue: Queue.Queue<ClusterWire.SessionEvent, ClusterWire.RunFailure | Cause.Done>
  readonly placement: Placement | undefined
  /** `Started`, until the stream's next event carries it. */
  started: ClusterWire.SessionEvent | undefined
}

/** Put `event` on the follower's stream, after its `Started` if that has not gone out yet. */
const offer = (follower: Follower, event: ClusterWire.SessionEvent) => {
  if (follower.started !== undefined) {
    Queue.offerUnsafe(follower.queue, follower.started)
    follower.started = undefined
  }
  Queue.offerUnsafe(follower.queue, event)
}

/** What a hosted Session keeps for its streams. */
export interface Followed {
  /** The streams following it now. */
  readonly followers: Set<Follower>
  /** Its agent sent its first model request. */
  arrived: boolean
  /** How it ended, once it did. */
  ended: Exit.Exit<ClusterWire.SessionResult, ClusterWire.SessionFailedError> | undefined
  /** Its state at the generation gate (partial rollout / fully async). */
  gateState: ClusterWire.GateState
}

/** A Session's fields for its streams, before anything happened. */
export const initial = (): Followed => ({
  followers: new Set(),
  arrived: false,
  ended: undefined,
  gateState: { interrupted: false, protected: false }
})

const endWith = (follower: Follower, ended: Exit.Exit<ClusterWire.SessionResult, ClusterWire.SessionFailedError>) => {
  if (Exit.isSuccess(ended)) {
    offer(follower, { _tag: "Done", result: ended.value })
    Queue.endUnsafe(follower.queue)
  } else {
    Queue.failCauseUnsafe(follower.queue, ended.cause)
  }
}

/**
 * The runner's streams: `follow` opens one, the host reports what happens (`arrived`, `ended`, `gate`), and
 * `start` runs the runner-wide loop (in the host's scope) over the Sessions `sessions` lists.
 */
export const make = (deps: {
  readonly incarnation: string
  readonly address: string
  /** Whether gate states are reported (partial rollout / fully async). */
  readonly retains: boolean
  readonly sessions: () => Iterable<Followed>
}) => {
  const follow = (
    hosted: Followed,
    placement: Placement | undefined
  ): Stream.Stream<ClusterWire.SessionEvent, ClusterWire.RunFailure> =>
    Stream.unwrap(Effect.gen(function*() {
      const queue = yield* Queue.unbounded<ClusterWire.SessionEvent, ClusterWire.RunFailure | Cause.Done>()
      const follower: Follower = {
        queue,
        placement,
        started: { _tag: "Started", runner: deps.incarnation, address: deps.address }
      }
      if (hosted.arrived) offer(follower, { _tag: "FirstRequest" })
      if (deps.retains) offer(follower, { _tag: "Gate", state: hosted.gateState })
      if (hosted.ended !== undefined) endWith(follower, hosted.ended)
      else hosted.followers.add(follower)
      return Stream.fromQueue(queue).pipe(Stream.ensuring(Effect.sync(() => hosted.followers.delete(follower))))
    }))

  return {
    follow,
    /** The agent's first model request (reported once). */
    arrived: (hosted: Followed): void => {
      if (hosted.arrived) return
      hosted.arrived = true
      for (const follower of hosted.followers) offer(follower, { _tag: "FirstRequest" })
    },
    /** The Session ended (its result, or why it failed or was stopped): the first report ends every stream. */
    ended: (hosted: Followed, exit: Exit.Exit<ClusterWire.SessionResult, ClusterWire.SessionFailedError>): void => {
      if (hosted.ended !== undefined) return
      hosted.ended = exit
      for (const follower of hosted.followers) endWith(follower, exit)
      hosted.followers.clear()
    },
    /** A new state at the generation gate. */
    gate: (hosted: Followed, state: ClusterWire.GateState): void => {
      hosted.gateState = state
      if (!deps.retains) return
      for (const follower of hosted.followers) offer(follower, { _tag: "Gate", state })
    },
    /** The runner-wide loop: `Alive` to every stream every {@link aliveInterval}, route checks in between. */
    start: Effect.suspend(() => {
      let checks = 0
      const perAlive = Math.max(1, Math.round(Duration.toMillis(aliveInterval) / Duration.toMillis(routeCheck)))
      return Effect.sync(() => {
        checks += 1
        const alive = checks % perAlive === 0
        for (const hosted of deps.sessions()) {
          for (const follower of hosted.followers) {
            if (follower.placement !== undefined && !follower.placement.owned()) {
              hosted.followers.delete(follower)
              Queue.failCauseUnsafe(
                follower.queue,
                Cause.fail(new ClusterWire.NotHolderError({ holder: deps.incarnation, runner: deps.incarnation }))
              )
            } else if (alive) {
              offer(follower, { _tag: "Alive" })
            }
          }
        }
      }).pipe(Effect.repeat(Schedule.spaced(routeCheck)), Effect.asVoid)
    })
  }
}
