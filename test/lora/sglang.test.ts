/**
 * Versioned LoRA publication against the SGLang double (docs/lora.md): loads and unloads on every worker, `lora_path`
 * on every attempt, a publication while requests are queued, reclaim, capacity, a refused load, a router's workers,
 * and the path checked before any worker is touched.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as LoraEngine from "../../layers/lora/LoraEngine.ts"
import * as LoraVersions from "../../layers/lora/LoraVersions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Rid from "../../src/engine/Rid.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as LoraAdapters from "../support/LoraAdapters.ts"

const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]
let rids = 0

const request = (sessionId: string, overrides: Partial<Engine.GenerateRequest> = {}): Engine.GenerateRequest => ({
  inputIds: prompt,
  sampling: { maxNewTokens: 8, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed: 5 },
  rid: Rid.forAttempt({ sessionId, parent: "root", turn: rids++, attempt: 0 }),
  returnLogprob: true,
  sessionId,
  ...overrides
})

/** Adapter directories under a temp dir removed with the scope. */
const adapters = (count: number) => Effect.map(LoraAdapters.versions(count), ({ dirs }) => dirs)

const fake = (options: FakeSglang.FakeSglangOptions = {}) =>
  Effect.gen(function*() {
    const engine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
      ...EmbeddedEngine.EmbeddedEngine.instant,
      seed: 3
    })
    return yield* FakeSglang.make({ engine, maxLoadedLoras: 4, ...options })
  })

/** The SGLang engine over `options` with versioned LoRA. */
const versioned = (options: SglangEngine.SglangEngineOptions, lora: Partial<LoraVersions.LoraVersionsOptions> = {}) =>
  Effect.gen(function*() {
    const engine = yield* SglangEngine.SglangEngine.make({ retryBase: "1 millis", samplingSeed: true, ...options })
      .pipe(Effect.orDie)
    const versions = yield* LoraVersions.make(engine, { mode: "versioned", epoch: "0123456789ab", ...lora }).pipe(
      Effect.orDie
    )
    return { engine: LoraEngine.wrap(engine, versions), versions }
  })

const bodies = (server: FakeSglang.FakeSglang, path: string) =>
  server.requests.filter((r) => r.path === path).map((r) => r.body as Record<string, unknown>)

/** Two workers, two adapters, the first published. */
const twoWorkersPublished = Effect.gen(function*() {
  const [v1, v2] = yield* adapters(2)
  const a = yield* fake()
  const b = yield* fake()
  const { engine, versions } = yield* versioned({ workerUrls: [a.url, b.url] })
  const first = yield* versions.publish({ path: v1! })
  return { v1, v2, a, b, engine, versions, first }
})

describe("versioned LoRA on SGLang", () => {
  it.live("loads every version pinned on every worker; a Session names its bound version on every attempt", () =>
    Effect.gen(function*() {
      const { v1, v2, a, b, engine, versions, first } = yield* twoWorkersPublished
      for (const server of [a, b]) {
        assert.deepStrictEqual(bodies(server, "/load_lora_adapter"), [
          { lora_name: first.version, lora_path: v1, pinned: true }
        ])
      }
      const one = yield* engine.generate(request("s1"))
      const resumed = yield* engine.generate(request("s1", { resumedTokens: 2 }))
      assert.strictEqual(one.loraVersion, first.version)
      assert.strictEqual(resumed.loraVersion, first.version)
      const second = yield* versions.publish({ path: v2! })
      // s1 keeps v1; a new Session binds v2.
      yield* engine.generate(request("s1"))
      const other = yield* engine.generate(request("s2"))
      assert.strictEqual(other.loraVersion, second.version)
      const sent = [...bodies(a, "/generate"), ...bodies(b, "/generate")]
      assert.deepStrictEqual(
        sent.map((body) => body["lora_path"]).sort(),
        [first.version, first.version, first.version, second.version].sort()
      )
      // The same content again is a no-op.
      const again = yield* versions.publish({ path: v2! })
      assert.deepStrictEqual([again.version, again.noOp], [second.version, true])
      assert.strictEqual(bodies(a, "/load_lora_adapter").length, 2)
      // s1 ends: v1 is retired and nobody holds it, so every worker unloads it.
      yield* engine.closeSession("s1")
      for (const server of [a, b]) {
        assert.deepStrictEqual(bodies(server, "/unload_lora_adapter"), [{ lora_name: first.version }])
        assert.deepStrictEqual(server.lora.loaded(), [second.version])
      }
      const metrics = yield* engine.takeStepMetrics
      assert.strictEqual(metrics["lora/publications"], 2)
      assert.strictEqual(metrics["lora/reclaims"], 1)
      assert.strictEqual(metrics["lora/versions_live"], 1)
      assert.strictEqual(metrics["lora/bound_sessions/2"], 1)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a publication while requests are queued costs no request: they finish on the version they bound", () =>
    Effect.gen(function*() {
      const [v1, v2] = yield* adapters(2)
      const server = yield* fake({ maxRunningRequests: 1 })
      const { engine, versions } = yield* versioned({ workerUrls: [server.url] })
      const first = yield* versions.publish({ path: v1! })
      server.hold(2)
      const inFlight = yield* Effect.forEach(["q1", "q2", "q3"], (s) => Effect.forkChild(engine.generate(request(s))))
      yield* server.awaitQueued(2)
      const second = yield* versions.publish({ path: v2! })
      server.release()
      const results = yield* Effect.forEach(inFlight, Fiber.join)
      assert.deepStrictEqual(results.map((r) => r.finishReason.type === "abort"), [false, false, false])
      assert.deepStrictEqual(results.map((r) => r.loraVersion), [first.version, first.version, first.version])
      assert.deepStrictEqual(server.aborts, [])
      assert.deepStrictEqual(server.answers.map((a) => a.outcome), ["finished", "finished", "finished"])
      assert.strictEqual((yield* engine.generate(request("q4"))).loraVersion, second.version)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a third version waits for a reclaim, then fails naming the Sessions that still hold the old one", () =>
    Effect.gen(function*() {
      const [v1, v2, v3] = yield* adapters(3)
      const server = yield* fake()
      const { engine, versions } = yield* versioned({ workerUrls: [server.url] }, { capacityWait: "50 millis" })
      yield* versions.publish({ path: v1! })
      yield* engine.generate(request("holder"))
      yield* versions.publish({ path: v2! })
      const refused = yield* Effect.flip(versions.publish({ path: v3! }))
      assert.strictEqual(refused.reason, "registry")
      assert.include(refused.message, "holder")
      assert.include(refused.message, "capacity 2")
      assert.isAtMost(server.lora.mostLoaded(), 2)
      // Once the holder ends, the same publication goes through.
      yield* engine.closeSession("holder")
      const third = yield* versions.publish({ path: v3! })
      assert.strictEqual(third.id, 3)
      assert.isAtMost(server.lora.mostLoaded(), 2)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a load refused by one worker unloads the candidate from the others and keeps the old default", () =>
    Effect.gen(function*() {
      const { v2, a, b, engine, versions, first } = yield* twoWorkersPublished
      b.lora.failNextLoads(1)
      const refused = yield* Effect.flip(versions.publish({ path: v2! }))
      assert.strictEqual(refused.reason, "load")
      assert.include(refused.message, b.url)
      assert.include(refused.message, `the default stays ${first.version}`)
      assert.deepStrictEqual(a.lora.loaded(), [first.version])
      assert.strictEqual((yield* engine.generate(request("after-failure"))).loraVersion, first.version)
      // Retryable: the next attempt of the same content goes through.
      const second = yield* versions.publish({ path: v2! })
      assert.strictEqual(versions.registry!.version(second.id)?.attempt, 2)
      assert.strictEqual(versions.registry!.default?.name, second.version)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("an unload a worker does not confirm keeps the version counted, and is tried again", () =>
    Effect.gen(function*() {
      const [v1, v2, v3] = yield* adapters(3)
      const server = yield* fake()
      const { engine, versions } = yield* versioned({ workerUrls: [server.url] }, { capacityWait: "10 millis" })
      const first = yield* versions.publish({ path: v1! })
      yield* engine.generate(request("s"))
      yield* versions.publish({ path: v2! })
      server.lora.failNextUnloads(1)
      yield* engine.closeSession("s")
      assert.strictEqual(versions.registry!.version(first.id)?.state, "unconfirmed")
      assert.include(server.lora.loaded(), first.version)
      // The next publication reclaims it again before it loads.
      yield* versions.publish({ path: v3! })
      assert.strictEqual(versions.registry!.version(first.id)?.state, "reclaimed")
      assert.isAtMost(server.lora.mostLoaded(), 2)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("through a router: every worker is loaded directly, and a worker added later gets the live versions", () =>
    Effect.gen(function*() {
      const [v1] = yield* adapters(1)
      const a = yield* fake()
      const b = yield* fake()
      const router = yield* fake({ routeTo: [a.url] })
      const { engine, versions } = yield* versioned({ routerUrl: router.url })
      const first = yield* versions.publish({ path: v1! })
      assert.deepStrictEqual(bodies(router, "/load_lora_adapter"), [])
      assert.deepStrictEqual(a.lora.loaded(), [first.version])
      router.addWorker(b.url)
      // A new Session's bind finds the new worker and loads the live versions on it first.
      yield* engine.generate(request("late"))
      assert.deepStrictEqual(b.lora.loaded(), [first.version])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a worker that restarted (its adapters gone) is loaded again and the attempt goes through", () =>
    Effect.gen(function*() {
      const [v1] = yield* adapters(1)
      const server = yield* fake()
      const { engine, versions } = yield* versioned({ workerUrls: [server.url] })
      const first = yield* versions.publish({ path: v1! })
      yield* engine.generate(request("before"))
      server.lora.restart()
      const after = yield* engine.generate(request("before"))
      assert.strictEqual(after.loraVersion, first.version)
      assert.strictEqual(bodies(server, "/load_lora_adapter").length, 2)
      assert.deepStrictEqual(server.lora.loaded(), [first.version])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a path that does not exist or is no adapter is refused before any worker is touched, naming it", () =>
    Effect.gen(function*() {
      const [v1] = yield* adapters(1)
      const server = yield* fake()
      const { versions } = yield* versioned({ workerUrls: [server.url] })
      const missing = yield* Effect.flip(versions.publish({ path: `${v1}-nope` }))
      assert.strictEqual(missing.reason, "adapter-path")
      assert.include(missing.message, `${v1}-nope`)
      assert.include(missing.message, "does not exist")
      Fs.rmSync(Path.join(v1!, "adapter_config.json"))
      const notAdapter = yield* Effect.flip(versions.publish({ path: v1! }))
      assert.include(notAdapter.message, v1!)
      assert.include(notAdapter.message, "adapter_config.json")
      assert.deepStrictEqual(bodies(server, "/load_lora_adapter"), [])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a Session closed before its first request never binds; before any publication nothing generates", () =>
    Effect.gen(function*() {
      const [v1] = yield* adapters(1)
      const server = yield* fake()
      const { engine, versions } = yield* versioned({ workerUrls: [server.url] })
      const early = yield* Effect.flip(engine.generate(request("early")))
      assert.strictEqual(early._tag === "EngineError" ? early.reason : early._tag, "lora")
      assert.include(early.message, "no LoRA version is published yet")
      assert.strictEqual(early._tag === "EngineError" ? early.code : early._tag, "no_published_version")
      // The agent gets Relax's answer: 503 with the registry's code.
      const answer = ProtocolError.GatewayError.fromGeneration(
        new GenerationError.GenerationEngineError({
          reason: "lora",
          detail: early.message,
          code: "no_published_version"
        })
      )
      assert.deepStrictEqual([answer.status, answer.type, answer.code], [
        503,
        "service_unavailable_error",
        "no_published_version"
      ])
      yield* engine.closeSession("gone")
      yield* versions.publish({ path: v1! })
      const late = yield* Effect.flip(engine.generate(request("gone")))
      assert.include(late.message, "closed before its first model request")
      assert.strictEqual(late._tag === "EngineError" ? late.code : late._tag, "session_closed")
      assert.deepStrictEqual(bodies(server, "/generate"), [])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("the SGLang double's LoRA routes", () => {
  it.live("refuses a name already loaded, an unknown lora_path, evicts unpinned LRU silently, reloads implicitly", () =>
    Effect.gen(function*() {
      const [v1] = yield* adapters(1)
      const server = yield* fake({ maxLoadedLoras: 1 })
      const post = (path: string, body: unknown) =>
        Effect.promise(async () => {
          const answer = await fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body) })
          return { status: answer.status, text: await answer.text() }
        })
      assert.strictEqual((yield* post("/load_lora_adapter", { lora_name: "x", lora_path: v1 })).status, 200)
      const twice = yield* post("/load_lora_adapter", { lora_name: "x", lora_path: v1 })
      assert.strictEqual(twice.status, 400)
      assert.include(twice.text, "already loaded")
      assert.strictEqual((yield* post("/load_lora_adapter", { lora_name: "y", lora_path: v1 })).status, 200)
      assert.deepStrictEqual([server.lora.loaded(), server.lora.evicted], [["y"], ["x"]])
      const engine = yield* SglangEngine.SglangEngine.make({ workerUrls: [server.url], retryBase: "1 millis" }).pipe(
        Effect.orDie
      )
      const unknown = yield* Effect.flip(engine.generate(request("u", { lora: "never" })))
      assert.include(unknown.message, "Got LoRA adapter that has never been loaded: never")
      yield* engine.generate(request("u", { lora: "x" }))
      assert.strictEqual(server.lora.reloads(), 1)
      const gone = yield* post("/unload_lora_adapter", { lora_name: "zzz" })
      assert.strictEqual(gone.status, 400)
      assert.include(gone.text, "does not exist")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})
