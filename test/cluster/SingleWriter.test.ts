/**
 * The fleet's single writers on the cluster's in-memory test runner (messages serialized as between processes): a
 * writer's state is one instance whoever calls it, a call past its bound fails as unavailable instead of hanging, and
 * the KV admission ledger shared by two runners' coordinators (FIFO across them, cancel, release, metrics, and a
 * bypass when the writer cannot be reached).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schedule, Schema } from "effect"
import { TestRunner } from "effect/cluster"
import * as Coordinator from "../../layers/admission/Coordinator.ts"
import * as AdmissionWriter from "../../layers/cluster/AdmissionWriter.ts"
import * as SingleWriter from "../../layers/cluster/SingleWriter.ts"
import * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"

const Add = SingleWriter.op("add", Schema.Struct({ by: Schema.Int }), Schema.Int)
const Hang = SingleWriter.op("hang", Schema.Struct({}), Schema.Null)

const settings: AdmissionOptions.AdmissionSettings = {
  headroom: 1,
  pressureThreshold: 0.95,
  expectedDecodeCap: 100,
  maxWaitMs: 60_000,
  scope: "train",
  ...AdmissionOptions.constants
}

/** A fleet of one 1000-token worker, always fresh. */
const fleet = Effect.sync(() => ({
  at: Date.now(),
  workers: [{ id: "http://w", healthy: true, maxTotalNumTokens: 1000, usage: 0.1 }]
}))

const writers = Layer.succeed(
  SingleWriter.Writers,
  new Map<string, SingleWriter.WriterFactory>([
    [
      "counter",
      Effect.sync(() => {
        let total = 0
        return [
          SingleWriter.handle(Add, ({ by }) => Effect.sync(() => (total += by))),
          SingleWriter.handle(Hang, () => Effect.never)
        ]
      })
    ],
    [AdmissionWriter.writerName, AdmissionWriter.writer(settings, fleet)]
  ])
)

const cluster = SingleWriter.entityLayer.pipe(Layer.provideMerge(writers), Layer.provideMerge(TestRunner.layer))

const ticket = (id: string, tokens: number) => ({ id, tokens, protected: false })

describe("single writers", () => {
  it.live("keep one state for every caller and bound every call", () =>
    Effect.gen(function*() {
      const a = yield* SingleWriter.client("counter", "5 seconds")
      const b = yield* SingleWriter.client("counter", "5 seconds")
      assert.strictEqual(yield* a.call(Add, { by: 2 }), 2)
      assert.strictEqual(yield* b.call(Add, { by: 3 }), 5)
      const short = yield* SingleWriter.client("counter", "200 millis")
      const hung = yield* Effect.flip(short.call(Hang, {}))
      assert.strictEqual(hung._tag, "SingleWriterUnavailableError")
      assert.strictEqual(hung.reason, "timeout")
      const unknown = yield* Effect.flip((yield* SingleWriter.client("nobody", "5 seconds")).call(Add, { by: 1 }))
      assert.strictEqual(unknown._tag === "SingleWriterCallError" && unknown.reason, "unknown-writer")
    }).pipe(Effect.provide(cluster)))

  it.live("share one KV ledger between two runners: FIFO across them, cancel, release, metrics", () =>
    Effect.gen(function*() {
      // Two runners' coordinators (each its own client of the writer), polls held 100 ms.
      const runnerA = AdmissionWriter.remote(yield* SingleWriter.client(AdmissionWriter.writerName, "5 seconds"), {
        holdMs: 100
      })
      const runnerB = AdmissionWriter.remote(yield* SingleWriter.client(AdmissionWriter.writerName, "5 seconds"), {
        holdMs: 100
      })
      const first = yield* runnerA.acquire(ticket("a1", 800))
      assert.strictEqual(first.action, "admit")
      // B's 300 tokens do not fit next to A's 800: B waits (several polls) until A releases.
      const waiting = yield* Effect.forkChild(runnerB.acquire(ticket("b1", 300)))
      // A's next ticket queues behind B's (no overtaking), then is cancelled by its attempt's interruption.
      const behind = yield* Effect.forkChild(runnerA.acquire(ticket("a2", 100)))
      // Both are queued once the writer counted their waits (asked as another runner would, over the writer); B still
      // waits, since A holds the room.
      yield* runnerA.metrics(false).pipe(
        Effect.repeat({ until: (m) => m["agentic_kv/admission/wait"] === 2, schedule: Schedule.spaced("20 millis") }),
        Effect.timeout("10 seconds")
      )
      assert.isUndefined(waiting.pollUnsafe())
      yield* Fiber.interrupt(behind)
      yield* runnerA.release("a1")
      const second = yield* Fiber.join(waiting)
      assert.strictEqual(second.action, "admit")
      yield* runnerB.release("b1")
      const metrics = yield* runnerA.metrics(true)
      assert.strictEqual(metrics["agentic_kv/admission/admit"], 2)
      assert.strictEqual(metrics["agentic_kv/admission/wait"], 2)
      assert.strictEqual(metrics["agentic_kv/admission/cancelled"], 1)
      assert.strictEqual(metrics["agentic_kv/budget/reserved"], 0)
      assert.strictEqual(metrics["agentic_kv/budget/lease_count"], 0)
      assert.strictEqual(metrics["agentic_kv/admission/waiting"], 0)
    }).pipe(Effect.provide(cluster)))

  it.live("bypass an attempt, counted, when the writer cannot be reached, instead of hanging", () =>
    Effect.gen(function*() {
      const unreachable = AdmissionWriter.remote(yield* SingleWriter.client("kv-admission-elsewhere", "1 second"), {
        holdMs: 100
      })
      const decided = yield* Deferred.make<Coordinator.Final>()
      yield* Effect.forkChild(Effect.flatMap(unreachable.acquire(ticket("x", 10)), (d) => Deferred.succeed(decided, d)))
      const final = yield* Deferred.await(decided).pipe(Effect.timeout("3 seconds"))
      assert.deepStrictEqual(final, { action: "bypass", reason: "degraded", waitedMs: 0 })
    }).pipe(Effect.provide(cluster)))
})
