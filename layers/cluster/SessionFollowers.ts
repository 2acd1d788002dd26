/**
 * The event streams that follow a runner's hosted Sessions (`RunGroup`'s answer: `FirstRequest`, `Gate`, `Done` or
 * `Failed` of each Session it names, and the stream's `Alive`), without fibers of their own: each stream reads one
 * queue that the host fills as things happen, and one runner-wide loop sends every stream its `Alive` and ends the
 * streams whose entity's shard moved away (docs/scale-out.md "How a Group runs on a runner").
 *
 * **Details**
 * One stream follows a Group's Sessions together: every chunk of a stream is a cluster message and an acknowledgement
 * back, and an open stream holds the cluster's request state on both sides (the RPC server's fiber, the entity
 * manager's entry), so a stream per Session made them most of a controller's CPU a Session and of a runner's heap a
 * held Session (docs/performance.md, section 6, "One controller, many runners"). The reader takes every event queued
 * within {@link batchWindow} of the first into one chunk (a Group's agents asking at about the same time, Sessions
 * ending together). A stream opened again for the same Sessions (a re-delivered `RunGroup`, or the controller
 * following them again) starts from each Session's state: `FirstRequest` if its agent asked already, its gate state
 * (partial rollout / fully async), and how it ended if it did. A stream ends once every Session it follows has ended.
 */
import { Cause, Duration, Effect, Exit, Queue, Schedule, Stream } from "effect"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** How often every open stream says it is alive (the controller's idle deadline is a multiple of it). */
export const aliveInterval = Duration.seconds(2)

/** How long a stream's reader waits after an event for others to ride the same chunk. */
export const batchWindow = Duration.millis(5)

/** How often each stream checks that its entity's shard is still this runner's. */
const routeCheck = Duration.millis(500)

/**
 * The entity a stream came through: its id and whether this runner still owns its shard. A stream through an entity
 * whose shard moved away ends (`NotHolderError`), so its controller follows the Sessions through another entity.
 */
export interface Placement {
  readonly key: string
  readonly owned: () => boolean
}

type Ended = Exit.Exit<ClusterWire.SessionResult, ClusterWire.SessionFailedError>

interface Follower {
  readonly queue: Queue.Queue<ClusterWire.GroupEvent, ClusterWire.RunFailure | Cause.Done>
  readonly placement: Placement | undefined
  /** The runner-wide loop sends it `Alive` (a stream; a poll answers after its own wait instead). */
  readonly alive: boolean
  /** The Sessions whose end this stream has not reported yet: it ends when the last one's is. */
  readonly waiting: Set<string>
  /** The Sessions it follows, to be unlinked from when it ends. */
  readonly sessions: ReadonlyArray<Followed>
  /**
   * `FirstRequest`s until every Session it follows asked (or ended), and `Done`s of Sessions that asked until the
   * last one ends: they go out together, one chunk for a Group whose agents ask or end apart. Any other event sends
   * them first.
   */
  readonly held: Array<ClusterWire.GroupEvent>
  /** A poll waiting for any of its followers to have something (`pollMany`): told when this one does. */
  wake: (() => void) | undefined
}

/** What a hosted Session keeps for its streams. */
export interface Followed {
  readonly sessionId: string
  /** The streams following it now. */
  readonly followers: Set<Follower>
  /** Its agent sent its first model request. */
  arrived: boolean
  /** How it ended, once it did. */
  ended: Ended | undefined
  /** Its state at the generation gate (partial rollout / fully async). */
  gateState: ClusterWire.GateState
}

/** The gate state of a Session the gate has not touched (shared: a new state replaces it, never changes it). */
export const notAtGate: ClusterWire.GateState = { interrupted: false, protected: false }

/** A Session's fields for its streams, before anything happened. */
export const initial = (sessionId: string): Followed => ({
  sessionId,
  followers: new Set(),
  arrived: false,
  ended: undefined,
  gateState: notAtGate
})

/** The event that reports how a Session ended: its result, or why it failed (a defect as its text). */
const endEvent = (sessionId: string, ended: Ended): ClusterWire.GroupEvent => {
  if (Exit.isSuccess(ended)) return { _tag: "Done", sessionId, result: ended.value }
  const error = Cause.findErrorOption(ended.cause)
  return error._tag === "Some"
    ? { _tag: "Failed", sessionId, type: error.value.type, detail: error.value.detail }
    : { _tag: "Failed", sessionId, type: "SessionDefect", detail: Cause.pretty(ended.cause) }
}

/** Send `event` on the stream, after the events it holds. */
const send = (follower: Follower, event: ClusterWire.GroupEvent) => {
  for (const held of follower.held) Queue.offerUnsafe(follower.queue, held)
  follower.held.length = 0
  Queue.offerUnsafe(follower.queue, event)
  follower.wake?.()
}

/** Report a Session's first request: held until every Session of the stream asked or ended. */
const reportArrival = (follower: Follower, sessionId: string) => {
  const event: ClusterWire.GroupEvent = { _tag: "FirstRequest", sessionId }
  if (follower.sessions.every((s) => s.arrived || s.ended !== undefined)) send(follower, event)
  else follower.held.push(event)
}

/**
 * Report that a Session this stream waits for ended; the stream ends after the last one. A result of a Session that
 * asked waits for the others' ends; a failure, or the end of a Session that never asked (its Group is dropped), goes
 * out at once.
 */
const report = (follower: Follower, sessionId: string, event: ClusterWire.GroupEvent, arrived: boolean) => {
  if (!follower.waiting.delete(sessionId)) return
  if (follower.waiting.size > 0 && event._tag === "Done" && arrived) follower.held.push(event)
  else send(follower, event)
  if (follower.waiting.size === 0) {
    Queue.endUnsafe(follower.queue)
    follower.wake?.()
  }
}

/** A Session a stream names that this runner refuses (stopped before, or not admitted): reported at once. */
export interface Refused {
  readonly sessionId: string
  readonly error: ClusterWire.SessionFailedError
}

/** The events queued now, or the first ones to come and those queued within `window` of them. */
const takeBatch = <A, E>(queue: Queue.Queue<A, E | Cause.Done>, window: Duration.Duration) =>
  Effect.flatMap(
    Queue.takeAll(queue),
    (first) =>
      Duration.isZero(window) ? Effect.succeed(first) : Effect.sleep(window).pipe(
        Effect.andThen(Queue.clear(queue)),
        Effect.map((rest): typeof first => rest.length === 0 ? first : [...first, ...rest]),
        Effect.catch(() => Effect.succeed(first))
      )
  )

/**
 * The stream of `queue`: every event queued within `window` of the first goes out in its chunk (a failure or the end
 * queued meanwhile comes with the next pull).
 */
const batched = <A, E>(queue: Queue.Queue<A, E | Cause.Done>, window: Duration.Duration): Stream.Stream<A, E> =>
  Duration.isZero(window) ? Stream.fromQueue(queue) : Stream.fromPull(Effect.succeed(takeBatch(queue, window)))

/**
 * Nothing more is due soon on a poll's follower: every Session it follows has ended, or none holds an event back and
 * every one asked (or ended), so only an end (held until the last), a gate change or a failure can come next: its
 * answer goes at once instead of after the batch window (the Group's first requests, then its results, usually).
 */
const settled = (follower: Follower): boolean =>
  follower.waiting.size === 0 ||
  (follower.held.length === 0 && follower.sessions.every((s) => s.arrived || s.ended !== undefined))

/** What a Session's controller has seen of it (`PollGroup`): its first request, its last gate state. */
export interface Known {
  readonly arrived: boolean
  readonly gate: ClusterWire.GateState | null
}

const sameGate = (a: ClusterWire.GateState | null, b: ClusterWire.GateState) =>
  a !== null && a.interrupted === b.interrupted && a.protected === b.protected

/**
 * The runner's streams: `follow` opens one, the host reports what happens (`arrived`, `ended`, `gate`), and
 * `start` runs the runner-wide loop (in the host's scope).
 */
export const make = (deps: {
  /** This runner's incarnation id (named in a moved stream's `NotHolderError`). */
  readonly incarnation: string
  /** Whether gate states are reported (partial rollout / fully async). */
  readonly retains: boolean
  /** How long a reader gathers events into one chunk (default {@link batchWindow}). */
  readonly window?: Duration.Duration | undefined
  /** How long a poll waits for something new before it answers with nothing (default {@link aliveInterval}). */
  readonly pollWait?: Duration.Duration | undefined
  /**
   * A stream ended after it reported the end of every Session it followed: the cluster pulls a stream's next chunk
   * only once the last one was acknowledged, so the controller holds their results and the host may forget them.
   */
  readonly delivered?: ((sessions: ReadonlyArray<Followed>) => void) | undefined
  /**
   * A `PollGroup` answer carried the end of these Sessions (an answer is not acknowledged: the host keeps them a
   * little longer, so a poll repeated after a lost answer gets their ends again).
   */
  readonly answered?: ((sessions: ReadonlyArray<Followed>) => Effect.Effect<void>) | undefined
}) => {
  const window = deps.window ?? batchWindow
  const streams = new Set<Follower>()

  const unlink = (follower: Follower) => {
    streams.delete(follower)
    for (const hosted of follower.sessions) hosted.followers.delete(follower)
  }

  /**
   * A follower of `sessions` (reporting `refused` at once) through the entity `placement`, starting from each
   * Session's state less what `known` says its controller has seen already.
   */
  const open = (
    sessions: ReadonlyArray<Followed>,
    refused: ReadonlyArray<Refused>,
    placement: Placement | undefined,
    alive: boolean,
    known?: (sessionId: string) => Known | undefined
  ): Effect.Effect<Follower> =>
    Effect.map(Queue.unbounded<ClusterWire.GroupEvent, ClusterWire.RunFailure | Cause.Done>(), (queue) => {
      const follower: Follower = {
        queue,
        placement,
        alive,
        waiting: new Set([...sessions.map((s) => s.sessionId), ...refused.map((r) => r.sessionId)]),
        sessions,
        held: [],
        wake: undefined
      }
      for (const { error, sessionId } of refused) {
        report(follower, sessionId, { _tag: "Failed", sessionId, type: error.type, detail: error.detail }, false)
      }
      for (const hosted of sessions) {
        const seen = known?.(hosted.sessionId)
        if (hosted.arrived && seen?.arrived !== true) reportArrival(follower, hosted.sessionId)
        if (deps.retains && !sameGate(seen?.gate ?? null, hosted.gateState)) {
          send(follower, { _tag: "Gate", sessionId: hosted.sessionId, state: hosted.gateState })
        }
        if (hosted.ended !== undefined) {
          report(follower, hosted.sessionId, endEvent(hosted.sessionId, hosted.ended), hosted.arrived)
        } else hosted.followers.add(follower)
      }
      if (follower.waiting.size > 0) streams.add(follower)
      else Queue.endUnsafe(queue)
      return follower
    })

  /** One stream following `sessions` (and reporting `refused` at once) through the entity `placement`. */
  const follow = (
    sessions: ReadonlyArray<Followed>,
    refused: ReadonlyArray<Refused>,
    placement: Placement | undefined
  ): Stream.Stream<ClusterWire.GroupEvent, ClusterWire.RunFailure> =>
    Stream.unwrap(
      Effect.map(open(sessions, refused, placement, true), (follower) =>
        batched(follower.queue, window).pipe(
          Stream.onEnd(Effect.sync(() => deps.delivered?.(sessions))),
          Stream.ensuring(Effect.sync(() => unlink(follower)))
        ))
    )

  /** Something to answer: events queued, or the follower ended (every Session reported) or failed (its route). */
  const ready = (follower: Follower) => Queue.sizeUnsafe(follower.queue) > 0 || !streams.has(follower)

  /** Until one of `followers` has something to answer (at once when one has, or there is none). */
  const anyReady = (followers: ReadonlyArray<Follower>) =>
    Effect.callback<void>((resume) => {
      if (followers.length === 0 || followers.some(ready)) return resume(Effect.void)
      const wake = () => {
        for (const follower of followers) follower.wake = undefined
        resume(Effect.void)
      }
      for (const follower of followers) follower.wake = wake
      return Effect.sync(() => {
        for (const follower of followers) follower.wake = undefined
      })
    })

  /**
   * One answer to a `PollRunner` (a `PollGroup` is one poll): each poll's events that its controller has not seen
   * (`known`) for its `sessions` (and `refused`), all in one answer: as soon as any poll has some (every poll's events
   * of the window after the first together), or none after {@link aliveInterval}. The Sessions whose end it carries
   * are handed to `answered`. All polls came through one entity (`placement`): a moved shard fails them all.
   */
  const pollMany = (
    polls: ReadonlyArray<{
      readonly sessions: ReadonlyArray<Followed>
      readonly refused: ReadonlyArray<Refused>
      readonly known: (sessionId: string) => Known | undefined
    }>,
    placement: Placement | undefined
  ): Effect.Effect<ReadonlyArray<ReadonlyArray<ClusterWire.GroupEvent>>, ClusterWire.RunFailure> =>
    // The followers opened are unlinked however the answer ends, an interrupt while they open included.
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(
        Effect.forEach(polls, (p) => open(p.sessions, p.refused, placement, false, p.known)),
        (followers) =>
          restore(
            anyReady(followers).pipe(
              Effect.timeoutOrElse({ duration: deps.pollWait ?? aliveInterval, orElse: () => Effect.void }),
              // A follower with events that may have more soon (its Group's others) keeps the answer open for the
              // window. Decided once the wait is over (what the followers hold then), not when the effect is built.
              Effect.andThen(Effect.suspend(() =>
                Duration.isZero(window) || followers.every((f) => Queue.sizeUnsafe(f.queue) === 0 || settled(f))
                  ? Effect.void
                  : Effect.sleep(window)
              )),
              Effect.andThen(Effect.forEach(followers, (follower) => Queue.clear(follower.queue))),
              Effect.tap((answers) => {
                if (deps.answered === undefined) return Effect.void
                const ended = new Set<string>()
                for (const events of answers) {
                  for (const event of events) {
                    if (event._tag === "Done" || event._tag === "Failed") ended.add(event.sessionId)
                  }
                }
                if (ended.size === 0) return Effect.void
                return deps.answered(polls.flatMap((p) => p.sessions.filter((s) => ended.has(s.sessionId))))
              })
            )
          ).pipe(
            Effect.ensuring(Effect.sync(() => {
              for (const follower of followers) unlink(follower)
            }))
          )
      )
    )

  return {
    follow,
    pollMany,
    /** The agent's first model request (reported once). */
    arrived: (hosted: Followed): void => {
      if (hosted.arrived) return
      hosted.arrived = true
      for (const follower of hosted.followers) reportArrival(follower, hosted.sessionId)
    },
    /** The Session ended (its result, or why it failed or was stopped): the first report is the one streams carry. */
    ended: (hosted: Followed, exit: Ended): void => {
      if (hosted.ended !== undefined) return
      hosted.ended = exit
      const event = endEvent(hosted.sessionId, exit)
      for (const follower of hosted.followers) {
        report(follower, hosted.sessionId, event, hosted.arrived)
        if (follower.waiting.size === 0) streams.delete(follower)
      }
      hosted.followers.clear()
    },
    /** A new state at the generation gate. */
    gate: (hosted: Followed, state: ClusterWire.GateState): void => {
      hosted.gateState = state
      if (!deps.retains) return
      for (const follower of hosted.followers) {
        send(follower, { _tag: "Gate", sessionId: hosted.sessionId, state })
      }
    },
    /** Open streams now (one a Group, usually). */
    open: (): number => streams.size,
    /** The runner-wide loop: `Alive` to every stream every {@link aliveInterval}, route checks in between. */
    start: Effect.suspend(() => {
      let checks = 0
      const perAlive = Math.max(1, Math.round(Duration.toMillis(aliveInterval) / Duration.toMillis(routeCheck)))
      return Effect.sync(() => {
        checks += 1
        const alive = checks % perAlive === 0
        for (const follower of streams) {
          if (follower.placement !== undefined && !follower.placement.owned()) {
            unlink(follower)
            Queue.failCauseUnsafe(
              follower.queue,
              Cause.fail(new ClusterWire.NotHolderError({ holder: deps.incarnation, runner: deps.incarnation }))
            )
            follower.wake?.()
          } else if (alive && follower.alive) {
            Queue.offerUnsafe(follower.queue, { _tag: "Alive" })
          }
        }
      }).pipe(Effect.repeat(Schedule.spaced(routeCheck)), Effect.asVoid)
    })
  }
}
