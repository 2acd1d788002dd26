/**
 * LoRA publication (docs/lora.md): the trainer publishes an adapter directory, the engines load it, and Sessions
 * generate with it — in place (one fixed name, a weight update) or versioned (each Session keeps the version it bound
 * for its whole life).
 *
 * **Details**
 * - Every publication reads the adapter directory first (`AdapterDir.read`): a path that does not exist or is not an
 *   adapter is refused, naming it, before any worker is touched. Publications run one at a time.
 * - *In place* (`--lora-adapter-mode`): the two-phase weight update — pause (`abort`), unload and reload the fixed
 *   name `relax_policy_lora` on every worker, resume labelled with the adapter version — so every attempt's
 *   `weight_versions` names the adapter it ran on. Requests name the adapter once one is published.
 * - *Versioned* (`--enable-versioned-lora-publication`, with `--fully-async`): the new version is loaded, pinned, on
 *   every worker and only then committed as the default (src/lora/LoraRegistry.ts); generation never pauses. A Session binds
 *   the default at its first model request and names it (`lora_path`) on every attempt, resumed ones included
 *   (LoraEngine.ts). A retired version is unloaded from every worker once no Session holds it (reclaim); a
 *   publication that finds every slot taken reclaims, then waits up to `capacityWait` for a Session to release one,
 *   then fails naming the Sessions that hold the old version.
 * - Failure: a load refused by one worker unloads the candidate from the others and keeps the old default (the
 *   publication may be retried); if a worker cannot confirm that unload the run cannot tell what it holds, and later
 *   publications are refused. A reclaim a worker cannot confirm keeps the version counted (a warning says so) and is
 *   tried again at the next reclaim.
 * - A worker that appears in the fleet later (a router's list) gets every live version before a new Session binds.
 */
import { Clock, Context, Data, Deferred, Duration, Effect, Semaphore } from "effect"
import { randomBytes } from "node:crypto"
import * as AdapterFiles from "../../src/lora/AdapterFiles.ts"
import * as LoraRegistry from "../../src/lora/LoraRegistry.ts"
import * as AdapterDir from "../engine/AdapterDir.ts"
import * as Engine from "../engine/Engine.ts"

/** How the rollout uses LoRA adapters: not at all, one fixed name updated in place, or pinned versions. */
export type Mode = "off" | "in-place" | "versioned"

/** A publication's input: the adapter directory, and optionally its digest (default: the files' SHA-256). */
export interface PublishInput {
  readonly path: string
  readonly digest?: string | undefined
}

/** What a publication gave: the version (the adapter name engines know), its number, and whether it was new. */
export interface Published {
  readonly version: string
  readonly id: number
  readonly digest: string
  /** The same content was published before: nothing was loaded. */
  readonly noOp: boolean
}

/**
 * A publication failed: `reason` says how (`adapter-path`: the path is no adapter; `disabled`: LoRA is off;
 * `registry`: the registry refused, `capacity` among them; `load`: a worker refused the load; `blocked`: an earlier
 * failure left the engines in an unknown state).
 */
export class LoraPublishError extends Data.TaggedError("LoraPublishError")<{
  readonly reason: "adapter-path" | "disabled" | "registry" | "load" | "blocked"
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.detail
  }
}

export interface LoraVersionsOptions {
  readonly mode: Mode
  /** Versions owning engine resources at once (default 2). */
  readonly capacity?: number | undefined
  /** How long a publication waits for a slot when every one is taken (default 60 seconds). */
  readonly capacityWait?: Duration.Input | undefined
  /** The run's epoch in adapter names (default: 12 random hex digits). */
  readonly epoch?: string | undefined
}

export interface LoraVersionsShape {
  readonly mode: Mode
  readonly publish: (input: PublishInput) => Effect.Effect<Published, LoraPublishError>
  /** The adapter a Session generates with: versioned, its bound version (bound now at its first request). */
  readonly adapterFor: (sessionId: string) => Effect.Effect<string | undefined, LoraRegistry.LoraRegistryError>
  /**
   * A worker answered that it never loaded a version (it restarted since): load every live version again on every
   * worker (a worker that holds one already keeps it).
   */
  readonly reload: Effect.Effect<void>
  /** The Session ended: release its version (a retired version nobody holds is reclaimed). */
  readonly release: (sessionId: string) => Effect.Effect<void>
  /** The registry, where this process holds it (not on a cluster member: the fleet's writer does). */
  readonly registry?: LoraRegistry.Registry | undefined
  /** `lora/...` counters since the last call (publications, reclaims, publish latency, versions live, bound Sessions). */
  readonly takeStepMetrics: Effect.Effect<Readonly<Record<string, number>>>
}

/** The fixed adapter name of in-place mode (Relax's legacy path). */
export const inPlaceName = LoraRegistry.defaultPrefix

export class LoraVersions extends Context.Service<LoraVersions, LoraVersionsShape>()("relax-agentic/LoraVersions") {}

const registryFailure = (error: LoraRegistry.LoraRegistryError) =>
  new LoraPublishError({
    reason: error.reason === "publication-blocked" ? "blocked" : "registry",
    detail: error.detail,
    cause: error
  })

/** The service over `engine` (which must carry an adapter port unless `mode` is `off`). */
export const make = (
  engine: Engine.EngineShape,
  options: LoraVersionsOptions
): Effect.Effect<LoraVersionsShape, Engine.EngineError> =>
  Effect.gen(function*() {
    const adapters = engine.adapters
    if (options.mode !== "off" && adapters === undefined) {
      return yield* new Engine.EngineError({
        reason: "config",
        detail: "--lora-adapter-mode: this engine cannot load LoRA adapters; use --engine sglang (servers launched " +
          "with --enable-lora) or the embedded engine without --embedded-policy"
      })
    }
    const registry = new LoraRegistry.Registry({
      epoch: options.epoch ?? randomBytes(6).toString("hex"),
      capacity: options.capacity
    })
    const capacityWait = Duration.fromInputUnsafe(options.capacityWait ?? "60 seconds")
    const lock = yield* Semaphore.make(1)
    // The workers every live version is loaded on (a worker missing here gets them before a new Session binds).
    const synced = new Set<string>()
    // Completed whenever a Session releases a version: a publication waiting for a slot looks again.
    let released = Deferred.makeUnsafe<void>()
    let inPlace: { readonly version: string; readonly digest: string } | undefined
    let inPlaceCount = 0
    // Where each version was loaded from, for a worker that joins later.
    const paths = new Map<number, string>()
    const counters = { publications: 0, reclaims: 0, publishSeconds: 0, unconfirmed: 0 }

    const port = adapters ?? {
      workers: Effect.succeed([]),
      load: () => Effect.void,
      unload: () => Effect.void
    }

    /** Unload `name` from every worker of `workers`; the workers that did not confirm it. */
    const unloadFrom = (workers: ReadonlyArray<string>, name: string) =>
      Effect.forEach(
        workers,
        (worker) =>
          Effect.match(port.unload(worker, name), {
            onFailure: (error) => [{ worker, error }],
            onSuccess: () => []
          }),
        { concurrency: "unbounded" }
      ).pipe(Effect.map((lists) => lists.flat()))

    /** Unload every retired version nobody holds (and retry unconfirmed ones), once each. */
    const reclaim = Effect.gen(function*() {
      const tried = new Set<number>()
      for (;;) {
        const version = registry.claimReclaimable()
        if (version === undefined || tried.has(version.id)) {
          if (version !== undefined) registry.reclaimUnconfirmed(version.id)
          return
        }
        tried.add(version.id)
        const failed = yield* unloadFrom(yield* port.workers, version.name)
        if (failed.length === 0) {
          registry.reclaimed(version.id)
          counters.reclaims++
        } else {
          registry.reclaimUnconfirmed(version.id)
          counters.unconfirmed++
          yield* Effect.logWarning(
            `LoRA version ${version.name}: ${failed.map((f) => `${f.worker} (${f.error.message})`).join(", ")} ` +
              "did not confirm unloading it; it stays counted against the capacity and is unloaded again at the next " +
              "reclaim"
          )
        }
      }
    })

    /** Load every live (published or retired) version on the workers that do not have them yet. */
    const loadLive = (workers: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const live = registry.all().filter((v) => v.state === "published" || v.state === "retired")
        for (const worker of workers) {
          for (const version of live) {
            yield* port.load(worker, { name: version.name, path: paths.get(version.id) ?? "", pinned: true }).pipe(
              Effect.catch((error) =>
                // A worker that holds it already refuses the load: it has it.
                /already loaded/i.test(error.message) ? Effect.void : Effect.logWarning(
                  `LoRA version ${version.name} could not be loaded on ${worker}: ${error.message}`
                )
              )
            )
          }
          synced.add(worker)
        }
      })
    const syncWorkers = Effect.flatMap(port.workers, (workers) => loadLive(workers.filter((w) => !synced.has(w))))
    /** Allocate a slot: reclaim when full, then wait for a release, up to `capacityWait`. */
    const allocate = (digest: string) =>
      Effect.gen(function*() {
        const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(capacityWait)
        for (;;) {
          const publication = registry.publish(digest)
          if (!(publication instanceof LoraRegistry.LoraRegistryError)) return publication
          if (publication.reason !== "capacity") return yield* registryFailure(publication)
          yield* reclaim
          const again = registry.publish(digest)
          if (!(again instanceof LoraRegistry.LoraRegistryError)) return again
          if (again.reason !== "capacity") return yield* registryFailure(again)
          const left = deadline - (yield* Clock.currentTimeMillis)
          if (left <= 0) {
            return yield* new LoraPublishError({
              reason: "registry",
              detail: `${again.detail} (waited ${Duration.format(capacityWait)} for a Session to release one)`,
              cause: again
            })
          }
          const waiting = released
          yield* Effect.timeoutOption(Deferred.await(waiting), Duration.millis(left))
        }
      })

    const publishVersioned = (dir: AdapterDir.AdapterDir, digest: string) =>
      Effect.gen(function*() {
        const publication = yield* allocate(digest)
        const { version } = publication
        if (publication._tag === "NoOp") return { version: version.name, id: version.id, digest, noOp: true }
        paths.set(version.id, dir.path)
        const workers = yield* port.workers
        const loads = yield* Effect.forEach(
          workers,
          (worker) =>
            Effect.match(port.load(worker, { name: version.name, path: dir.path, pinned: true }), {
              onFailure: (error) => ({ worker, error }),
              onSuccess: () => ({ worker, error: undefined })
            }),
          { concurrency: "unbounded" }
        )
        const refused = loads.filter((l) => l.error !== undefined)
        if (refused.length > 0) {
          // The candidate leaves every worker (a refused load may have registered it too), the old default stays.
          const unconfirmed = yield* unloadFrom(workers, version.name)
          if (unconfirmed.length === 0) registry.failed(version.id, version.attempt)
          else registry.fatal(version.id)
          const what = refused.map((l) => `${l.worker}: ${l.error?.message}`).join("; ")
          return yield* new LoraPublishError({
            reason: unconfirmed.length === 0 ? "load" : "blocked",
            detail: `LoRA version ${version.name} (${dir.path}) was not loaded on every worker (${what}); ` +
              (unconfirmed.length === 0
                ? `it was unloaded from the others and the default stays ${registry.default?.name ?? "unpublished"}; ` +
                  "publish it again once the workers accept it"
                : `${unconfirmed.map((u) => u.worker).join(", ")} did not confirm unloading it, so no later ` +
                  "publication is accepted: restart the run"),
            cause: refused[0]?.error
          })
        }
        for (const worker of workers) registry.loaded(version.id, version.attempt, worker)
        const committed = registry.commit(version.id, version.attempt, workers)
        if (committed instanceof LoraRegistry.LoraRegistryError) return yield* registryFailure(committed)
        for (const worker of workers) synced.add(worker)
        yield* reclaim
        return { version: committed.name, id: committed.id, digest, noOp: false }
      })

    const publishInPlace = (dir: AdapterDir.AdapterDir, digest: string) =>
      Effect.gen(function*() {
        if (inPlace !== undefined && inPlace.digest === digest) {
          return { version: inPlace.version, id: inPlaceCount, digest, noOp: true }
        }
        const id = inPlaceCount + 1
        const version = LoraRegistry.nameOf(registry.prefix, registry.epoch, id, digest)
        // The two-phase update: nothing runs while the fixed name changes content on the workers.
        yield* Effect.mapError(engine.pauseGeneration("abort"), (error) => loadFailure(dir, error))
        const swapped = Effect.gen(function*() {
          const workers = yield* port.workers
          yield* Effect.forEach(workers, (worker) =>
            Effect.andThen(
              inPlace === undefined ? Effect.void : port.unload(worker, inPlaceName),
              port.load(worker, { name: inPlaceName, path: dir.path, pinned: true })
            ), { concurrency: "unbounded", discard: true })
        })
        const outcome = yield* Effect.result(swapped)
        // Generation continues either way: on the new adapter, or (a failed swap) on the version it had.
        const resumed = yield* Effect.mapError(
          engine.resumeGeneration(outcome._tag === "Success" ? version : inPlace?.version),
          (error) => loadFailure(dir, error)
        )
        if (outcome._tag === "Failure") return yield* loadFailure(dir, outcome.failure)
        inPlaceCount = id
        inPlace = { version: resumed, digest }
        return { version: resumed, id, digest, noOp: false }
      })

    const publish = (input: PublishInput): Effect.Effect<Published, LoraPublishError> =>
      Effect.gen(function*() {
        if (options.mode === "off") {
          return yield* new LoraPublishError({
            reason: "disabled",
            detail: "LoRA publication is off: start the rollout with --lora-adapter-mode (in place) or also " +
              "--enable-versioned-lora-publication (versioned, with --fully-async)"
          })
        }
        const dir = yield* AdapterDir.read(input.path).pipe(
          Effect.mapError((error) =>
            new LoraPublishError({ reason: "adapter-path", detail: error.detail, cause: error })
          )
        )
        const digest = input.digest ?? dir.digest
        const started = yield* Clock.currentTimeMillis
        const published = yield* lock.withPermits(1)(
          options.mode === "versioned" ? publishVersioned(dir, digest) : publishInPlace(dir, digest)
        )
        if (!published.noOp) {
          counters.publications++
          counters.publishSeconds += ((yield* Clock.currentTimeMillis) - started) / 1000
        }
        return published
      })

    const adapterFor = (sessionId: string): Effect.Effect<string | undefined, LoraRegistry.LoraRegistryError> => {
      if (options.mode === "in-place") return Effect.succeed(inPlace === undefined ? undefined : inPlaceName)
      if (options.mode === "off") return Effect.succeed(undefined)
      const bound = registry.bindingOf(sessionId)
      if (bound !== undefined) return Effect.succeed(bound.name)
      // A new Session: a worker that joined since the last publication gets every live version first.
      return Effect.andThen(
        lock.withPermits(1)(syncWorkers),
        Effect.suspend(() => {
          const version = registry.bind(sessionId)
          return version instanceof LoraRegistry.LoraRegistryError ? Effect.fail(version) : Effect.succeed(version.name)
        })
      )
    }

    const release = (sessionId: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (options.mode !== "versioned") return Effect.void
        const bound = registry.bindingOf(sessionId)
        registry.release(sessionId)
        if (bound === undefined || bound.state !== "retired") return Effect.void
        const waiting = released
        released = Deferred.makeUnsafe<void>()
        Deferred.doneUnsafe(waiting, Effect.void)
        return lock.withPermits(1)(reclaim)
      })

    const takeStepMetrics = Effect.sync(() => {
      if (options.mode === "off") return {}
      const metrics: Record<string, number> = {
        "lora/publications": counters.publications,
        "lora/reclaims": counters.reclaims,
        "lora/unload_unconfirmed": counters.unconfirmed,
        "lora/publish_latency_s": counters.publications === 0 ? 0 : counters.publishSeconds / counters.publications,
        "lora/versions_live": options.mode === "versioned" ? registry.live().length : inPlace === undefined ? 0 : 1
      }
      for (const [id, sessions] of registry.boundSessions()) metrics[`lora/bound_sessions/${id}`] = sessions.length
      counters.publications = 0
      counters.reclaims = 0
      counters.unconfirmed = 0
      counters.publishSeconds = 0
      return metrics
    })

    // A worker that lost its adapters (it restarted) refused a request: every live version is loaded again everywhere.
    const reload = lock.withPermits(1)(Effect.flatMap(port.workers, loadLive))

    return { mode: options.mode, publish, adapterFor, release, reload, registry, takeStepMetrics }
  })

const loadFailure = (dir: AdapterDir.AdapterDir, error: Engine.EngineError | AdapterFiles.AdapterPathError) =>
  new LoraPublishError({
    reason: "load",
    detail: `LoRA adapter ${dir.path} could not be swapped in place: ${error.message}; generation continues on ` +
      "the adapter it had",
    cause: error
  })
