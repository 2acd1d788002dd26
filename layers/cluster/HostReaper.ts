/**
 * What a runner reaps on its own (docs/scale-out.md "Failure"): Sessions no controller touched for the orphan timeout
 * (their controller died without stopping them), reservations no Session used, the tombstones of stopped Sessions, and
 * whatever it still hosts when it stops. A shard moving away reaps nothing: a Group stays on its holder until it ends.
 */
import { Clock, Duration, Effect, Schedule, type Scope } from "effect"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** How long a stopped Session's id is remembered (far longer than any re-delivery after a failover takes). */
export const tombstoneTtl = Duration.minutes(10)

/** What the reaper reads of a hosted Session. */
export interface Reaped {
  /** When the controller last sent anything for it (ms, the Clock's). */
  readonly touched: number
  /** When a poll's answer last carried its end (ms, the Clock's): it waits for its controller's receipt. */
  readonly answeredAt: number | undefined
}

/** A stopped Session: when (ms, the Clock's); tombstones are forgotten after {@link tombstoneTtl}. */
export interface Stopped {
  readonly at: number
}

const stopped = (sessionId: string, why: string) =>
  new ClusterWire.SessionFailedError({ type: "SessionStopped", detail: `Session ${sessionId} ${why}` })

/** Start the reaper's loops and finalizer in the scope. */
export const start = (deps: {
  readonly incarnation: string
  readonly address: string
  readonly orphanTimeout: Duration.Duration
  /** How long an answered end waits for its controller's receipt before it is forgotten anyway. */
  readonly answeredGrace: Duration.Duration
  /** Forget an ended Session whose end its controller was sent (no receipt came within the grace). */
  readonly forget: (sessionId: string) => void
  readonly hosted: ReadonlyMap<string, Reaped>
  readonly tombstones: Map<string, Stopped>
  readonly expireReservations: (now: number, ttlMs: number) => void
  readonly stop: (sessionId: string, error: ClusterWire.SessionFailedError) => Effect.Effect<void>
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { address, hosted, incarnation, orphanTimeout } = deps
    const orphanMs = Duration.toMillis(orphanTimeout)
    const graceMs = Duration.toMillis(deps.answeredGrace)
    // Sessions whose controller went silent (killed without its finalizers) are reaped, unused reservations expire,
    // answered ends whose receipt never came are forgotten.
    yield* Effect.forkScoped(
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        deps.expireReservations(now, orphanMs)
        for (const [sessionId, t] of deps.tombstones) {
          if (now - t.at > Duration.toMillis(tombstoneTtl)) deps.tombstones.delete(sessionId)
        }
        const orphans: Array<string> = []
        const unreceived: Array<string> = []
        for (const [sessionId, h] of hosted) {
          if (h.answeredAt === undefined) {
            if (now - h.touched > orphanMs) orphans.push(sessionId)
          } else if (now - h.answeredAt > graceMs) unreceived.push(sessionId)
        }
        for (const sessionId of unreceived) deps.forget(sessionId)
        for (const sessionId of orphans) {
          yield* Effect.logWarning(
            `runner ${incarnation} reaps Session ${sessionId}: no controller touched it for ${
              Duration.format(orphanTimeout)
            }`
          )
          yield* deps.stop(
            sessionId,
            stopped(
              sessionId,
              `was reaped on runner ${address}: no controller touched it for ${Duration.format(orphanTimeout)}`
            )
          )
        }
      }).pipe(Effect.repeat(Schedule.spaced(Duration.millis(Math.min(orphanMs, graceMs) / 3))))
    )

    // Whatever the runner still hosts when it stops is reaped with it.
    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        [...hosted.keys()],
        (sessionId) => deps.stop(sessionId, stopped(sessionId, `was stopped: runner ${address} stopped`)),
        { discard: true }
      )
    )
  })

/** The error of a Session its controller stopped. */
export const stoppedByController = (sessionId: string) => stopped(sessionId, "was stopped by its controller")

/** Why a Session whose end its controller received is not run again (a late `RunGroup` naming it). */
export const delivered = (sessionId: string) => ({
  type: "SessionEnded",
  detail: `Session ${sessionId} ended and its result reached its controller; it is not run again`
})
