/**
 * SGLang workers that die and come back (layers/engine/sglang/WorkerHealth.ts), against real loopback fake SGLang
 * servers that are closed and restarted on their port: a dead worker never fails a trainer call (the answer names it),
 * a restarted one on an old weight version gets no request until the trainer's next update reaches it, one on the
 * fleet's version serves at once, and through a router its list is the truth.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope, Stream } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Rid from "../../src/engine/Rid.ts"
import type * as WorkerEvents from "../../src/engine/WorkerEvents.ts"
import * as FakeSglang from "../support/FakeSglang.ts"

const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]

let requests = 0
const request = (sessionId: string): Engine.GenerateRequest => ({
  inputIds: prompt,
  sampling: { maxNewTokens: 8, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed: 5 },
  rid: Rid.forAttempt({ sessionId: "worker-death", parent: "root", turn: requests++, attempt: 0 }),
  returnLogprob: true,
  sessionId
})

const model = Effect.gen(function*() {
  return yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
    ...EmbeddedEngine.EmbeddedEngine.instant,
    seed: 3
  })
})

/** A fake SGLang in a scope of its own, so the test can stop it (the server closes) and start it again on its port. */
const worker = (port = 0) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const server = yield* FakeSglang.make({ engine: yield* model, port }).pipe(Scope.provide(scope))
    return { server, port: Number(new URL(server.url).port), stop: Scope.close(scope, Exit.void) }
  })

const client = (options: SglangEngine.SglangEngineOptions) =>
  SglangEngine.SglangEngine.make({
    retryBase: "1 millis",
    probeBackoff: { first: "20 millis", max: "100 millis" },
    ...options
  }).pipe(Effect.orDie)

/** The first event of `tag` from now on (subscribed before the caller makes it happen). */
const nextEvent = <T extends WorkerEvents.WorkerEvent["_tag"]>(engine: Engine.WorkerFleetEngine, tag: T) =>
  engine.workerEvents.pipe(
    Stream.filter((event): event is Extract<WorkerEvents.WorkerEvent, { _tag: T }> => event._tag === tag),
    Stream.runHead,
    Effect.map((head) => head._tag === "Some" ? head.value : assert.fail(`no ${tag} event`)),
    Effect.forkChild
  )

describe("SGLang workers that die and come back", () => {
  it.live(
    "a dead worker never fails an update or a pause (the answer names it); restarted on an old version it gets nothing until the trainer's next update reaches it",
    () =>
      Effect.gen(function*() {
        const a = yield* worker()
        const b = yield* worker()
        const engine = yield* client({ workerUrls: [a.server.url, b.server.url] })
        assert.strictEqual(yield* engine.updateWeights("v1"), "v1")
        yield* a.stop
        // The update finds it dead: skipped, marked down, named; the live worker is updated.
        assert.strictEqual(yield* engine.updateWeights("v2"), "v2")
        assert.strictEqual(b.server.weightVersion(), "v2")
        assert.deepStrictEqual((yield* engine.workers).down, [a.server.url])
        // So do a pause and a resume.
        yield* engine.pauseGeneration("abort")
        assert.strictEqual(yield* engine.resumeGeneration("v2"), "v2")
        const needs = yield* nextEvent(engine, "WorkerNeedsWeights")
        // Restarted, it holds the checkpoint it was launched with ("default").
        const restarted = yield* worker(a.port)
        assert.deepStrictEqual(yield* Fiber.join(needs), {
          _tag: "WorkerNeedsWeights",
          url: a.server.url,
          weightVersion: "default",
          fleetVersion: "v2"
        })
        assert.deepStrictEqual(yield* engine.workers, { down: [], needsWeights: [yield* Fiber.join(needs)] })
        // New Sessions all go to the worker on the fleet's weights.
        for (let i = 0; i < 6; i++) yield* engine.generate(request(`old-${i}`))
        assert.strictEqual(restarted.server.generateCount(), 0)
        // The trainer's next update reaches it: it serves again.
        const back = yield* nextEvent(engine, "WorkerBack")
        assert.strictEqual(yield* engine.updateWeights("v3"), "v3")
        assert.deepStrictEqual(yield* Fiber.join(back), { _tag: "WorkerBack", url: a.server.url, weightVersion: "v3" })
        assert.strictEqual(restarted.server.weightVersion(), "v3")
        for (let i = 0; i < 6; i++) yield* engine.generate(request(`new-${i}`))
        assert.isAbove(restarted.server.generateCount(), 0)
        const metrics = yield* engine.takeStepMetrics
        assert.strictEqual(metrics["engine/worker_down"], 1)
        assert.strictEqual(metrics["engine/worker_quarantined"], 1)
        yield* restarted.stop
        yield* b.stop
      }).pipe(Effect.scoped, Effect.provide(Tokenizer.Tokenizer.layer))
  )

  it.live("a worker restarted on the fleet's version, or given it by the trainer's push and resume, serves again", () =>
    Effect.gen(function*() {
      const a = yield* worker()
      const b = yield* worker()
      const engine = yield* client({ workerUrls: [a.server.url, b.server.url] })
      yield* a.stop
      // A generation that lands on the dead worker moves; the worker is marked down.
      for (let i = 0; i < 4 && (yield* engine.workers).down.length === 0; i++) {
        yield* engine.generate(request(`s-${i}`))
      }
      assert.deepStrictEqual((yield* engine.workers).down, [a.server.url])
      // Both still on "default": it is taken back as soon as it answers.
      const back = yield* nextEvent(engine, "WorkerBack")
      const same = yield* worker(a.port)
      assert.strictEqual((yield* Fiber.join(back)).weightVersion, "default")
      // Down again, then back on an old version while the fleet moved on: the two-phase update's push (the trainer
      // pushes to it as to the others) and resume take it back.
      yield* same.stop
      assert.strictEqual(yield* engine.updateWeights("v1"), "v1")
      const needs = yield* nextEvent(engine, "WorkerNeedsWeights")
      const old = yield* worker(a.port)
      yield* Fiber.join(needs)
      yield* engine.pauseGeneration("abort")
      for (const server of [old.server, b.server]) {
        yield* Effect.promise(() =>
          fetch(`${server.url}/update_weights_from_disk`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model_path: "/ckpt/v2", weight_version: "v2" })
          })
        )
      }
      assert.strictEqual(yield* engine.resumeGeneration(), "v2")
      assert.deepStrictEqual(yield* engine.workers, { down: [], needsWeights: [] })
      yield* old.stop
      yield* b.stop
    }).pipe(Effect.scoped, Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live(
    "through a router: a dead worker still listed is skipped by updates, one failing health or removed is not called, and generation continues on the others",
    () =>
      Effect.gen(function*() {
        const a = yield* worker()
        const b = yield* worker()
        const routerScope = yield* Scope.make()
        const router = yield* FakeSglang.make({ routeTo: [a.server.url, b.server.url] }).pipe(
          Scope.provide(routerScope)
        )
        const engine = yield* client({ routerUrl: router.url })
        yield* a.stop
        // The router has not noticed yet: it still lists the dead worker as healthy.
        assert.strictEqual(yield* engine.updateWeights("v1"), "v1")
        assert.strictEqual(b.server.weightVersion(), "v1")
        assert.deepStrictEqual((yield* engine.workers).down, [a.server.url])
        // Its health checks fail at the router: listed unhealthy, it is no longer a target, and no longer down here.
        router.setWorkerHealthy(a.server.url, false)
        yield* engine.pauseGeneration("abort")
        assert.deepStrictEqual(yield* engine.workers, { down: [], needsWeights: [] })
        assert.strictEqual(yield* engine.resumeGeneration("v2"), "v2")
        for (let i = 0; i < 4; i++) {
          const result = yield* engine.generate(request(`r-${i}`))
          assert.strictEqual(result.weightVersion, "v2")
        }
        // Removed from the router: not called, not named.
        router.removeWorker(a.server.url)
        assert.strictEqual(yield* engine.updateWeights("v3"), "v3")
        assert.deepStrictEqual(yield* engine.workers, { down: [], needsWeights: [] })
        assert.strictEqual(b.server.weightVersion(), "v3")
        yield* Scope.close(routerScope, Exit.void)
        yield* b.stop
      }).pipe(Effect.scoped, Effect.provide(Tokenizer.Tokenizer.layer))
  )
})
