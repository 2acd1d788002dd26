import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Engine from "../../layers/engine/Engine.ts"
import type * as Http from "../../layers/engine/sglang/Http.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as StartupChecks from "../../layers/engine/sglang/StartupChecks.ts"
import * as Settings from "../../src/config/Settings.ts"

/** A transport whose `/health` answers `answer(n)` to its n-th call (1-based), counting the calls. */
const scripted = (answer: (call: number) => Effect.Effect<Http.Answer, Engine.EngineError>) => {
  let calls = 0
  const http: Http.Http = { request: () => Effect.suspend(() => answer(++calls)) }
  return { http, calls: () => calls }
}

const url = "http://gpu-0:30000"
const starting = Effect.succeed({ status: 503, body: "" })
const refused = Effect.fail(
  new Engine.EngineError({ reason: "unreachable", detail: `cannot reach SGLang at ${url}/health` })
)

describe("SGLang startup health check (under TestClock)", () => {
  it.effect("waits for a starting server (503, connection refused) every 2 s up to 10 minutes by default", () =>
    Effect.gen(function*() {
      const server = scripted((call) => (call % 2 === 0 ? refused : starting))
      const check = yield* StartupChecks.health(server.http, [url], {
        deadline: StartupChecks.defaultStartupTimeout,
        interval: "2 seconds",
        flag: "--sglang-url"
      }).pipe(Effect.flip, Effect.forkChild)
      yield* TestClock.adjust("590 seconds")
      assert.isUndefined(check.pollUnsafe())
      const polls = server.calls()
      assert.strictEqual(polls, 1 + (9 * 60 + 50) / 2)
      yield* TestClock.adjust("12 seconds")
      const error = yield* Fiber.join(check)
      assert.strictEqual(error.reason, "unhealthy")
      assert.strictEqual(error.url, url)
      // The URL, what it answered, how long it waited, the flag to raise and the flag that names the server.
      assert.include(error.message, `SGLang is not healthy at ${url}`)
      assert.include(error.message, "after waiting 10m for it to start: --sglang-startup-timeout")
      assert.include(error.message, "that --sglang-url names it")
      assert.include(error.message, "raise --sglang-startup-timeout (seconds)")
    }))

  it.effect("starts as soon as the server answers 200; another error is not waited for", () =>
    Effect.gen(function*() {
      const ready = scripted((call) => (call < 4 ? starting : Effect.succeed({ status: 200, body: "" })))
      const check = yield* StartupChecks.health(ready.http, [url], {
        deadline: "1 minute",
        interval: "2 seconds",
        flag: "--sglang-router-url"
      }).pipe(Effect.forkChild)
      yield* TestClock.adjust("6 seconds")
      yield* Fiber.join(check)
      assert.strictEqual(ready.calls(), 4)
      const broken = scripted(() => Effect.succeed({ status: 404, body: "Not Found" }))
      const error = yield* StartupChecks.health(broken.http, [url], {
        deadline: "1 minute",
        interval: "2 seconds",
        flag: "--sglang-router-url"
      }).pipe(Effect.flip)
      assert.strictEqual(broken.calls(), 1)
      assert.include(error.message, "HTTP 404")
      assert.include(error.message, "that --sglang-router-url names an SGLang server")
    }))

  it.effect("--sglang-startup-timeout sets the wait in seconds; it is only used with --engine sglang", () =>
    Effect.gen(function*() {
      const base = { promptData: "train.jsonl", rolloutBatchSize: 4 }
      const sglang = { ...base, engine: "sglang", sglangUrls: [url], tokenizer: "/models/m" }
      const given = SglangEngine.SglangEngine.optionsOf(
        yield* Settings.resolve({ ...sglang, sglangStartupTimeout: 1800 })
      )
      assert.strictEqual(Duration.toSeconds(Duration.fromInputUnsafe(given.startupTimeout!)), 1800)
      assert.isUndefined(SglangEngine.SglangEngine.optionsOf(yield* Settings.resolve(sglang)).startupTimeout)
      const error = yield* Effect.flip(Settings.resolve({ ...base, sglangStartupTimeout: 60 }))
      assert.strictEqual(
        error.message,
        "--sglang-startup-timeout: is only used with --engine sglang; add --engine sglang or remove it"
      )
    }))
})
