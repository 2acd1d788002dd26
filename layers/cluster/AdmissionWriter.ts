/**
 * KV admission across a cluster (docs/sglang.md "KV scheduling", docs/scale-out.md): one fleet ledger, the single
 * writer `kv-admission` (layers/cluster/SingleWriter.ts), that every runner's attempts reserve against and the
 * controller reads the step's metrics from.
 *
 * **Details**
 * - The writer is one process's coordinator (layers/admission/Coordinator.ts) on the runner that owns its entity,
 *   reading the KV figures through that runner's engine (with SGLang: the fleet every runner shares).
 * - A waiting ticket is a long poll: `acquire` starts the wait on the writer and answers within `holdMs` (admitted,
 *   bypassed, or still waiting); the runner then asks `await` again, each call bounded by the client's timeout. An
 *   interrupted attempt sends `cancel` (the writer interrupts its wait: the ticket leaves the queue) and an admitted
 *   one `release`.
 * - A runner whose call fails or times out (the writer's runner died, the shard is moving) sends the attempt without
 *   a lease at once, counts it (`relax_agentic_kv_admission_unreachable_total`, and a warning once a minute), and
 *   cancels the ticket in the background: it never hangs on the writer. A ticket the writer no longer knows (it
 *   restarted) is bypassed as degraded.
 * - A lease whose runner died before releasing it expires with the lease TTL (600 s), as in Relax.
 */
import { Clock, Duration, Effect, Fiber, Layer, Metric, Option, Schema } from "effect"
import type { Sharding } from "effect/cluster"
import type * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"
import * as Admission from "../admission/Admission.ts"
import * as Coordinator from "../admission/Coordinator.ts"
import * as KvInstruments from "../admission/KvInstruments.ts"
import * as Engine from "../engine/Engine.ts"
import * as SingleWriter from "./SingleWriter.ts"

/** The writer's name (its entity id). */
export const writerName = "kv-admission"

const Ticket = Schema.Struct({ id: Schema.String, tokens: Schema.Finite, protected: Schema.Boolean })

const Final = Schema.Union([
  Schema.Struct({ action: Schema.Literal("admit"), leaseId: Schema.String, waitedMs: Schema.Finite }),
  Schema.Struct({
    action: Schema.Literal("bypass"),
    reason: Schema.Literals(["protected", "degraded", "aged", "cancelled"]),
    waitedMs: Schema.Finite
  })
])

const Polled = Schema.Union([Final, Schema.Struct({ action: Schema.Literal("wait") })])

/** Start (or join) a ticket's wait; answers within `holdMs`. */
export const Acquire = SingleWriter.op("acquire", Schema.Struct({ ticket: Ticket, holdMs: Schema.Finite }), Polled)
/** Keep waiting for a ticket; answers within `holdMs`. */
export const Await = SingleWriter.op("await", Schema.Struct({ ticketId: Schema.String, holdMs: Schema.Finite }), Polled)
/** The attempt is gone: leave the queue, give back any lease. */
export const Cancel = SingleWriter.op("cancel", Schema.Struct({ ticketId: Schema.String }), Schema.Null)
/** The admitted attempt ended: give its tokens back. */
export const Release = SingleWriter.op("release", Schema.Struct({ ticketId: Schema.String }), Schema.Null)
/** The ledger's step metrics (`reset`: the next step's counters start). */
export const Metrics = SingleWriter.op(
  "metrics",
  Schema.Struct({ reset: Schema.Boolean }),
  Schema.Record(Schema.String, Schema.Finite)
)

/** How long the writer holds a poll before answering "still waiting". */
export const defaultHoldMs = 5000

/** The writer, built where its entity lives: a local coordinator over `read`, and the tickets' waits. */
export const writer = (
  settings: AdmissionOptions.AdmissionSettings,
  read: Engine.EngineShape["kvSnapshot"]
): SingleWriter.WriterFactory =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const coordinator = yield* Coordinator.makeLocal(
      settings,
      read ?? Admission.noFigures
    )
    const waits = new Map<string, Fiber.Fiber<Coordinator.Final>>()

    const poll = (ticketId: string, holdMs: number) =>
      Effect.gen(function*() {
        const fiber = waits.get(ticketId)
        if (fiber === undefined) {
          return { action: "bypass", reason: "degraded", waitedMs: 0 } satisfies typeof Polled.Type
        }
        const done = yield* Fiber.join(fiber).pipe(Effect.timeoutOption(Duration.millis(holdMs)))
        if (Option.isNone(done)) return { action: "wait" } satisfies typeof Polled.Type
        waits.delete(ticketId)
        return done.value
      })

    return [
      SingleWriter.handle(Acquire, ({ ticket, holdMs }) =>
        Effect.gen(function*() {
          if (!waits.has(ticket.id)) waits.set(ticket.id, yield* Effect.forkIn(coordinator.acquire(ticket), scope))
          return yield* poll(ticket.id, holdMs)
        })),
      SingleWriter.handle(Await, ({ ticketId, holdMs }) => poll(ticketId, holdMs)),
      SingleWriter.handle(Cancel, ({ ticketId }) =>
        Effect.gen(function*() {
          const fiber = waits.get(ticketId)
          waits.delete(ticketId)
          if (fiber !== undefined) yield* Fiber.interrupt(fiber)
          yield* coordinator.release(ticketId)
          return null
        })),
      SingleWriter.handle(Release, ({ ticketId }) => Effect.as(coordinator.release(ticketId), null)),
      SingleWriter.handle(Metrics, ({ reset }) => coordinator.metrics(reset))
    ]
  })

/**
 * The coordinator of a cluster member over the fleet's writer: each call bounded by `timeout`, a writer that cannot
 * be reached degrades the attempt to a bypass (counted, warned once a minute), never a hang.
 */
export const remote = (
  writerClient: SingleWriter.WriterClient,
  options: { readonly holdMs: number }
): Coordinator.CoordinatorShape => {
  let warnedAt = -Infinity
  const degraded = (error: SingleWriter.SingleWriterUnavailableError | SingleWriter.SingleWriterCallError) =>
    Effect.gen(function*() {
      yield* Metric.update(KvInstruments.unreachable, 1)
      const now = yield* Clock.currentTimeMillis
      if (now - warnedAt >= 60_000) {
        warnedAt = now
        yield* Effect.logWarning(
          `KV admission: ${error.message}; attempts are sent without a reservation until it answers ` +
            "(relax_agentic_kv_admission_unreachable_total)"
        )
      }
      return { action: "bypass", reason: "degraded", waitedMs: 0 } satisfies Coordinator.Final
    })

  const cancel = (ticketId: string) => writerClient.call(Cancel, { ticketId }).pipe(Effect.ignore)

  const acquire = (ticket: typeof Ticket.Type): Effect.Effect<Coordinator.Final> =>
    Effect.gen(function*() {
      let polled = yield* writerClient.call(Acquire, { ticket, holdMs: options.holdMs })
      while (polled.action === "wait") {
        polled = yield* writerClient.call(Await, { ticketId: ticket.id, holdMs: options.holdMs })
      }
      return polled
    }).pipe(
      Effect.catch((error) => Effect.andThen(Effect.forkDetach(cancel(ticket.id)), degraded(error))),
      Effect.onInterrupt(() => cancel(ticket.id))
    )

  return {
    acquire,
    release: (ticketId) => writerClient.call(Release, { ticketId }).pipe(Effect.ignore),
    metrics: (reset) =>
      writerClient.call(Metrics, { reset }).pipe(
        Effect.catch((error) => Effect.as(Effect.logWarning(`KV admission metrics: ${error.message}`), {}))
      )
  }
}

/** A member's coordinator over the fleet's writer (calls bounded by `timeout`). */
export const coordinatorLayer = (
  timeout: Duration.Input,
  holdMs = defaultHoldMs
): Layer.Layer<Coordinator.Coordinator, never, Sharding.Sharding> =>
  Layer.effect(
    Coordinator.Coordinator,
    Effect.map(SingleWriter.client(writerName, timeout), (writerClient) => remote(writerClient, { holdMs }))
  )

/** The writers a runner hosts: `kv-admission` over its engine's KV figures, when admission is on. */
export const writersLayer = (
  settings: AdmissionOptions.AdmissionSettings | undefined
): Layer.Layer<SingleWriter.Writers, never, Engine.Engine> =>
  Layer.effect(
    SingleWriter.Writers,
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      return new Map(settings === undefined ? [] : [[writerName, writer(settings, engine.kvSnapshot)]])
    })
  )
