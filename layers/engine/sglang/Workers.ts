/**
 * Which SGLang servers the client talks to: the worker list (given, or discovered from a router) and session-sticky
 * routing over it.
 *
 * **Details**
 * - Router discovery: `GET /workers` (`workers[].url`, healthy ones), falling back to the older router's
 *   `GET /list_workers` (`urls`). A `--dp-aware` router lists each DP rank as `http://host:port@<rank>`
 *   (`BasicWorkerBuilder::dp_config` in smg): the rank is stripped and the origins de-duplicated, as Relax's
 *   `router_worker_base_url`.
 * - The router's list changes at runtime (`POST /workers`, service discovery, elastic scale-out): every fan-out
 *   (`controlTargets`) reads it again, so a worker added later gets the next weight update, abort and session close, and a
 *   removed one is no longer called. Weight updates and pauses read it fresh; aborts and session closes accept a list
 *   up to one second old (they are frequent). When the router cannot be read the last list is used.
 * - With a router, generation goes through it: one bounded target standing for the router's whole fleet, and the
 *   router picks the worker from `X-SMG-Routing-Key`.
 * - Without one, a Session's requests go to the worker it was first pinned to (prefix-cache hits) while that worker is
 *   up; a new Session goes to the least busy worker. At most 100,000 pinnings are kept (the oldest is forgotten: it
 *   only costs a prefix-cache miss).
 * - A worker marked down (WorkerHealth.ts: it refused a connection or reset one) gets no request and no control call
 *   until it answers again; one that needs weights (back on other weights than the fleet's) gets no request.
 */
import { Clock, Effect, Semaphore } from "effect"
import * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import * as Engine from "../Engine.ts"
import * as Http from "./Http.ts"

/** One origin requests are sent to, with its bounds and load. */
export interface Worker {
  readonly url: string
  readonly permits: Semaphore.Semaphore
  /** Set after a connection error; a down worker gets requests only when every worker is down. */
  down: boolean
  /** Back on other weights than the fleet's (WorkerHealth.ts): it gets no request until an update reaches it. */
  quarantined: boolean
  inFlight: number
  /** Sessions currently pinned here, so new sessions spread over the workers. */
  sessions: number
}

/** The worker list and the routing over it. */
export interface Workers {
  /** The workers requests are sent to (with a router: those of the startup, for health and checks). */
  readonly all: ReadonlyArray<Worker>
  /**
   * The origins a control call fans out to: the given workers, or the router's current list (`fresh`: read now;
   * else at most one second old), less the workers marked down.
   */
  readonly controlTargets: (fresh: boolean) => Effect.Effect<ReadonlyArray<string>>
  /** Every origin listed (the down ones too), as `controlTargets` reads them. */
  readonly listed: (fresh: boolean) => Effect.Effect<ReadonlyArray<string>>
  /** Whether the worker at `url` is marked down. */
  readonly isDown: (url: string) => boolean
  /** Mark the worker at `url` down or up (WorkerHealth.ts decides). */
  readonly setDown: (url: string, down: boolean) => void
  /** Mark the worker at `url` as needing weights, or serving again. */
  readonly setQuarantined: (url: string, quarantined: boolean) => void
  /** The router, when generation goes through one. */
  readonly router: Worker | undefined
  /** The target of a request of `sessionId`, avoiding `exclude` (already tried) where possible. */
  readonly pick: (sessionId: string | undefined, exclude: ReadonlySet<Worker>) => Worker
}

const stickyLimit = 100_000

/** How long a router's worker list is reused by aborts and session closes. */
const listTtlMs = 1000

/**
 * A router's worker URL as an origin: without a trailing slash and without the `@<rank>` suffix a `--dp-aware`
 * router adds (`http://10.0.0.1:30000@0` would otherwise parse as user-info `10.0.0.1:30000` at host `0`).
 */
export const originOf = (url: string): string => Http.trimSlash(url.replace(/@\d+$/, ""))

/** Origins of a router's list: ranks stripped, duplicates removed, first-seen order kept. */
export const origins = (urls: ReadonlyArray<string>): ReadonlyArray<string> => [...new Set(urls.map(originOf))]

/** The router's workers: `GET /workers`, falling back to `GET /list_workers`. */
export const discover = (http: Http.Http, router: string): Effect.Effect<ReadonlyArray<string>, Engine.EngineError> =>
  Effect.gen(function*() {
    const workers = yield* http.request(router, "/workers", "GET").pipe(
      Effect.flatMap(Http.ok(router, "/workers")),
      Effect.flatMap((answer) => Http.decodeJson(SglangWire.WorkersResponse, router, "/workers", answer)),
      Effect.map((r) => r.workers.filter((w) => w.is_healthy !== false).map((w) => w.url)),
      Effect.catch(() =>
        http.request(router, "/list_workers", "GET").pipe(
          Effect.flatMap(Http.ok(router, "/list_workers")),
          Effect.flatMap((answer) => Http.decodeJson(SglangWire.ListWorkersResponse, router, "/list_workers", answer)),
          Effect.map((r) => r.urls)
        )
      ),
      Effect.mapError((error) =>
        new Engine.EngineError({
          reason: "no-workers",
          detail: `Failed to query SGLang workers from the router at ${router} (GET /workers, then /list_workers): ` +
            error.message,
          url: router,
          cause: error
        })
      )
    )
    if (workers.length === 0) {
      return yield* new Engine.EngineError({
        reason: "no-workers",
        detail: `SGLang returned no workers: the router at ${router} lists none`,
        url: router
      })
    }
    return origins(workers)
  })

/** The workers given (`workerUrls`) or discovered from `routerUrl`, each bounded to `concurrency` requests. */
export const make = (
  http: Http.Http,
  options: {
    readonly workerUrls: ReadonlyArray<string>
    readonly routerUrl: string | undefined
    readonly concurrency: number
  }
): Effect.Effect<Workers, Engine.EngineError> =>
  Effect.gen(function*() {
    const { routerUrl, concurrency } = options
    const makeWorker = (url: string, permits: number) =>
      Effect.map(
        Semaphore.make(permits),
        (semaphore): Worker => ({ url, permits: semaphore, down: false, quarantined: false, inFlight: 0, sessions: 0 })
      )
    const urls = routerUrl === undefined ? options.workerUrls.map(Http.trimSlash) : yield* discover(http, routerUrl)
    const all = yield* Effect.forEach(urls, (url) => makeWorker(url, concurrency))
    const router = routerUrl === undefined ? undefined : yield* makeWorker(routerUrl, concurrency * all.length)
    const sticky = new Map<string, Worker>()

    let lastList: { readonly urls: ReadonlyArray<string>; readonly at: number } = {
      urls,
      at: yield* Clock.currentTimeMillis
    }
    // Origins marked down (WorkerHealth.ts), given or listed by the router.
    const down = new Set<string>()
    const byUrl = new Map(all.map((w) => [w.url, w]))
    const listed = (fresh: boolean): Effect.Effect<ReadonlyArray<string>> =>
      routerUrl === undefined ? Effect.succeed(urls) : Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (!fresh && now - lastList.at < listTtlMs) return lastList.urls
        return yield* discover(http, routerUrl).pipe(
          Effect.tap((next) =>
            Effect.sync(() => {
              lastList = { urls: next, at: now }
            })
          ),
          Effect.catch((error) =>
            Effect.as(
              Effect.logWarning(`${error.message}; using the last list of ${lastList.urls.length} worker(s)`),
              lastList.urls
            )
          )
        )
      })

    const controlTargets = (fresh: boolean): Effect.Effect<ReadonlyArray<string>> =>
      down.size === 0 ? listed(fresh) : Effect.map(listed(fresh), (urls) => urls.filter((url) => !down.has(url)))

    const pick = (sessionId: string | undefined, exclude: ReadonlySet<Worker>): Worker => {
      if (router !== undefined) return router
      const known = sessionId === undefined ? undefined : sticky.get(sessionId)
      if (known !== undefined && !known.down && !known.quarantined && !exclude.has(known)) return known
      const serving = all.filter((w) => !w.quarantined)
      const up = serving.filter((w) => !w.down && !exclude.has(w))
      // Every worker down: try the down ones (one may be back before its probe says so); never one needing weights
      // while another has the fleet's.
      const candidates = up.length > 0 ? up : serving.filter((w) => !exclude.has(w))
      const pool = candidates.length > 0 ? candidates : serving.length > 0 ? serving : all
      let best = pool[0]!
      for (const w of pool) {
        if (w.inFlight < best.inFlight || (w.inFlight === best.inFlight && w.sessions < best.sessions)) best = w
      }
      if (sessionId !== undefined) {
        if (known !== undefined) known.sessions--
        // Bounded memory for long runs: forget the oldest pinning (it only costs a prefix-cache miss).
        if (sticky.size >= stickyLimit) {
          const oldest = sticky.entries().next().value
          if (oldest !== undefined) {
            sticky.delete(oldest[0])
            oldest[1].sessions--
          }
        }
        sticky.set(sessionId, best)
        best.sessions++
      }
      return best
    }
    return {
      all,
      controlTargets,
      listed,
      router,
      pick,
      isDown: (url) => down.has(url),
      setDown: (url, isDown) => {
        if (isDown) down.add(url)
        else down.delete(url)
        const worker = byUrl.get(url)
        if (worker !== undefined) worker.down = isDown
      },
      setQuarantined: (url, quarantined) => {
        const worker = byUrl.get(url)
        if (worker !== undefined) worker.quarantined = quarantined
      }
    }
  })
