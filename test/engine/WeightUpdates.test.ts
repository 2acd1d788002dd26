/**
 * `WeightUpdates.enterIfOpen` (the SGLang client's synchronous start, issue 24's eighth pass) gives what `enter` gives
 * whenever generation is not paused (the same version and epoch, across updates, pauses and resumes), and nothing
 * while paused, when `enter` waits (and an aborted waiter still ends with no start).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type * as Http from "../../layers/engine/sglang/Http.ts"
import * as WeightUpdates from "../../layers/engine/sglang/WeightUpdates.ts"
import * as WorkerHealth from "../../layers/engine/sglang/WorkerHealth.ts"
import * as Workers from "../../layers/engine/sglang/Workers.ts"

/** Every control call answers 200; the version updates succeed. */
const http: Http.Http = {
  request: (_url, path) =>
    Effect.succeed({
      status: 200,
      body: path === "/update_weight_version" ? JSON.stringify({ success: true }) : "{}"
    })
}

describe("WeightUpdates.enterIfOpen", () => {
  it.effect("gives enter's start when not paused, across updates, pauses and resumes, and nothing while paused", () =>
    Effect.gen(function*() {
      const workers = yield* Workers.make(http, { workerUrls: ["http://w0"], routerUrl: undefined, concurrency: 4 })
      const health = yield* WorkerHealth.make(http, workers, () => "v0")
      const weights = yield* WeightUpdates.make(http, workers, "v0", health)
      const same = function*() {
        const now = weights.enterIfOpen()
        assert.isDefined(now)
        assert.deepStrictEqual(now, yield* weights.enter("rid-open"))
        return now
      }
      const starts = [yield* same()]
      yield* weights.update("v1")
      starts.push(yield* same())
      yield* weights.update()
      starts.push(yield* same())
      yield* weights.pause("abort")
      assert.isUndefined(weights.enterIfOpen())
      // Paused: enter waits; aborted there, it ends with no start.
      const held = yield* Effect.forkChild(weights.enter("rid-held"))
      yield* Effect.yieldNow
      assert.isUndefined(held.pollUnsafe())
      yield* weights.abortWaiting("rid-held")
      assert.isUndefined(yield* Fiber.join(held))
      const waiting = yield* Effect.forkChild(weights.enter("rid-waiting"))
      yield* Effect.yieldNow
      yield* weights.resume("v3")
      const resumed = yield* Fiber.join(waiting)
      assert.deepStrictEqual(resumed, weights.enterIfOpen())
      starts.push(yield* same())
      yield* weights.pause("retract")
      assert.isUndefined(weights.enterIfOpen())
      yield* weights.resume("v4")
      starts.push(yield* same())
      assert.deepStrictEqual(starts.map((s) => s?.version), ["v0", "v1", starts[2]?.version, "v3", "v4"])
      assert.deepStrictEqual(starts.map((s) => s?.epoch), [0, 1, 2, 4, 6])
    }).pipe(Effect.scoped))
})
