/**
 * The controller's event streams of its Groups (docs/scale-out.md "How a Group runs on a runner"): the Sessions of a
 * Group that start together share one `RunGroup` stream to their holder, and each Session reads its own events from it.
 *
 * **Details**
 * The Group pool runs a Group's Sessions as separate fibers (`SessionRunner.session` each), all started at once. The
 * first to join opens a batch; the batch's stream opens as soon as the Group's every Session joined, or
 * {@link GroupCalls.batchWindow} after the first (so a Session that starts later never waits on the others); a Session
 * that joins after its Group's stream opened opens a batch, and a stream, of its own. A stream is one request, its
 * chunks (each acknowledged) and its end, shared by its Sessions: a stream a Session made them most of the
 * controller's cluster messages a Session (docs/performance.md, section 6, "One controller, many runners").
 *
 * The stream is run in the controller's scope by `run`, which opens it again (following the Sessions already running)
 * when its entity's shard moved or it was silent, naming the Sessions that have not ended yet each time. Each event
 * goes to its Session: `FirstRequest` completes its `firstRequest`, `Done` and `Failed` its `outcome`; when the stream
 * ends or fails, every Session it has not reported ends with that (a stream that ended without a Session's result is
 * `ClusterCallError`). A Session that leaves (its fiber interrupted: its Group dropped, its step closed) is forgotten
 * here; when a stream's last Session left, the stream is interrupted.
 */
import { Clock, Deferred, Duration, Effect, Exit, Fiber, type Scope } from "effect"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as GroupCalls from "./GroupCalls.ts"

/** Why a Session on a stream (or polled) ended without its result; a polled Group's runner may refuse it at placement. */
export type StreamError =
  | ClusterWire.SessionFailedError
  | ClusterError.ClusterCallError
  | ClusterError.RunnerLostError
  | ClusterError.PlacementRefusedError

/** A Session's share of its Group's stream. */
export interface Joined {
  /** Completes once the Session's agent sent its first model request. */
  readonly firstRequest: Effect.Effect<void>
  /** The Session's result, or why it has none. */
  readonly outcome: Effect.Effect<ClusterWire.SessionResult, StreamError>
}

/** What a stream does with one Session's events: its first request, and its end (reported once). */
export interface Reader {
  readonly session: ClusterWire.GroupSession
  readonly firstRequest: Effect.Effect<void>
  readonly end: (exit: Exit.Exit<ClusterWire.SessionResult, StreamError>) => Effect.Effect<void>
}

/** A Reader and whether its end was reported. */
interface Member {
  readonly reader: Reader
  ended: boolean
  /** The opening of the stream whose event reported its end (none when the stream's end did). */
  endedIn: number | undefined
}

interface Batch<C> {
  readonly context: C
  readonly members: Map<string, Member>
  /** Opened (or given up): no Session joins it any more. */
  launched: boolean
  fiber: Fiber.Fiber<void> | undefined
  /** When its stream last said anything (ms, the Clock's). */
  heard: number
  /** How many times its stream was opened. */
  openings: number
}

/**
 * Group streams: `join(batchKey, session, context, expected)` puts a Session on the open batch of `batchKey` (or opens
 * one, whose `context` its stream is run with; `expected`: the Group's size, at which it opens at once).
 */
export const make = <C>(deps: {
  readonly scope: Scope.Scope
  /**
   * Open one stream for the Sessions `sessions()` names (called whenever it is opened: those not ended yet), giving
   * each event to `onEvent`, and run it to its end.
   */
  readonly run: (
    context: C,
    sessions: () => ReadonlyArray<ClusterWire.GroupSession>,
    onEvent: (event: ClusterWire.GroupEvent) => Effect.Effect<void>
  ) => Effect.Effect<void, StreamError>
  /** A Session's new state at the generation gate (partial rollout / fully async). */
  readonly onGate: (sessionId: string, state: ClusterWire.GateState) => void
  /** The longest silence of a stream (its runner says `Alive` every 2 s) before it is followed again. */
  readonly silence: Duration.Duration
  /** How many times a silent stream is followed again before its Sessions are given up. */
  readonly silentRetries: number
}) => {
  const silenceMs = Duration.toMillis(deps.silence)
  const gathering = new Map<string, Batch<C>>()

  const onEvent = (batch: Batch<C>) => (event: ClusterWire.GroupEvent): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      batch.heard = now
      return deliver(batch, event)
    })

  const deliver = (batch: Batch<C>, event: ClusterWire.GroupEvent): Effect.Effect<void> => {
    if (event._tag === "Alive") return Effect.void
    const member = batch.members.get(event.sessionId)
    if (member === undefined) return Effect.void
    switch (event._tag) {
      case "FirstRequest":
        return member.reader.firstRequest
      case "Gate":
        return Effect.sync(() => deps.onGate(event.sessionId, event.state))
      case "Done":
        return reported(batch, member, Exit.succeed(event.result))
      case "Failed":
        return reported(
          batch,
          member,
          Exit.fail(new ClusterError.SessionFailedError({ type: event.type, detail: event.detail }))
        )
    }
  }

  /** A Session's end as its stream's event reported it. */
  const reported = (batch: Batch<C>, member: Member, exit: Exit.Exit<ClusterWire.SessionResult, StreamError>) =>
    Effect.suspend(() => {
      if (!member.ended) member.endedIn = batch.openings
      return end(member, exit)
    })

  const end = (member: Member, exit: Exit.Exit<ClusterWire.SessionResult, StreamError>) =>
    Effect.suspend(() => {
      if (member.ended) return Effect.void
      member.ended = true
      return member.reader.end(exit)
    })

  /** What the stream did not report of each Session is how the stream ended. */
  const settle = (batch: Batch<C>, exit: Exit.Exit<void, StreamError>) =>
    Effect.forEach([...batch.members.values()], (member) =>
      end(
        member,
        Exit.isSuccess(exit)
          ? Exit.fail(
            new ClusterError.ClusterCallError({
              reason: "refused",
              detail: `RunGroup ended without a result of Session ${member.reader.session.sessionId}`
            })
          )
          : Exit.failCause(exit.cause)
      ), { discard: true })

  const pending = (batch: Batch<C>) => {
    const sessions: Array<ClusterWire.GroupSession> = []
    for (const member of batch.members.values()) {
      if (!member.ended) sessions.push(member.reader.session)
    }
    return sessions
  }

  /** Fails the stream once it said nothing for the longest silence allowed. */
  const watch = (batch: Batch<C>) =>
    Effect.gen(function*() {
      while (true) {
        const quiet = (yield* Clock.currentTimeMillis) - batch.heard
        if (quiet >= silenceMs) {
          return yield* Effect.fail(
            new ClusterError.ClusterCallError({
              reason: "deadline",
              detail: `RunGroup of ${pending(batch).map((s) => s.sessionId).join(", ")}`
            })
          )
        }
        yield* Effect.sleep(Duration.millis(silenceMs - quiet))
      }
    })

  /**
   * The batch's stream run to its end. A silent one is followed again before its Sessions are given up: a repeated
   * RunGroup follows the Sessions already running (a stream whose replies stalled loses nothing), and a runner that is
   * gone is found nowhere (RunnerLostError).
   */
  const follow = (batch: Batch<C>): Effect.Effect<void, StreamError> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      batch.heard = now
      // `sessions` is read once per opening (a route that finds the holder through another entity opens it again).
      const sessions = () => {
        batch.openings += 1
        return pending(batch)
      }
      return Effect.raceFirst(deps.run(batch.context, sessions, onEvent(batch)), watch(batch))
    }).pipe(
      Effect.tapError((error) =>
        error._tag === "ClusterCallError" && error.reason === "deadline"
          ? Effect.logWarning(`following again: ${error.detail} was silent`)
          : Effect.void
      ),
      Effect.retry({
        while: (error) => error._tag === "ClusterCallError" && error.reason === "deadline",
        times: deps.silentRetries
      })
    )

  /** The batch's stream followed to its end, and every Session it did not report ended with how it ended. */
  const followAll = (batch: Batch<C>) =>
    follow(batch).pipe(
      Effect.onExit((exit) => settle(batch, exit)),
      Effect.ignore
    )

  const launch = (batchKey: string, batch: Batch<C>) =>
    Effect.suspend(() => {
      if (batch.launched) return Effect.void
      batch.launched = true
      if (gathering.get(batchKey) === batch) gathering.delete(batchKey)
      if (batch.members.size === 0) return Effect.void
      return followAll(batch).pipe(
        Effect.forkIn(deps.scope),
        Effect.map((fiber) => {
          batch.fiber = fiber
        })
      )
    })

  const leave = (batchKey: string, batch: Batch<C>, sessionId: string) =>
    Effect.suspend(() => {
      batch.members.delete(sessionId)
      if (batch.members.size > 0) return Effect.void
      if (!batch.launched) {
        batch.launched = true
        if (gathering.get(batchKey) === batch) gathering.delete(batchKey)
        return Effect.void
      }
      // Nobody reads this stream any more: it ends here (not awaited, so a Session's scope never waits on the runner).
      return batch.fiber === undefined
        ? Effect.void
        : Effect.asVoid(Effect.forkIn(Fiber.interrupt(batch.fiber), deps.scope))
    })

  const join = (
    batchKey: string,
    session: ClusterWire.GroupSession,
    context: C,
    expected: number
  ): Effect.Effect<Joined, never, Scope.Scope> =>
    Effect.gen(function*() {
      let batch = gathering.get(batchKey)
      const opened = batch === undefined
      if (batch === undefined) {
        batch = { context, members: new Map(), launched: false, fiber: undefined, heard: 0, openings: 0 }
        gathering.set(batchKey, batch)
      }
      const firstRequest = Deferred.makeUnsafe<void>()
      const outcome = Deferred.makeUnsafe<ClusterWire.SessionResult, StreamError>()
      batch.members.set(session.sessionId, {
        reader: {
          session,
          firstRequest: Deferred.succeed(firstRequest, undefined),
          end: (exit) => Deferred.done(outcome, exit)
        },
        ended: false,
        endedIn: undefined
      })
      const joined = batch
      yield* Effect.addFinalizer(() => leave(batchKey, joined, session.sessionId))
      if (batch.members.size >= expected) yield* launch(batchKey, batch)
      else if (opened) {
        yield* Effect.forkIn(Effect.delay(launch(batchKey, batch), GroupCalls.batchWindow), deps.scope)
      }
      return { firstRequest: Deferred.await(firstRequest), outcome: Deferred.await(outcome) }
    })

  /**
   * One stream for a whole Group's Sessions, followed in the caller's fiber until every Session ended (each `Reader`
   * told of its first request and its end); interrupting it ends the stream. When the stream completes, `released`
   * is told which Sessions the runner forgot: those whose end that opening of the stream reported (the runner forgets
   * a Session once the stream that reported its end completed, `SessionFollowers.ts`); the others need a `Stop`.
   */
  const followGroup = (
    context: C,
    readers: ReadonlyArray<Reader>,
    released: (sessionIds: ReadonlyArray<string>) => void
  ): Effect.Effect<void> =>
    Effect.suspend(() => {
      const batch: Batch<C> = { context, members: new Map(), launched: true, fiber: undefined, heard: 0, openings: 0 }
      for (const reader of readers) {
        batch.members.set(reader.session.sessionId, { reader, ended: false, endedIn: undefined })
      }
      return follow(batch).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            const forgotten: Array<string> = []
            for (const member of batch.members.values()) {
              if (member.endedIn === batch.openings) forgotten.push(member.reader.session.sessionId)
            }
            released(forgotten)
          })
        ),
        Effect.onExit((exit) => settle(batch, exit)),
        Effect.ignore
      )
    })

  return { join, followGroup }
}
