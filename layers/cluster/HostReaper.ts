/**
 * What a runner reaps on its own (docs/scale-out.md "Failure"): Sessions no controller touched for the orphan timeout
 * (their controller died without stopping them), reservations no Session used, the tombstones of stopped Sessions,
 * Groups whose shard moved away, and whatever it still hosts when it stops.
 */
import { Clock, Duration, Effect, Schedule, type Scope } from "effect"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** How often the host checks that it still owns the shards of its Groups (a runner joined: some moved away). */
export const ownershipCheck = Duration.millis(500)

/** How long a stopped Session's id is remembered (far longer than any re-delivery after a failover takes). */
export const tombstoneTtl = Duration.minutes(10)

/** A Group entity on this runner: its id (the Group key) and whether this runner still owns the entity's shard. */
export interface Placement {
  readonly key: string
  readonly owned: () => boolean
}

/** What the reaper reads of a hosted Session. */
export interface Reaped {
  readonly placement: Placement | undefined
  /** When the controller last sent anything for it (ms, the Clock's). */
  readonly touched: number
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
  readonly hosted: ReadonlyMap<string, Reaped>
  readonly tombstones: Map<string, Stopped>
  readonly expireReservations: (now: number, ttlMs: number) => void
  readonly stop: (sessionId: string, error: ClusterWire.SessionFailedError) => Effect.Effect<void>
  readonly release: (key: string) => Effect.Effect<void>
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { address, hosted, incarnation, orphanTimeout } = deps
    const orphanMs = Duration.toMillis(orphanTimeout)
    // Sessions whose controller went silent (killed without its finalizers) are reaped, unused reservations expire.
    yield* Effect.forkScoped(
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        deps.expireReservations(now, orphanMs)
        for (const [sessionId, t] of deps.tombstones) {
          if (now - t.at > Duration.toMillis(tombstoneTtl)) deps.tombstones.delete(sessionId)
        }
        const orphans = [...hosted.entries()].filter(([, h]) => now - h.touched > orphanMs)
        for (const [sessionId] of orphans) {
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
      }).pipe(Effect.repeat(Schedule.spaced(Duration.millis(orphanMs / 3))))
    )

    // A Group whose shard moved away (a runner joined) is released at once: the controller's messages for it reach
    // the shard's new owner now, so its Sessions here could never report again; their agents and slots are freed.
    yield* Effect.forkScoped(
      Effect.suspend(() => {
        const moved = new Set<string>()
        for (const h of hosted.values()) {
          if (h.placement !== undefined && !h.placement.owned()) moved.add(h.placement.key)
        }
        return Effect.forEach(moved, deps.release, { discard: true })
      }).pipe(Effect.repeat(Schedule.spaced(ownershipCheck)))
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
