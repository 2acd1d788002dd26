/**
 * The first-request barrier (docs/runtime.md "The first-request barrier"): a Group is ready once every one of its
 * Sessions has sent its first model request, and every request waits until the Group holds its Runtime lease.
 *
 * **Details**
 * One barrier per Group, made by the Group's fiber in the pool (layers/schedule/GroupRun.ts) when it starts. Each
 * Session gets a `SessionTicket`; the generation core calls `awaitLease` before every model request. The first call of
 * a Session marks it arrived; the last arrival runs `onReady` (the pool then may lease the Group, see
 * src/schedule/Leasing.ts). The lease is the pool's `Deferred<boolean>`: `true` lets every held request go, `false`
 * (the Group was dropped) fails them with `SessionClosedError`. A Session that ends without arriving is
 * `ExitedBeforeFirstRequestError` (src/schedule/GroupFailure.ts).
 */
import { Deferred, Effect } from "effect"
import * as SessionError from "../../src/session/SessionError.ts"

/** A Session's handle on its Group's barrier and lease. */
export interface SessionTicket {
  readonly groupId: string
  readonly sessionId: string
  /** Position of the Session in its Group (0-based). */
  readonly position: number
  /**
   * For the generation core, before every model request: the first call counts toward the barrier; completes once the
   * Group holds its Runtime lease; fails with `SessionClosedError` once the Group was dropped.
   */
  readonly awaitLease: Effect.Effect<void, SessionError.SessionClosedError>
  /**
   * Whether `awaitLease` would succeed now at once, with nothing to do: arrived, and the lease granted (optional: a
   * ticket without it is always awaited).
   */
  readonly leaseHeld?: (() => boolean) | undefined
  /** Completes when the Group gets its lease (start the active-time budget here); never completes after a drop. */
  readonly leased: Effect.Effect<void>
  /** Completes once this Session has sent its first model request (its first `awaitLease`). */
  readonly firstRequest: Effect.Effect<void>
  /** The rollout step the Group is leased under (the pool's current step before the lease). */
  readonly rolloutId: () => number
}

/** One Group's barrier. */
export interface FirstRequestBarrier {
  /** The ticket of the Session at `position`. */
  readonly ticket: (position: number) => SessionTicket
  /** Whether the Session at `position` has sent its first model request. */
  readonly arrived: (position: number) => boolean
  /**
   * Count the first model request of the Session at `position` (once; the last one runs `onReady`) without waiting
   * for the lease: for a runner that relays its agents' first requests from elsewhere (`GroupRunner.group`).
   */
  readonly arrive: (position: number) => Effect.Effect<void>
}

/** What a barrier needs of its Group. */
export interface BarrierOptions {
  readonly groupId: string
  /** The Group's Session ids, in position order. */
  readonly sessionIds: ReadonlyArray<string>
  /** The Group's Runtime lease: `true` when leased, `false` when dropped. */
  readonly lease: Deferred.Deferred<boolean>
  readonly rolloutId: () => number
  /** Runs once, inside the last Session's first `awaitLease`, before it waits for the lease. */
  readonly onReady: Effect.Effect<void>
}

/** A barrier over `sessionIds.length` Sessions, none arrived. */
export const make = (options: BarrierOptions): Effect.Effect<FirstRequestBarrier> =>
  Effect.gen(function*() {
    const { groupId, sessionIds, lease } = options
    const size = sessionIds.length
    const arrived: Array<boolean> = Array.from({ length: size }, () => false)
    let arrivedCount = 0
    // Set once an `awaitLease` saw the lease granted (a Deferred is completed once: it stays granted).
    let granted = false
    const firstRequests = yield* Effect.forEach(sessionIds, () => Deferred.make<void>())
    const leased = Deferred.await(lease).pipe(Effect.flatMap((granted) => granted ? Effect.void : Effect.never))
    /** Counts the Session's first request; true when it was the Group's last. */
    const countArrival = (position: number): boolean => {
      if (arrived[position]) return false
      arrived[position] = true
      arrivedCount += 1
      Deferred.doneUnsafe(firstRequests[position]!, Effect.void)
      return arrivedCount === size
    }
    const ticket = (position: number): SessionTicket => {
      const sessionId = sessionIds[position]!
      return {
        firstRequest: Deferred.await(firstRequests[position]!),
        groupId,
        sessionId,
        position,
        rolloutId: options.rolloutId,
        awaitLease: Effect.suspend(() =>
          countArrival(position)
            ? options.onReady.pipe(Effect.andThen(Deferred.await(lease)))
            : Deferred.await(lease)
        ).pipe(
          Effect.flatMap((leased) => {
            if (!leased) return Effect.fail(new SessionError.SessionClosedError({ sessionId }))
            granted = true
            return Effect.void
          })
        ),
        leaseHeld: () => granted && arrived[position] === true,
        leased
      }
    }
    return {
      ticket,
      arrived: (position) => arrived[position] === true,
      arrive: (position) => Effect.suspend(() => countArrival(position) ? options.onReady : Effect.void)
    }
  })
