/**
 * Workers that die and come back: a worker that refuses or resets a connection is marked down, its attempts move to
 * the live workers (Generate.ts), control calls skip it, and it is probed with back-off until it answers again; then
 * it serves again only if its weight version equals the fleet's.
 *
 * **Details**
 * - Down: no request, no control call (`Workers.controlTargets` leaves it out), `GET /health` every 1, 2, 4 … 30
 *   seconds. A router's worker that is no longer listed is forgotten (the router's list is the truth).
 * - Back: its `GET /get_weight_version` equals the fleet's: it serves at once (`WorkerBack`). Otherwise it holds the
 *   checkpoint it was launched with (a restarted SGLang): it *needs weights* (`WorkerNeedsWeights`, a warning naming
 *   it): no request reaches it until the trainer's next update does (`reached`), since only the trainer can push the
 *   trained weights into it.
 * - Counted for the step: `engine/worker_down`, `engine/attempts_moved`, `engine/worker_quarantined`.
 */
import { Duration, Effect, PubSub, type Scope, Stream } from "effect"
import * as WorkerEvents from "../../../src/engine/WorkerEvents.ts"
import * as Http from "./Http.ts"
import * as StartupChecks from "./StartupChecks.ts"
import type * as Workers from "./Workers.ts"

export interface WorkerHealth {
  /** The worker at `url` failed a connection: mark it down (once) and probe it until it answers. */
  readonly markDown: (url: string, detail: string) => Effect.Effect<void>
  /** The worker at `url` answered a request while marked down (every worker was down): it is back, on its version. */
  readonly answered: (url: string) => Effect.Effect<void>
  /** The fleet's weight version `version` reached the worker at `url` (an update was applied there). */
  readonly reached: (url: string, version: string) => Effect.Effect<void>
  /** A router listed `urls` (read fresh): a down worker it no longer lists is forgotten (its list is the truth). */
  readonly listed: (urls: ReadonlyArray<string>) => Effect.Effect<void>
  /** The workers waiting for weights. */
  readonly needingWeights: () => ReadonlyArray<string>
  /** Whether a worker other than `url` serves (an attempt can move there). */
  readonly canMoveFrom: (url: string) => boolean
  /** Count an attempt moved off a down worker. */
  readonly moved: () => void
  readonly report: () => WorkerEvents.WorkerReport
  /** Every event from now on. */
  readonly events: Stream.Stream<WorkerEvents.WorkerEvent>
  /** The step's counters since the last call; resets them. */
  readonly takeStepMetrics: () => Readonly<Record<string, number>>
}

/** How a down worker is probed: the first probe after `first`, each next one twice as long, up to `max`. */
export interface ProbeBackoff {
  readonly first: Duration.Input
  readonly max: Duration.Input
}

/** 1, 2, 4 … 30 seconds. */
export const defaultProbeBackoff: ProbeBackoff = { first: "1 second", max: "30 seconds" }

/**
 * Health over `workers`; probes run in the scope. `fleetVersion` is the version the fleet serves (WeightUpdates.ts),
 * read when a worker comes back.
 */
export const make = (
  http: Http.Http,
  workers: Workers.Workers,
  fleetVersion: () => string,
  backoff: ProbeBackoff = defaultProbeBackoff
): Effect.Effect<WorkerHealth, never, Scope.Scope> =>
  Effect.gen(function*() {
    const firstProbeMs = Duration.toMillis(Duration.fromInputUnsafe(backoff.first))
    const maxProbeMs = Duration.toMillis(Duration.fromInputUnsafe(backoff.max))
    const scope = yield* Effect.scope
    const events = yield* PubSub.unbounded<WorkerEvents.WorkerEvent>()
    const down = new Map<string, string>()
    const needs = new Map<string, WorkerEvents.WorkerNeedsWeights>()
    const counts = { down: 0, moved: 0, quarantined: 0 }

    const publish = (event: WorkerEvents.WorkerEvent): Effect.Effect<void> =>
      Effect.andThen(
        event._tag === "WorkerBack"
          ? Effect.logInfo(WorkerEvents.describe(event))
          : Effect.logWarning(WorkerEvents.describe(event)),
        PubSub.publish(events, event)
      )

    const cameBack = (url: string, version: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        down.delete(url)
        workers.setDown(url, false)
        const fleet = fleetVersion()
        if (version === fleet) {
          needs.delete(url)
          workers.setQuarantined(url, false)
          return publish({ _tag: "WorkerBack", url, weightVersion: version })
        }
        const event: WorkerEvents.WorkerNeedsWeights = {
          _tag: "WorkerNeedsWeights",
          url,
          weightVersion: version,
          fleetVersion: fleet
        }
        needs.set(url, event)
        workers.setQuarantined(url, true)
        counts.quarantined++
        return publish(event)
      })

    const healthy = (url: string): Effect.Effect<boolean> =>
      http.request(url, "/health", "GET", undefined, Http.noHeaders, 5_000).pipe(
        Effect.map((answer) => answer.status === 200),
        Effect.orElseSucceed(() => false)
      )

    const forget = (url: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (!down.delete(url) && !needs.delete(url)) return Effect.void
        workers.setDown(url, false)
        workers.setQuarantined(url, false)
        return Effect.logInfo(`SGLang worker ${url} is no longer listed by the router; forgotten`)
      })

    /** Probe `url` with back-off until it answers (or the router no longer lists it). */
    const probe = (url: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        for (let wait = firstProbeMs;; wait = Math.min(wait * 2, maxProbeMs)) {
          yield* Effect.sleep(wait)
          if (!down.has(url)) return
          if (workers.router !== undefined && !(yield* workers.listed(true)).includes(url)) return yield* forget(url)
          if (!(yield* healthy(url))) continue
          return yield* cameBack(url, yield* StartupChecks.weightVersion(http, url))
        }
      })

    return {
      markDown: (url, detail) =>
        Effect.suspend(() => {
          if (down.has(url)) return Effect.void
          down.set(url, detail)
          workers.setDown(url, true)
          counts.down++
          return Effect.andThen(
            publish({ _tag: "WorkerDown", url, detail }),
            Effect.asVoid(Effect.forkIn(probe(url), scope))
          )
        }),
      answered: (url) =>
        Effect.suspend(() =>
          down.has(url) ? Effect.flatMap(StartupChecks.weightVersion(http, url), (v) => cameBack(url, v)) : Effect.void
        ),
      reached: (url, version) =>
        Effect.suspend(() => needs.has(url) && version === fleetVersion() ? cameBack(url, version) : Effect.void),
      listed: (urls) =>
        workers.router === undefined ? Effect.void : Effect.forEach(
          [...down.keys(), ...needs.keys()].filter((url) => !urls.includes(url)),
          forget,
          { discard: true }
        ),
      needingWeights: () => [...needs.keys()],
      canMoveFrom: (url) => workers.all.some((w) => w.url !== url && !w.down && !w.quarantined),
      moved: () => {
        counts.moved++
      },
      report: () => ({ down: [...down.keys()], needsWeights: [...needs.values()] }),
      events: Stream.fromPubSub(events),
      takeStepMetrics: () => {
        const metrics = {
          "engine/worker_down": counts.down,
          "engine/attempts_moved": counts.moved,
          "engine/worker_quarantined": counts.quarantined
        }
        counts.down = 0
        counts.moved = 0
        counts.quarantined = 0
        return metrics
      }
    }
  })
