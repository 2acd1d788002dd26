/**
 * Weight versions on SGLang: the version attempts run on, the one-call update (`/update_weight_version`) and the
 * two-phase pause / resume around a trainer's own weight push (`/pause_generation`, `/continue_generation`).
 *
 * **Details**
 * - `update(version)` posts `/update_weight_version {new_version, abort_all_requests: true}` to every worker:
 *   generations in flight end with their partial output (finish `abort`) and are resumed by their callers. Without a
 *   version the next one is the current plus 1 when it is an integer, else the number of updates.
 * - `pause(mode)` closes the client's gate (new attempts wait here, not on the servers' connections) and posts
 *   `/pause_generation {mode}` to every worker; with `abort` SGLang answers once every aborted request has left.
 *   `resume(version)` posts `/continue_generation` to every worker and opens the gate; the version is the given one,
 *   else the first worker's `/get_weight_version` (the trainer's push set it, atomically with the weights).
 * - Every update, pause and resume is logged as a *boundary* (src/engine/WeightVersion.ts). SGLang stamps
 *   `weight_version` when an answer leaves, so an attempt's label can name a version it never ran on:
 *   `/update_weight_version` relabels before the aborted answers come back. {@link WeightUpdates.versionsOf}
 *   therefore decides from the boundaries the attempt crossed (`WeightVersion.attemptVersions`): an attempt that
 *   crossed none ran on the label it got; one cut by an update or an `abort` pause ran on the version it started on;
 *   one that finished after an `abort` pause waited for the resume and ran on the new version; one SGLang kept across
 *   a `retract` / `in_place` pause ran on both.
 * - Control calls fan out to the router's current worker list, read fresh (a worker added at runtime gets the update).
 * - A worker that is down is skipped, and so is one that refuses or resets the connection during the call (it is
 *   marked down, WorkerHealth.ts): a dead worker never fails an update, a pause or a resume; the skipped workers are
 *   logged and reported (`Engine.workers`). A worker that needs weights (back on another version) gets updates and
 *   pauses but is never relabelled by a resume: it is taken back once its own version equals the fleet's.
 */
import { Deferred, Effect, Latch } from "effect"
import * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import * as WeightVersion from "../../../src/engine/WeightVersion.ts"
import * as Instruments from "../../observability/Instruments.ts"
import * as Engine from "../Engine.ts"
import * as Http from "./Http.ts"
import * as StartupChecks from "./StartupChecks.ts"
import type * as WorkerHealth from "./WorkerHealth.ts"
import type * as Workers from "./Workers.ts"

/** The version an attempt started on, and how many boundaries had happened then. */
export interface Start {
  readonly version: string
  readonly epoch: number
}

/** The versions state and the calls that change it. */
export interface WeightUpdates {
  /** The version new attempts run on. */
  readonly version: () => string
  /**
   * Wait while generation is paused, then the version and epoch attempt `rid` starts in; `undefined` when `rid` was
   * aborted while it waited (it never reached a server).
   */
  readonly enter: (rid: string) => Effect.Effect<Start | undefined>
  /**
   * What `enter` gives at once when generation is not paused (the version and epoch now), without an effect;
   * `undefined` when paused: then `enter` waits.
   */
  readonly enterIfOpen: () => Start | undefined
  /** Abort the attempts waiting at the pause whose rid starts with `rid` (SGLang's prefix match). */
  readonly abortWaiting: (rid: string) => Effect.Effect<void>
  /** The version(s) an attempt that started at `start` and answered `label` with `finish` ran on. */
  readonly versionsOf: (
    start: Start,
    label: string | undefined,
    finish: Engine.FinishReason
  ) => WeightVersion.AttemptVersions
  readonly update: (version?: string) => Effect.Effect<string, Engine.EngineError>
  readonly pause: (mode: Engine.PauseMode) => Effect.Effect<void, Engine.EngineError>
  readonly resume: (version?: string) => Effect.Effect<string, Engine.EngineError>
}

/** Versions starting at `initial`; down workers are skipped and marked through `health`. */
export const make = (
  http: Http.Http,
  workers: Workers.Workers,
  initial: string,
  health: WorkerHealth.WorkerHealth
): Effect.Effect<WeightUpdates> =>
  Effect.gen(function*() {
    let version = initial
    // Every update, pause and resume so far, in order; an attempt's epoch is the count when it started.
    const boundaries: Array<WeightVersion.Boundary> = []
    let updates = 0
    const gate = yield* Latch.make(true)
    yield* Instruments.move(Instruments.generationsHeld, 0)
    // Attempts waiting while paused, by rid: an abort (a step boundary's pause) must reach them too, or it would wait
    // for them until the trainer resumes.
    const waiting = new Map<string, Deferred.Deferred<void>>()

    /**
     * Post `body` to `path` on every worker of the current list that is up (and `include`s); every one reached must
     * answer 200. A worker that cannot be reached is marked down and skipped, not a failure.
     */
    const fanOut = (
      path: string,
      body: unknown,
      include: (url: string) => boolean = () => true
    ): Effect.Effect<ReadonlyArray<Http.Answer & { readonly url: string }>, Engine.EngineError> =>
      Effect.gen(function*() {
        const urls = yield* workers.listed(true)
        yield* health.listed(urls)
        const answers = yield* Effect.forEach(
          urls.filter((url) => !workers.isDown(url) && include(url)),
          (url) =>
            http.request(url, path, "POST", body).pipe(
              Effect.flatMap(Http.ok(url, path)),
              Effect.map((answer): (Http.Answer & { readonly url: string }) | undefined => ({ ...answer, url })),
              Effect.catchIf(
                (error) => error.reason === "unreachable",
                (error) => Effect.as(health.markDown(url, error.message), undefined)
              )
            ),
          { concurrency: "unbounded" }
        )
        const skipped = urls.filter((url) => workers.isDown(url))
        if (skipped.length > 0) {
          yield* Effect.logWarning(
            `${path} skipped ${skipped.length} SGLang worker(s) that are down: ${skipped.join(", ")}`
          )
        }
        return answers.filter((answer) => answer !== undefined)
      })

    /** The workers needing weights whose own version is now the fleet's are taken back. */
    const takeBack = (urls: ReadonlyArray<string>): Effect.Effect<void> =>
      Effect.forEach(
        urls,
        (url) => Effect.flatMap(StartupChecks.weightVersion(http, url), (label) => health.reached(url, label)),
        { discard: true }
      )

    const update = (next?: string): Effect.Effect<string, Engine.EngineError> =>
      Effect.gen(function*() {
        updates++
        const value = next ?? WeightVersion.next(version, updates)
        boundaries.push({ _tag: "Update", version: value })
        // abort_all_requests: a generation running across the update returns its partial output (finish `abort`)
        // and its caller resumes it on the new version, so every attempt runs on one version.
        const answers = yield* fanOut(
          "/update_weight_version",
          { new_version: value, abort_all_requests: true } satisfies SglangWire.UpdateWeightVersionRequest
        )
        for (const answer of answers) {
          const r = yield* Http.decodeJson(
            SglangWire.UpdateWeightVersionResponse,
            answer.url,
            "/update_weight_version",
            answer
          )
          if (!r.success) {
            return yield* new Engine.EngineError({
              reason: "refused",
              detail: `SGLang at ${answer.url} refused /update_weight_version: ${r.message ?? "no message"}`,
              url: answer.url
            })
          }
        }
        version = value
        yield* Effect.forEach(answers, (answer) => health.reached(answer.url, value), { discard: true })
        return value
      })

    const pause = (mode: Engine.PauseMode): Effect.Effect<void, Engine.EngineError> =>
      Effect.gen(function*() {
        boundaries.push({ _tag: "Pause", mode })
        yield* gate.close
        yield* fanOut("/pause_generation", { mode } satisfies SglangWire.PauseGenerationRequest)
      })

    const resume = (next?: string): Effect.Effect<string, Engine.EngineError> =>
      Effect.gen(function*() {
        // A worker that needs weights has not been given the trainer's push: it is never relabelled.
        const needing = health.needingWeights()
        const serving = (url: string) => !needing.includes(url)
        const first = (yield* workers.controlTargets(true)).find(serving)
        const value = next ?? (first === undefined ? version : yield* StartupChecks.weightVersion(http, first))
        if (next !== undefined) {
          // The servers label answers with this version from now on, whatever the trainer's push set (nothing runs:
          // no abort needed).
          yield* fanOut(
            "/update_weight_version",
            { new_version: value, abort_all_requests: false } satisfies SglangWire.UpdateWeightVersionRequest,
            serving
          )
        }
        // Before the servers continue: an attempt SGLang kept across the pause may answer as soon as they do.
        version = value
        // The trainer's push reached a worker that needed weights when it set the fleet's version there.
        yield* takeBack(needing)
        boundaries.push({ _tag: "Resume", version: value })
        yield* fanOut("/continue_generation", {})
        yield* gate.open
        return value
      })

    const versionsOf = (start: Start, label: string | undefined, finish: Engine.FinishReason) => {
      const crossed = boundaries.slice(start.epoch)
      // No update or pause ran during the attempt: SGLang's label is right (a trainer may also have relabelled the
      // server without us, e.g. `update_weights_from_disk` with a `weight_version`; the label then is the newer truth).
      if (crossed.length === 0 && label !== undefined) version = label
      return WeightVersion.attemptVersions(start.version, crossed, finish.type === "abort", label)
    }

    return {
      version: () => version,
      enterIfOpen: () => Latch.isOpen(gate) ? { version, epoch: boundaries.length } : undefined,
      enter: (rid) =>
        Effect.suspend(() => {
          const start = Effect.sync((): Start => ({ version, epoch: boundaries.length }))
          if (Latch.isOpen(gate)) return start
          return Effect.gen(function*() {
            const aborted = yield* Deferred.make<void>()
            waiting.set(rid, aborted)
            const opened = yield* Instruments.countedWhile(
              Instruments.generationsHeld,
              Effect.raceFirst(Effect.as(gate.await, true), Effect.as(Deferred.await(aborted), false))
            ).pipe(
              Effect.ensuring(Effect.sync(() => waiting.delete(rid)))
            )
            return opened ? yield* start : undefined
          })
        }),
      abortWaiting: (rid) =>
        Effect.sync(() => {
          if (rid.length === 0) return
          for (const [waiter, aborted] of waiting) if (waiter.startsWith(rid)) Deferred.doneUnsafe(aborted, Effect.void)
        }),
      versionsOf,
      update,
      pause,
      resume
    }
  })
