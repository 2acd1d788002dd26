/**
 * The controller follows a whole Group on its holder by asking for its next events, one poll at a time, each riding
 * its runner's next `PollRunner` with the other Groups' polls due then (`RunnerPolls.ts`; docs/scale-out.md "How a
 * Group runs on a runner").
 *
 * **Details**
 * An event stream costs the controller a message for its request, one for each chunk with an acknowledgement back (two
 * more messages each), and its end: ~13 of the ~17 cluster messages a Group of 8 cost it, each ~0.4–0.5 ms of Effect
 * Cluster's machinery (docs/performance.md, section 6, "Polls instead of streams"). A poll is a request and its answer:
 * a Group whose agents ask together and end together costs two polls (its first requests, its results), and one more
 * each `aliveInterval` while nothing happens (an empty answer: the runner is there). Each poll names the Sessions not
 * ended yet and what the controller has seen of each (`PolledSession`: its first request, its last gate state), so the
 * runner answers only what is new, and a poll repeated after a lost or late answer loses nothing (the runner keeps an
 * ended Session whose end an answer carried until the controller's receipt rides a later poll or goes as `Received`,
 * `GroupCalls.receipts`). A poll not answered within the call deadline is repeated
 * `silentRetries` times in a row before the Sessions are given up (`ClusterCallError`).
 */
import { Effect, Exit } from "effect"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import type * as GroupStreams from "./GroupStreams.ts"

/** A Session of the followed Group and what its controller has seen of it. */
interface Member {
  readonly reader: GroupStreams.Reader
  arrived: boolean
  gate: ClusterWire.GateState | null
  ended: boolean
}

/**
 * `follow(context, readers, released)`: the Group's Sessions followed in the caller's fiber until each ended (each
 * `Reader` told of its first request once and of its end); `released` is told of the Sessions whose end an answer
 * carried (the runner keeps them until the controller's receipt, and never needs a `Stop` for them). Interrupting it ends every Session not ended with the interrupt.
 */
export const make = <C>(deps: {
  /**
   * Ask the holder for the Group's next events; a poll not answered within the call deadline fails with
   * `ClusterCallError` "deadline" (the message that carries it has the deadline, `RunnerPolls.ts`).
   */
  readonly poll: (
    context: C,
    sessions: ReadonlyArray<ClusterWire.PolledSession>
  ) => Effect.Effect<ReadonlyArray<ClusterWire.PolledEvent>, GroupStreams.StreamError>
  /** A Session's new state at the generation gate (partial rollout / fully async). */
  readonly onGate: (sessionId: string, state: ClusterWire.GateState) => void
  /** How many polls in a row may go unanswered before the Sessions are given up. */
  readonly silentRetries: number
}) =>
(
  context: C,
  readers: ReadonlyArray<GroupStreams.Reader>,
  released: (sessionIds: ReadonlyArray<string>) => Effect.Effect<void>
): Effect.Effect<void> =>
  Effect.suspend(() => {
    const members = readers.map((reader): Member => ({ reader, arrived: false, gate: null, ended: false }))
    const byId = new Map(members.map((m) => [m.reader.session.sessionId, m]))
    const end = (member: Member, exit: Exit.Exit<ClusterWire.SessionResult, GroupStreams.StreamError>) =>
      Effect.suspend(() => {
        if (member.ended) return Effect.void
        member.ended = true
        return member.reader.end(exit)
      })
    const pending = () => members.filter((m) => !m.ended)

    const deliver = (event: ClusterWire.PolledEvent, endedNow: Array<string>): Effect.Effect<void> => {
      // The runner's room is the caller's (`poll` reads it); `Alive` says only that the runner is there.
      if (event._tag === "Alive" || event._tag === "Room") return Effect.void
      const member = byId.get(event.sessionId)
      if (member === undefined || member.ended) return Effect.void
      switch (event._tag) {
        case "FirstRequest":
          if (member.arrived) return Effect.void
          member.arrived = true
          return member.reader.firstRequest
        case "Gate":
          member.gate = event.state
          return Effect.sync(() => deps.onGate(event.sessionId, event.state))
        case "Done":
          endedNow.push(event.sessionId)
          return end(member, Exit.succeed(event.result))
        case "Failed":
          endedNow.push(event.sessionId)
          return end(member, Exit.fail(new ClusterError.SessionFailedError({ type: event.type, detail: event.detail })))
      }
    }

    const ask = (sessions: ReadonlyArray<Member>) =>
      deps.poll(
        context,
        sessions.map((m) => ({
          sessionId: m.reader.session.sessionId,
          position: m.reader.session.position,
          arrived: m.arrived,
          gate: m.gate
        }))
      )

    return Effect.gen(function*() {
      let silent = 0
      while (true) {
        const sessions = pending()
        if (sessions.length === 0) return
        const answer = yield* Effect.result(ask(sessions))
        if (answer._tag === "Failure") {
          const error = answer.failure
          if (error._tag === "ClusterCallError" && error.reason === "deadline" && silent < deps.silentRetries) {
            silent += 1
            yield* Effect.logWarning(`asking again: ${error.detail} was not answered`)
            continue
          }
          return yield* Effect.forEach(pending(), (m) => end(m, Exit.fail(error)), { discard: true })
        }
        silent = 0
        const endedNow: Array<string> = []
        for (const event of answer.success) yield* deliver(event, endedNow)
        if (endedNow.length > 0) yield* released(endedNow)
        // What the events set off (the pool leasing the Group once its first requests arrived) runs before the next
        // poll is built, so the poll can carry it.
        if (answer.success.length > 0) yield* Effect.yieldNow
      }
    }).pipe(
      // Interrupted (a drop, a closed step): every Session not ended ends with it.
      Effect.onInterrupt(() => Effect.forEach(pending(), (m) => end(m, Exit.interrupt()), { discard: true }))
    )
  })
