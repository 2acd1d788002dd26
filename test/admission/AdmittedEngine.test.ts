/**
 * The admitted engine over a scripted engine whose generations the test finishes itself, under TestClock: an attempt
 * that does not fit waits until a lease is released; a waiting attempt is cut by `abort(rid)` (a step's close) and by
 * a weight pause (cut by the update), and cancelled by its fiber's interruption; a lease is released however its
 * attempt ends; Eval attempts pass unreserved with scope `train`; the wait is reported and runs outside the budget;
 * missing `/metrics` gauges degrade to bypass with one warning naming `--enable-metrics`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Logger, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as Admission from "../../layers/admission/Admission.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as KvSnapshot from "../../layers/engine/KvSnapshot.ts"
import * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"
import * as ScriptedEngine from "../support/scriptedEngine.ts"

const settings: AdmissionOptions.AdmissionSettings = {
  headroom: 1,
  pressureThreshold: 0.95,
  expectedDecodeCap: 100,
  maxWaitMs: 30_000,
  scope: "train",
  ...AdmissionOptions.constants
}

interface Scripted {
  readonly started: Array<string>
  /** Finish a running generation with `ids` tokens. */
  readonly finish: (rid: string, tokens: number) => Effect.Effect<void>
  readonly aborted: Array<string>
}

/** An engine of one 1000-token worker whose generations end when the test says; `read` overrides its KV read. */
const scriptedLayer = (
  scripted: Scripted & { readonly pending: Map<string, Deferred.Deferred<number>> },
  read?: KvSnapshot.Read
) =>
  Layer.effect(
    Engine.Engine,
    Effect.gen(function*() {
      const generate = (request: Engine.GenerateRequest) =>
        Effect.gen(function*() {
          const done = yield* Deferred.make<number>()
          scripted.pending.set(request.rid, done)
          scripted.started.push(request.rid)
          const tokens = yield* Deferred.await(done)
          return {
            outputIds: Array.from({ length: tokens }, () => 7),
            logprobs: [],
            finishReason: { type: "stop" },
            promptTokens: request.inputIds.length,
            cachedTokens: 0,
            weightVersion: "v0"
          } satisfies Engine.GenerateResult
        })
      return Engine.Engine.of({
        ...ScriptedEngine.inertControls,
        generate,
        abort: (rid) => Effect.sync(() => scripted.aborted.push(rid)),
        takeStepMetrics: Effect.succeed({ own: 1 }),
        kvSnapshot: read ?? Effect.map(Effect.clockWith((clock) => clock.currentTimeMillis), (at) => ({
          at,
          workers: [{ id: "w", healthy: true, maxTotalNumTokens: 1000, usage: 0.1 }]
        }))
      })
    })
  )

const harness = (read?: KvSnapshot.Read) => {
  const pending = new Map<string, Deferred.Deferred<number>>()
  const scripted = {
    pending,
    started: [] as Array<string>,
    aborted: [] as Array<string>,
    finish: (rid: string, tokens: number) =>
      Effect.suspend(() => {
        const done = pending.get(rid)
        if (done === undefined) return Effect.die(`${rid} is not running`)
        return Deferred.succeed(done, tokens)
      })
  }
  return { scripted, layer: Admission.around(scriptedLayer(scripted, read), settings) }
}

const request = (
  rid: string,
  promptTokens: number,
  options: Partial<Engine.AdmissionDemand> = {}
): Engine.GenerateRequest => ({
  inputIds: [1, 2, 3],
  sampling: { maxNewTokens: 500, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [] },
  rid,
  returnLogprob: false,
  admission: { promptTokens, training: true, ...options }
})

describe("admitted engine", () => {
  it.effect("holds an attempt that does not fit until a lease is released, and reports the wait", () => {
    const { scripted, layer } = harness()
    return Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const waits: Array<number> = []
      // 500 + min(500, 100) = 600 tokens each: the second does not fit next to the first.
      const first = yield* Effect.forkChild(engine.generate(request("a", 500)))
      yield* Effect.yieldNow
      const second = yield* Effect.forkChild(engine.generate(request("b", 500, { waited: (ms) => waits.push(ms) })))
      yield* TestClock.adjust("3 seconds")
      assert.deepStrictEqual(scripted.started, ["a"])
      yield* scripted.finish("a", 4)
      assert.strictEqual((yield* Fiber.join(first)).outputIds.length, 4)
      yield* Effect.yieldNow
      assert.deepStrictEqual(scripted.started, ["a", "b"])
      yield* scripted.finish("b", 2)
      yield* Fiber.join(second)
      assert.deepStrictEqual(waits, [3000])
      const metrics = yield* engine.takeStepMetrics
      assert.strictEqual(metrics["own"], 1)
      assert.strictEqual(metrics["agentic_kv/admission/admit"], 2)
      assert.strictEqual(metrics["agentic_kv/admission/wait"], 1)
      assert.strictEqual(metrics["agentic_kv/admission/wait_seconds_mean"], 3)
      assert.strictEqual(metrics["agentic_kv/budget/reserved"], 0)
    }).pipe(Effect.provide(layer))
  })

  it.effect("cuts a waiting attempt on abort(rid) and on a weight pause, and cancels it on interruption", () => {
    const { scripted, layer } = harness()
    return Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const holder = yield* Effect.forkChild(engine.generate(request("hold", 900)))
      yield* Effect.yieldNow
      const stepped = yield* Effect.forkChild(engine.generate(request("step", 10)))
      const updated = yield* Effect.forkChild(engine.generate(request("update", 10)))
      const interrupted = yield* Effect.forkChild(engine.generate(request("gone", 10)))
      yield* Effect.yieldNow
      yield* engine.abort("step")
      const cut = yield* Fiber.join(stepped)
      assert.strictEqual(cut.finishReason.type, "abort")
      assert.deepStrictEqual(cut.outputIds, [])
      assert.isUndefined(cut.cutByUpdate)
      assert.deepStrictEqual(scripted.aborted, ["step"], "the abort still reaches the engine")
      yield* Fiber.interrupt(interrupted)
      yield* engine.pauseGeneration("abort")
      const paused = yield* Fiber.join(updated)
      assert.strictEqual(paused.cutByUpdate, true)
      assert.deepStrictEqual(scripted.started, ["hold"], "no cut attempt was sent")
      yield* Fiber.interrupt(holder)
      const metrics = yield* engine.takeStepMetrics
      assert.strictEqual(metrics["agentic_kv/budget/reserved"], 0, "the interrupted holder's lease is released")
      assert.strictEqual(metrics["agentic_kv/admission/waiting"], 0)
      assert.strictEqual(metrics["agentic_kv/admission/cancelled"], 3)
    }).pipe(Effect.provide(layer))
  })

  it.effect("sends Eval attempts unreserved with scope train, and protected ones at once", () => {
    const { scripted, layer } = harness()
    return Effect.gen(function*() {
      const engine = yield* Engine.Engine
      yield* Effect.forkChild(engine.generate(request("hold", 900)))
      yield* Effect.yieldNow
      yield* Effect.forkChild(engine.generate(request("eval", 500, { training: false })))
      yield* Effect.forkChild(engine.generate({ ...request("protected", 500), protected: true }))
      yield* Effect.yieldNow
      assert.deepStrictEqual(scripted.started, ["hold", "eval", "protected"])
      const metrics = yield* engine.takeStepMetrics
      assert.strictEqual(metrics["agentic_kv/admission/bypass_protected"], 1)
      assert.strictEqual(metrics["agentic_kv/admission/admit"], 1)
    }).pipe(Effect.provide(layer))
  })

  it.effect("runs the wait outside the Session's budget", () => {
    const { layer } = harness()
    return Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const outside = yield* Ref.make(0)
      yield* Effect.forkChild(engine.generate(request("hold", 900)))
      yield* Effect.yieldNow
      const waiter = yield* Effect.forkChild(engine.generate(request("w", 100, {
        outsideBudget: (effect) =>
          Effect.acquireUseRelease(
            Ref.update(outside, (n) => n + 1),
            () => effect,
            () => Ref.update(outside, (n) => n - 1)
          )
      })))
      yield* Effect.yieldNow
      assert.strictEqual(yield* Ref.get(outside), 1)
      yield* engine.abort("w")
      yield* Fiber.join(waiter)
      assert.strictEqual(yield* Ref.get(outside), 0)
    }).pipe(Effect.provide(layer))
  })

  it.effect("bypasses as degraded, with one warning naming --enable-metrics, when the gauges are missing", () => {
    const missing = Effect.fail(
      new KvSnapshot.KvSnapshotError({
        reason: "metrics-disabled",
        url: "http://w",
        detail: "GET /metrics answered HTTP 404"
      })
    )
    const { scripted, layer } = harness(missing)
    const logs: Array<string> = []
    const logger = Logger.layer([Logger.make((options) => logs.push(String(options.message)))])
    return Effect.gen(function*() {
      const engine = yield* Engine.Engine
      yield* Effect.forkChild(engine.generate(request("a", 900)))
      yield* Effect.forkChild(engine.generate(request("b", 900)))
      yield* TestClock.adjust("10 seconds")
      assert.deepStrictEqual(scripted.started, ["a", "b"])
      const metrics = yield* engine.takeStepMetrics
      assert.strictEqual(metrics["agentic_kv/admission/bypass_degraded"], 2)
      assert.strictEqual(metrics["agentic_kv/budget/degraded"], 1)
      const warnings = logs.filter((line) => line.includes("--enable-metrics"))
      assert.strictEqual(warnings.length, 1)
    }).pipe(Effect.provide(layer), Effect.provide(logger))
  })

  it.effect("reads the pool again soon after a release while the queue's head waits on the pressure guard", () => {
    // The worker's usage as its /metrics would tell it now.
    let usage = 0.1
    const read: KvSnapshot.Read = Effect.map(Effect.clockWith((clock) => clock.currentTimeMillis), (at) => ({
      at,
      workers: [{ id: "w", healthy: true, maxTotalNumTokens: 1000, usage }]
    }))
    const { scripted, layer } = harness(read)
    return Effect.gen(function*() {
      const engine = yield* Engine.Engine
      yield* Effect.forkChild(engine.generate(request("a", 100)))
      yield* Effect.yieldNow
      // Other traffic fills the worker; the 2 s read sees it above the threshold (0.95).
      usage = 0.97
      yield* TestClock.adjust("2 seconds")
      const waiter = yield* Effect.forkChild(engine.generate(request("b", 100)))
      yield* Effect.yieldNow
      assert.deepStrictEqual(scripted.started, ["a"], "b waits on the pressure guard")
      // The pool drains and a releases its lease: b is admitted within the reread delay, not at the next 2 s read.
      usage = 0.2
      yield* scripted.finish("a", 1)
      yield* TestClock.adjust(`${AdmissionOptions.constants.pressureRereadMs} millis`)
      assert.deepStrictEqual(scripted.started, ["a", "b"])
      yield* scripted.finish("b", 1)
      yield* Fiber.join(waiter)
      const metrics = yield* engine.takeStepMetrics
      assert.strictEqual(metrics["agentic_kv/admission/wait_seconds_mean"], 0.25)
    }).pipe(Effect.provide(layer))
  })
})
