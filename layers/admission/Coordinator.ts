/**
 * The admission coordinator (docs/sglang.md "KV scheduling"): the one writer of the fleet's KV ledger
 * (src/admission/Ledger.ts) that backend attempts wait on, and its snapshot loop.
 *
 * **Details**
 * - {@link makeLocal} is the coordinator of one process: the ledger, a `Deferred` per waiting ticket, and a fiber that
 *   reads the fleet's KV figures every 2 s (each read bounded by the `/metrics` timeout; any failure counts as no
 *   snapshot, so admission degrades to bypass instead of blocking on missing data) and drains the queue.
 * - `acquire` waits until the ticket is admitted or bypassed. Interrupting it (the attempt's fiber interrupted, its
 *   step closed, a weight update) cancels the ticket, so a waiter never outlives its attempt; `release` gives an
 *   admitted ticket's tokens back. Closing the coordinator's scope bypasses every waiter (`shutdown`).
 * - In a cluster the runners' attempts reserve against one ledger through the fleet's single writer
 *   (layers/cluster/AdmissionWriter.ts implements this interface over it).
 * - While the queue's head waits on the pressure guard (a worker's usage at the last read), an admitted attempt that
 *   ends or a cancelled one has the figures read again at once, at most every `pressureRereadMs`: the reading that
 *   blocks the head predates the tokens just given back, and waiting for the next period would leave the pool idle
 *   (Relax waits; with a headroom near the threshold its queue stalls up to 2 s at a time).
 * - A read that fails is logged once per kind of failure (a worker whose `/metrics` lacks the gauges: one warning
 *   naming `--enable-metrics`), not every 2 s.
 */
import { Clock, Context, Deferred, Duration, Effect, Metric, type Scope } from "effect"
import type * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"
import * as Ledger from "../../src/admission/Ledger.ts"
import type * as KvSnapshot from "../engine/KvSnapshot.ts"
import * as KvInstruments from "./KvInstruments.ts"

/** What became of a ticket once it no longer waits. */
export type Final = Ledger.Resolved["decision"]

export interface CoordinatorShape {
  /** Wait for room for `ticket`; interrupting the wait cancels the ticket. */
  readonly acquire: (ticket: Ledger.Ticket) => Effect.Effect<Final>
  /** The attempt of an admitted ticket ended: give its tokens back (idempotent). */
  readonly release: (ticketId: string) => Effect.Effect<void>
  /** The ledger's step metrics (Relax's `agentic_kv/...` names); `reset` starts the next step's counters. */
  readonly metrics: (reset: boolean) => Effect.Effect<Readonly<Record<string, number>>>
}

/** The coordinator backend attempts wait on (local, or the cluster's single writer). */
export class Coordinator extends Context.Service<Coordinator, CoordinatorShape>()("relax-agentic/Coordinator") {}

/** The ledger's options from the resolved settings. */
export const ledgerOptions = (settings: AdmissionOptions.AdmissionSettings): Ledger.LedgerOptions => ({
  headroom: settings.headroom,
  pressureThreshold: settings.pressureThreshold,
  maxWaitMs: settings.maxWaitMs,
  staleMs: settings.staleMs,
  leaseTtlMs: settings.leaseTtlMs
})

/** One process's coordinator over `read` (the engine's KV figures), refreshed every `reconcileMs` in the scope. */
export const makeLocal = (
  settings: AdmissionOptions.AdmissionSettings,
  read: KvSnapshot.Read
): Effect.Effect<CoordinatorShape & { readonly ledger: Ledger.Ledger }, never, Scope.Scope> =>
  Effect.gen(function*() {
    const ledger = new Ledger.Ledger(ledgerOptions(settings))
    const waiters = new Map<string, Deferred.Deferred<Final>>()
    const warned = new Set<string>()
    let lastReportAt = 0
    // Completed to read the figures before the period ends (the head waits on the pressure guard).
    let reread = Deferred.makeUnsafe<void>()

    const wake = (resolved: ReadonlyArray<Ledger.Resolved>) => {
      for (const r of resolved) {
        const waiter = waiters.get(r.ticket)
        if (waiter === undefined) continue
        waiters.delete(r.ticket)
        Deferred.doneUnsafe(waiter, Effect.succeed(r.decision))
      }
    }

    const publish = (now: number) => {
      // The Prometheus gauges follow the ledger at most once a second (every decision would be noise).
      if (now - lastReportAt < 1000) return
      lastReportAt = now
      KvInstruments.setBudget(ledger.metrics(now, false))
    }

    const reconcileOnce = Effect.gen(function*() {
      const snapshot = yield* read.pipe(
        Effect.timeoutOption(Duration.millis(settings.metricsTimeoutMs)),
        Effect.map((found) => found._tag === "Some" ? found.value : undefined),
        Effect.catch((error: KvSnapshot.KvSnapshotError) =>
          Effect.gen(function*() {
            const key = `${error.reason}:${error.url}`
            if (!warned.has(key)) {
              warned.add(key)
              yield* Effect.logWarning(error.message)
            }
            yield* Metric.update(KvInstruments.failedReads({ reason: error.reason }), 1)
            return undefined
          })
        )
      )
      const now = yield* Clock.currentTimeMillis
      wake(ledger.reconcile(snapshot, now))
      lastReportAt = 0
      publish(now)
    })

    const rereadIfPressure = () => {
      if (ledger.waitsOnPressure) Deferred.doneUnsafe(reread, Effect.void)
    }

    /** Until the next read: the period, or a reread asked for (no sooner than `pressureRereadMs` after the last). */
    const untilNextRead = (readAt: number) =>
      Effect.raceFirst(
        Effect.sleep(Duration.millis(settings.reconcileMs)),
        Effect.gen(function*() {
          yield* Deferred.await(reread)
          const now = yield* Clock.currentTimeMillis
          yield* Effect.sleep(Duration.millis(Math.max(0, readAt + settings.pressureRereadMs - now)))
        })
      )

    // A reread asked for while a read is under way is kept for the next wait.
    const readThenWait = Effect.gen(function*() {
      reread = Deferred.makeUnsafe<void>()
      const readAt = yield* Clock.currentTimeMillis
      yield* reconcileOnce
      yield* untilNextRead(readAt)
    })

    const firstReadAt = yield* Clock.currentTimeMillis
    yield* reconcileOnce
    yield* untilNextRead(firstReadAt).pipe(
      Effect.andThen(readThenWait.pipe(Effect.forever)),
      Effect.forkScoped
    )
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => wake(ledger.shutdown(now))))
    )

    const acquire = (ticket: Ledger.Ticket): Effect.Effect<Final> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const { decision, resolved } = ledger.acquire(ticket, now)
          wake(resolved)
          KvInstruments.count(decision)
          publish(now)
          if (decision.action !== "wait") return decision
          const waiter = Deferred.makeUnsafe<Final>()
          waiters.set(ticket.id, waiter)
          return yield* restore(Deferred.await(waiter)).pipe(
            Effect.tap((final) => Effect.sync(() => KvInstruments.count(final))),
            Effect.onInterrupt(() =>
              Effect.flatMap(Clock.currentTimeMillis, (at) =>
                Effect.sync(() => {
                  waiters.delete(ticket.id)
                  wake(ledger.cancel(ticket.id, at))
                  rereadIfPressure()
                }))
            )
          )
        })
      )

    return {
      ledger,
      acquire,
      release: (ticketId) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.sync(() => {
            wake(ledger.release(ticketId, now))
            rereadIfPressure()
            publish(now)
          })),
      metrics: (reset) => Effect.map(Clock.currentTimeMillis, (now) => ledger.metrics(now, reset))
    }
  })
