/**
 * A model request whose Session does not hold its lease waits as a small record, not as a suspended fiber
 * (docs/performance.md, "Issue 41, sixth pass").
 *
 * **Details**
 * A request waits for its Group's Runtime lease (the first-request barrier, a Group not yet leased) for seconds, and
 * thousands may wait at once. Suspended inside the generation it is the whole stack of the request's fiber (the
 * route's, the generation's and the attempts' generators, their contexts and closures), which every young-generation
 * collection copies while it waits. Here the route runs the generation up to its first lease wait
 * (`Generation.prepare`: match, observe, plan — the same steps, in the same order, before the same wait) and then, when
 * the lease is not held, ends its fiber: what is left is the answer's continuation (one closure) and a fiber that only
 * awaits the lease (`SessionEntry.awaitLease`, which counts the Session's first request at its barrier as before).
 * Once the lease is granted (or the Group dropped), the rest runs in a new fiber as a task of the gateway's scheduler
 * (`Generation.complete`, whose attempt finds the lease held; a dropped Group fails it with `SessionClosedError` as
 * before). A request whose Session holds its lease when it arrives, one of a Session without `leaseHeld` (nothing to
 * tell a held lease by) or with a generation gate
 * (partial rollout: the gate counts live requests from before their lease wait), or with a tracer or the replay
 * recorder installed, runs `Generation.generate` in one fiber as before.
 */
import { Clock, Effect } from "effect"
import type * as Completion from "../../src/protocol/Completion.ts"
import type * as Generation from "../generation/Generation.ts"
import type * as Sessions from "../schedule/Sessions.ts"

/** What parking needs of the gateway. */
export interface Parking {
  readonly generation: Generation.GenerationShape
  /** Whether requests run `generate` in one fiber (a tracer or the replay recorder is installed). */
  readonly inOneFiber: boolean
  /** Run a fiber on the gateway's context, in its scope. */
  readonly run: (effect: Effect.Effect<void>) => void
  /** Queue `task` on the gateway's scheduler. */
  readonly schedule: (task: () => void) => void
}

/**
 * Whether a request of `session` would wait parked now: the generation can be cut at its first lease wait, requests
 * are not run in one fiber (tracer, replay recorder), the Session has no generation gate and a `leaseHeld` that says
 * the lease is not held. A caller that finds it would not can run `Generation.generate` inline, without {@link generate}'s
 * answer continuation.
 */
export const parks = (parking: Parking, session: Sessions.SessionEntry): boolean =>
  parking.generation.prepare !== undefined && parking.generation.complete !== undefined && !parking.inOneFiber &&
  session.gate === undefined && session.leaseHeld !== undefined && !session.leaseHeld()

/**
 * Generate `request` of `session` and hand the generation to `answer` (the route's answer: it runs the effect it is
 * given and writes what it gives). With the lease not held after `Generation.prepare`, `answer` runs later in a fiber
 * of its own and the calling fiber ends at once.
 */
export const generate = (
  parking: Parking,
  session: Sessions.SessionEntry,
  request: Completion.CanonicalRequest,
  answer: (generation: Effect.Effect<Completion.Completion, Generation.GenerationError>) => Effect.Effect<void>
): Effect.Effect<void> => {
  const { generation } = parking
  const { prepare, complete } = generation
  const { leaseHeld } = session
  // A lease held already (the common case once a Group runs): nothing to wait for, one fiber as before.
  if (!parks(parking, session) || prepare === undefined || complete === undefined || leaseHeld === undefined) {
    return answer(generation.generate(session, request))
  }
  return Effect.matchEffect(prepare(session, request), {
    onFailure: (error) => answer(Effect.fail(error)),
    onSuccess: (prepared) => {
      // Held meanwhile (the request's steps waited for the tokenizer, say): no wait left.
      if (leaseHeld()) return answer(complete(prepared))
      return Effect.map(Clock.currentTimeMillis, (waitFrom) => {
        // However the wait ends: granted, the Group dropped (the attempt's own wait then fails the request as it
        // would have), or interrupted with the gateway's scope (then the answer never runs).
        const resume = () => parking.run(answer(complete(prepared, waitFrom)))
        parking.run(Effect.andThen(Effect.exit(session.awaitLease), Effect.sync(() => parking.schedule(resume))))
      })
    }
  })
}
