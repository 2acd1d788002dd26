/**
 * Where the controller places a new Group (docs/scale-out.md "Capacity"): by room first, then by hash candidates, and
 * a wait while no runner has room. The Group's holder is the runner that grants its `Reserve`.
 */
import { Cause, Duration, Effect, Option } from "effect"
import type * as Placement from "../../src/cluster/Placement.ts"
import type * as SessionRunner from "../rollout/SessionRunner.ts"
import type * as GroupEntity from "./GroupEntity.ts"

/** Candidate Group keys tried per round before the controller waits for a runner's slots. */
const candidatesPerRound = 16

/** Longest wait between two rounds of candidates. */
const maxWait = Duration.seconds(5)

export type Reserved = typeof GroupEntity.Reserve.successSchema.Type

/**
 * Place a Group where its Sessions fit (`--runner-slots`): first at the runner placement by room chooses (the one
 * known to have room with the fewest slots in use: `src/cluster/Placement.ts`), else at the runner of the Group's
 * key, else at the runner of another candidate key (another shard), and when no candidate's runner has room, wait and
 * try again. The Group keeps its own key in every case (its Session ids carry it, with the holder). A reservation
 * no runner answers within the call deadline (no runner has joined, or the candidate's runner died and its shard has
 * not moved yet) ends the round: the Group waits too, instead of being dropped (and counted in the drop streak) for a
 * runner that is not there. A reservation the runner's cluster interrupted (it dropped its shards: its lock storage did
 * not answer in time) counts as unanswered too; a `Reserve` delivered twice reserves once.
 */
export const make = (deps: {
  /** The Group's candidate keys by attempt, one per shard, its plain key first (`Routing.candidateKeys`). */
  readonly candidates: (group: SessionRunner.PlannedGroup) => (attempt: number) => string
  /** Reserve `slots` for the Group `group` at the runner of entity `at`. */
  readonly reserve: (at: string, group: string, slots: number) => Effect.Effect<Option.Option<Reserved>>
  /** The runner placement by room chooses for a Group of `size` whose key is `key`, counted as taken; or none. */
  readonly byRoom: (key: string, size: number) => Placement.Room | undefined
  /** The runner of `room` did not answer: choose it no more until it answers again. */
  readonly unanswered: (room: Placement.Room) => void
}) =>
(group: SessionRunner.PlannedGroup): Effect.Effect<{ readonly key: string; readonly runner: string }> =>
  Effect.gen(function*() {
    const candidates = deps.candidates(group)
    // The caller's own interruption is never caught here: only an interrupt that came back as the answer.
    const reserve = (at: string, key: string) =>
      deps.reserve(at, key, group.size).pipe(
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause) ? Effect.succeed(Option.none<Reserved>()) : Effect.failCause(cause)
        )
      )
    let attempt = 0
    let wait = Duration.millis(250)
    let logged = false
    while (true) {
      const refusals: Array<string> = []
      const plain = candidates(0)
      const room = deps.byRoom(plain, group.size)
      if (room !== undefined) {
        const answer = yield* reserve(room.key, plain)
        if (Option.isNone(answer)) deps.unanswered(room)
        else if (answer.value.decision === "granted") {
          if (logged) yield* Effect.logInfo(`Group ${group.groupId} placed on runner ${answer.value.address}`)
          return { key: plain, runner: answer.value.runner }
        }
      }
      for (let i = 0; i < candidatesPerRound; i++, attempt++) {
        const key = candidates(attempt)
        const answer = yield* reserve(key, key)
        if (Option.isNone(answer)) {
          refusals.push("no runner answered within --cluster-call-timeout")
          attempt++ // the next round starts at the next candidate
          break
        }
        if (answer.value.decision === "granted") {
          if (logged) yield* Effect.logInfo(`Group ${group.groupId} placed on runner ${answer.value.address}`)
          return { key, runner: answer.value.runner }
        }
        refusals.push(
          `${answer.value.address} ${answer.value.decision}` +
            (answer.value.capacity === null ? "" : ` (${answer.value.free ?? 0}/${answer.value.capacity} free)`)
        )
      }
      if (!logged) {
        logged = true
        yield* Effect.logInfo(
          `Group ${group.groupId} waits for a runner with ${group.size} free slot(s); ` +
            `asked: ${[...new Set(refusals)].join(", ")}`
        )
      }
      yield* Effect.sleep(wait)
      wait = Duration.min(Duration.times(wait, 2), maxWait)
    }
  })
