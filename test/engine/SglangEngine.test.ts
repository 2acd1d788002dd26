import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Logger, Metric } from "effect"
import * as Fs from "node:fs"
import { createServer } from "node:net"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Http from "../../layers/engine/sglang/Http.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as Instruments from "../../layers/observability/Instruments.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Cli from "../../src/cli.ts"
import * as Rid from "../../src/engine/Rid.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as LoraAdapters from "../support/LoraAdapters.ts"
import * as TempDir from "../support/TempDir.ts"

const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]

const sampling = (overrides: Partial<Engine.SamplingParams> = {}): Engine.SamplingParams => ({
  maxNewTokens: 16,
  temperature: 1,
  topP: 1,
  topK: -1,
  stop: [],
  stopTokenIds: [],
  seed: 5,
  ...overrides
})

let requests = 0
const freshRid = () => Rid.forAttempt({ sessionId: "sglang-test", parent: "root", turn: requests++, attempt: 0 })

const request = (
  overrides: Partial<Engine.GenerateRequest> = {},
  params: Partial<Engine.SamplingParams> = {}
): Engine.GenerateRequest => ({
  inputIds: prompt,
  sampling: sampling(params),
  rid: freshRid(),
  returnLogprob: true,
  ...overrides
})

const embedded = Effect.gen(function*() {
  return yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
    ...EmbeddedEngine.EmbeddedEngine.instant,
    seed: 3
  })
})

const fake = (options: FakeSglang.FakeSglangOptions = {}) =>
  Effect.gen(function*() {
    return yield* FakeSglang.make({ engine: yield* embedded, ...options })
  })

/** A client sending `sampling_seed`, so answers can be compared with the embedded engine's under the same seed. */
const client = (
  options: SglangEngine.SglangEngineOptions
): Effect.Effect<Engine.WorkerFleetEngine, never, import("effect").Scope.Scope> =>
  SglangEngine.SglangEngine.make({ retryBase: "1 millis", samplingSeed: true, ...options }).pipe(Effect.orDie)

/** A loopback port nothing listens on. */
const deadUrl = Effect.promise(() =>
  new Promise<string>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(`http://127.0.0.1:${port}`))
    })
  })
)

/** The trainer's own push of weights with their version (here straight to the server, as a trainer would). */
const pushVersion = (server: FakeSglang.FakeSglang, version: string) =>
  Effect.promise(() =>
    fetch(`${server.url}/update_weights_from_disk`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_path: `/ckpt/${version}`, weight_version: version })
    }).then((r) => r.status)
  )

const generateBodies = (server: FakeSglang.FakeSglang) =>
  server.requests.filter((r) => r.path === "/generate").map((r) => r.body as Record<string, unknown>)

describe("SglangEngine /generate", () => {
  it.live("returns the ids, logprobs, finish reason and counts SGLang produced", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      const engine = yield* client({ workerUrls: [server.url] })
      const direct = yield* embedded
      const req = request({ imageData: ["data:image/png;base64,AAAA"] })
      const result = yield* engine.generate(req)
      const expected = yield* direct.generate(req)
      assert.deepStrictEqual(result.outputIds, expected.outputIds)
      assert.deepStrictEqual(result.logprobs, expected.logprobs)
      assert.deepStrictEqual(result.finishReason, expected.finishReason)
      assert.strictEqual(result.promptTokens, prompt.length)
      assert.strictEqual(result.weightVersion, "default")
      const [body] = generateBodies(server)
      assert.deepStrictEqual(body, {
        input_ids: prompt,
        sampling_params: {
          max_new_tokens: 16,
          temperature: 1,
          top_p: 1,
          top_k: -1,
          min_p: 0,
          stop: [],
          stop_token_ids: [],
          skip_special_tokens: false,
          spaces_between_special_tokens: false,
          no_stop_trim: true,
          sampling_seed: 5
        },
        rid: req.rid,
        return_logprob: true,
        image_data: ["data:image/png;base64,AAAA"]
      })
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("sends sampling_seed only with --sglang-enable-deterministic-inference, as Relax", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      const plain = yield* client({ workerUrls: [server.url], samplingSeed: false })
      yield* plain.generate(request())
      const deterministic = yield* client({ workerUrls: [server.url], samplingSeed: true })
      yield* deterministic.generate(request())
      const [first, second] = generateBodies(server).map((body) => body["sampling_params"] as Record<string, unknown>)
      assert.notProperty(first, "sampling_seed")
      assert.strictEqual(second?.["sampling_seed"], 5)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("takes ids from output_ids when logprobs were not requested", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      const engine = yield* client({ workerUrls: [server.url] })
      const result = yield* engine.generate(request({ returnLogprob: false }))
      const expected = yield* (yield* embedded).generate(request({ returnLogprob: false }))
      assert.deepStrictEqual(result.outputIds, expected.outputIds)
      assert.deepStrictEqual(result.logprobs, [])
      assert.strictEqual(generateBodies(server)[0]?.["return_logprob"], false)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("turns SGLang's 400 context rejection into ContextLengthError without retrying", () =>
    Effect.gen(function*() {
      const server = yield* fake({ contextLength: 20 })
      const engine = yield* client({ workerUrls: [server.url] })
      const error = yield* engine.generate(request({}, { maxNewTokens: 11 })).pipe(Effect.flip)
      assert.strictEqual(error._tag, "ContextLengthError")
      assert.include(error.message, "Requested token count exceeds the model's maximum context length of 20 tokens")
      const tooLong = yield* engine.generate(
        request({ inputIds: Array.from({ length: 20 }, () => 9) }, { maxNewTokens: 1 })
      ).pipe(Effect.flip)
      assert.strictEqual(
        tooLong.message,
        "The input (20 tokens) is longer than the model's context length (20 tokens)."
      )
      assert.strictEqual(server.generateCount(), 2)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("reports SGLang's validation errors (4xx) without retrying", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      const engine = yield* client({ workerUrls: [server.url] })
      const error = yield* engine.generate(request({}, { topP: 0 })).pipe(Effect.flip)
      assert.strictEqual(error._tag, "EngineError")
      assert.include(error.message, "HTTP 400: top_p must be in (0, 1], got 0.")
      assert.isTrue(
        error._tag === "EngineError" && error.reason === "status" && error.status === 400 && !error.retryable
      )
      server.failNext(1, 404, "no such route")
      const notFound = yield* engine.generate(request()).pipe(Effect.flip)
      assert.include(notFound.message, "HTTP 404: no such route")
      assert.strictEqual(server.generateCount(), 2)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("gives up on a request past the request timeout without retrying, and aborts its rid", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      // undici's own timers drive the timeout, so this one runs on real time (a short limit, no timing assertion).
      const engine = yield* client({ workerUrls: [server.url], requestTimeout: "200 millis" })
      server.hold(1)
      const req = request()
      const error = yield* engine.generate(req).pipe(Effect.flip)
      assert.strictEqual(error._tag, "EngineError")
      assert.include(error.message, `SGLang at ${server.url}/generate did not answer within the request timeout`)
      assert.isTrue(error._tag === "EngineError" && error.reason === "timeout" && !error.retryable)
      assert.strictEqual(server.generateCount(), 1)
      assert.deepStrictEqual(server.aborts, [req.rid])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("retries 5xx answers with backoff and succeeds", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      const engine = yield* client({ workerUrls: [server.url] })
      server.failNext(2, 503, "Service Unavailable")
      const result = yield* engine.generate(request())
      assert.isAbove(result.outputIds.length, 0)
      assert.strictEqual(server.generateCount(), 3)
      server.failNext(10, 500)
      const exhausted = yield* SglangEngine.SglangEngine.make({
        workerUrls: [server.url],
        retries: 2,
        retryBase: "1 millis"
      }).pipe(
        Effect.flatMap((e) => e.generate(request())),
        Effect.flip
      )
      assert.include(exhausted.message, "HTTP 500")
      assert.strictEqual(server.generateCount(), 6)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("SglangEngine workers", () => {
  it.live("fails at startup with an error naming the unreachable URL", () =>
    Effect.gen(function*() {
      const url = yield* deadUrl
      const error = yield* SglangEngine.SglangEngine.make({ workerUrls: [url], startupTimeout: "0 millis" }).pipe(
        Effect.flip
      )
      assert.strictEqual(error._tag, "EngineError")
      assert.include(error.message, `SGLang is not healthy at ${url}`)
      assert.include(error.message, "ECONNREFUSED")
      assert.strictEqual(error.reason, "unhealthy")
      assert.strictEqual((error.cause as { readonly reason?: string } | undefined)?.reason, "unreachable")
      const neither = yield* SglangEngine.SglangEngine.make({}).pipe(Effect.flip)
      assert.include(neither.message, "exactly one of the two")
      assert.strictEqual(neither.reason, "config")
    }))

  it.live("keeps a session on one worker and spreads new sessions", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const b = yield* fake()
      const engine = yield* client({ workerUrls: [a.url, b.url] })
      yield* engine.generate(request({ sessionId: "s1" }))
      yield* engine.generate(request({ sessionId: "s2" }))
      yield* engine.generate(request({ sessionId: "s1" }))
      yield* engine.generate(request({ sessionId: "s2" }))
      yield* engine.generate(request({ sessionId: "s1" }))
      assert.strictEqual(a.generateCount(), 3)
      assert.strictEqual(b.generateCount(), 2)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live(
    "an attempt whose worker dies mid-request moves: a tokenless abort naming the worker, the next attempt and the session on the live worker, the dead one skipped by updates and counted",
    () =>
      Effect.gen(function*() {
        const a = yield* fake()
        const b = yield* fake()
        const engine = yield* client({ workerUrls: [a.url, b.url] })
        a.dieOnNextGenerate()
        const req = request({ sessionId: "s1" })
        const moved = yield* engine.generate(req)
        assert.deepStrictEqual(moved.outputIds, [])
        assert.strictEqual(moved.finishReason.type, "abort")
        assert.strictEqual(moved.movedFrom?.worker, a.url)
        assert.strictEqual(a.generateCount(), 1)
        assert.strictEqual(b.generateCount(), 0)
        // The caller resumes it (a new rid): it lands on the live worker with what the uninterrupted run gives.
        const resumed = yield* engine.generate({ ...req, rid: Rid.retry(req.rid, 1) })
        const expected = yield* (yield* embedded).generate(req)
        assert.deepStrictEqual(resumed.outputIds, expected.outputIds)
        assert.strictEqual(b.generateCount(), 1)
        yield* engine.generate(request({ sessionId: "s1" }))
        assert.strictEqual(b.generateCount(), 2)
        // The trainer's update succeeds on the live worker and names the dead one.
        assert.strictEqual(yield* engine.updateWeights("v1"), "v1")
        assert.strictEqual(b.weightVersion(), "v1")
        assert.deepStrictEqual((yield* engine.workers).down, [a.url])
        const metrics = yield* engine.takeStepMetrics
        assert.strictEqual(metrics["engine/worker_down"], 1)
        assert.strictEqual(metrics["engine/attempts_moved"], 1)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
  )

  it.live("abort fans out to every worker and the pending generate returns the partial output", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const b = yield* fake()
      const engine = yield* client({ workerUrls: [a.url, b.url] })
      a.hold(3)
      b.hold(3)
      const req = request({ sessionId: "s1" }, { maxNewTokens: 12 })
      const fiber = yield* engine.generate(req).pipe(Effect.forkChild)
      yield* Effect.raceFirst(a.awaitGenerates(1), b.awaitGenerates(1))
      yield* engine.abort(req.rid)
      const result = yield* Fiber.join(fiber)
      const full = yield* (yield* embedded).generate(req)
      assert.deepStrictEqual(result.outputIds, full.outputIds.slice(0, 3))
      assert.deepStrictEqual(result.logprobs, full.logprobs.slice(0, 3))
      assert.deepStrictEqual(result.finishReason, { type: "abort", message: "Aborted" })
      assert.deepStrictEqual(a.aborts, [req.rid])
      assert.deepStrictEqual(b.aborts, [req.rid])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("interrupting a generate aborts its rid on the workers", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const engine = yield* client({ workerUrls: [a.url] })
      a.hold(1)
      const req = request()
      const fiber = yield* engine.generate(req).pipe(Effect.forkChild)
      yield* a.awaitGenerates(1)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
      assert.deepStrictEqual(a.aborts, [req.rid])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("bounds in-flight requests per worker (--sglang-server-concurrency)", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const engine = yield* client({ workerUrls: [a.url], serverConcurrency: 1 })
      a.hold(1)
      const first = yield* engine.generate(request()).pipe(Effect.forkChild)
      const second = yield* engine.generate(request()).pipe(Effect.forkChild)
      yield* a.awaitGenerates(1)
      yield* engine.health
      assert.strictEqual(a.generateCount(), 1)
      a.release()
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      assert.strictEqual(a.generateCount(), 2)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("updates the weight version on every worker and reports it on later generations", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const b = yield* fake()
      const engine = yield* client({ workerUrls: [a.url, b.url] })
      assert.strictEqual(yield* engine.weightVersion, "default")
      assert.strictEqual(yield* engine.updateWeights("7"), "7")
      assert.strictEqual(yield* engine.updateWeights(), "8")
      for (const server of [a, b]) {
        const bodies = server.requests.filter((r) => r.path === "/update_weight_version").map((r) => r.body)
        assert.deepStrictEqual(bodies, [{ new_version: "7", abort_all_requests: true }, {
          new_version: "8",
          abort_all_requests: true
        }])
      }
      assert.strictEqual((yield* engine.generate(request({ sessionId: "x" }))).weightVersion, "8")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("SglangEngine partial rollout: abort and resume", () => {
  it.live("a generation aborted on every worker and resumed from prompt ++ partial yields the uninterrupted output", () =>
    Effect.gen(function*() {
      // A model that rarely ends a turn, so the abort lands mid-output.
      const model = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
        ...EmbeddedEngine.EmbeddedEngine.instant,
        seed: 3,
        model: { eosProbability: 0.005 }
      })
      const a = yield* FakeSglang.make({ engine: model })
      const b = yield* FakeSglang.make({ engine: model })
      const engine = yield* client({ workerUrls: [a.url, b.url] })
      const whole = yield* model.generate(request({}, { maxNewTokens: 24 }))
      assert.isAbove(whole.outputIds.length, 5)
      a.hold(5)
      b.hold(5)
      const first = request({ sessionId: "s1" }, { maxNewTokens: 24 })
      const fiber = yield* engine.generate(first).pipe(Effect.forkChild)
      yield* Effect.raceFirst(a.awaitGenerates(1), b.awaitGenerates(1))
      yield* engine.abort(first.rid)
      const partial = yield* Fiber.join(fiber)
      assert.strictEqual(partial.finishReason.type, "abort")
      assert.strictEqual(partial.outputIds.length, 5)
      assert.deepStrictEqual(a.aborts, [first.rid])
      assert.deepStrictEqual(b.aborts, [first.rid])
      a.release()
      b.release()
      const resumed = request(
        { sessionId: "s1", inputIds: [...prompt, ...partial.outputIds], resumedTokens: partial.outputIds.length },
        { maxNewTokens: 24 - partial.outputIds.length }
      )
      const rest = yield* engine.generate(resumed)
      const body = generateBodies(a).concat(generateBodies(b)).find((r) => r["rid"] === resumed.rid)
      assert.deepStrictEqual(body?.["input_ids"], [...prompt, ...partial.outputIds])
      assert.strictEqual((body?.["sampling_params"] as Record<string, unknown> | undefined)?.["max_new_tokens"], 19)
      assert.notStrictEqual(resumed.rid, first.rid)
      assert.deepStrictEqual([...partial.outputIds, ...rest.outputIds], whole.outputIds)
      assert.deepStrictEqual([...partial.logprobs, ...rest.logprobs], whole.logprobs)
      assert.deepStrictEqual(
        rest.finishReason,
        whole.finishReason.type === "length" ? { type: "length", length: 19 } : whole.finishReason
      )
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a weight update aborts held generations on every worker; the resumed attempt reports the new version", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const engine = yield* client({ workerUrls: [a.url] })
      a.hold(2)
      const first = request({ sessionId: "s1" }, { maxNewTokens: 12 })
      const fiber = yield* engine.generate(first).pipe(Effect.forkChild)
      yield* a.awaitGenerates(1)
      assert.strictEqual(yield* engine.updateWeights("v2"), "v2")
      const partial = yield* Fiber.join(fiber)
      assert.strictEqual(partial.finishReason.type, "abort")
      assert.strictEqual(partial.outputIds.length, 2)
      assert.strictEqual(partial.weightVersion, "default")
      a.release()
      const rest = yield* engine.generate(
        request({ sessionId: "s1", inputIds: [...prompt, ...partial.outputIds] }, { maxNewTokens: 10 })
      )
      assert.strictEqual(rest.weightVersion, "v2")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("SglangEngine tokenizer check at startup", () => {
  it.live("starts when the server tokenizes as --tokenizer does, or has no /tokenize", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.Tokenizer
      const same = yield* fake({ tokenize: tokenizer.encode })
      yield* client({ workerUrls: [same.url], tokenizer })
      assert.isTrue(same.requests.some((r) => r.path === "/tokenize"))
      const old = yield* fake()
      yield* client({ workerUrls: [old.url], tokenizer })
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("checks every worker, and warns when one has no /tokenize to check", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.Tokenizer
      const warnings: Array<string> = []
      const capture = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") warnings.push(String(message))
      })
      const same = yield* fake({ tokenize: tokenizer.encode })
      const other = yield* fake({ tokenize: (text) => tokenizer.encode(text).map((id) => id + 1) })
      const error = yield* SglangEngine.SglangEngine.make({ workerUrls: [same.url, other.url], tokenizer }).pipe(
        Effect.flip
      )
      assert.include(error.message, `the SGLang server at ${other.url} tokenizes differently`)
      const old = yield* fake()
      yield* client({ workerUrls: [same.url, old.url], tokenizer }).pipe(Effect.provide(Logger.layer([capture])))
      assert.deepStrictEqual(warnings, [
        `the SGLang server at ${old.url} did not answer /tokenize with token ids (HTTP 404), so its tokenizer was not ` +
        `compared with --tokenizer ${tokenizer.source}; make sure --tokenizer is the served model's directory`
      ])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("refuses a server whose tokenizer gives other ids, naming both sides", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.Tokenizer
      const other = yield* fake({
        tokenize: (text) => tokenizer.encode(text).map((id) => id + 1),
        modelPath: "/models/Llama-3-8B"
      })
      const error = yield* SglangEngine.SglangEngine.make({ workerUrls: [other.url], tokenizer }).pipe(Effect.flip)
      assert.include(
        error.message,
        `the SGLang server at ${other.url} tokenizes differently from --tokenizer ${tokenizer.source} (the server ` +
          "serves /models/Llama-3-8B): a probe text is ["
      )
      assert.include(error.message, "Give --tokenizer the served model's directory")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("SglangEngine session lifecycle (--agentic-session-lifecycle)", () => {
  it.live("sends session_id with every request and closes the session on every worker", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const b = yield* fake()
      const engine = yield* client({ workerUrls: [a.url, b.url], sessionLifecycle: true })
      yield* engine.generate(request({ sessionId: "session-1" }))
      const [body] = [...generateBodies(a), ...generateBodies(b)]
      assert.strictEqual(body?.["session_id"], "session-1")
      yield* engine.closeSession("session-1")
      assert.deepStrictEqual(a.closedSessions, ["session-1"])
      assert.deepStrictEqual(b.closedSessions, ["session-1"])
      assert.deepStrictEqual(yield* engine.takeStepMetrics, {
        "agentic_kv/session/lifecycle_enabled": 1,
        "agentic_kv/session/close": 1,
        "agentic_kv/session/close_failure": 0,
        ...noWorkerOut
      })
      // Taking the metrics resets the step's counts.
      assert.strictEqual((yield* engine.takeStepMetrics)["agentic_kv/session/close"], 0)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("counts a failed close and carries on (fail-open, as Relax)", () =>
    Effect.gen(function*() {
      const ok = yield* fake()
      const failing = yield* fake({ failCloseSession: true })
      const engine = yield* client({ workerUrls: [ok.url, failing.url], sessionLifecycle: true })
      yield* engine.closeSession("session-2")
      assert.deepStrictEqual(failing.closedSessions, ["session-2"])
      const metrics = yield* engine.takeStepMetrics
      assert.strictEqual(metrics["agentic_kv/session/close"], 1)
      assert.strictEqual(metrics["agentic_kv/session/close_failure"], 1)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("without the flag sends no session_id, closes nothing and reports no session metrics", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      const engine = yield* client({ workerUrls: [server.url] })
      yield* engine.generate(request({ sessionId: "session-3" }))
      assert.notProperty(generateBodies(server)[0], "session_id")
      yield* engine.closeSession("session-3")
      assert.deepStrictEqual(server.closedSessions, [])
      assert.deepStrictEqual(yield* engine.takeStepMetrics, noWorkerOut)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

/** The worker counters of a step in which no worker died. */
const noWorkerOut = { "engine/worker_down": 0, "engine/attempts_moved": 0, "engine/worker_quarantined": 0 }

describe("SglangEngine behind a router", () => {
  it.live("discovers workers from /workers, routes by X-SMG-Routing-Key and aborts on every worker", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const b = yield* fake()
      const router = yield* fake({ routeTo: [a.url, b.url] })
      const engine = yield* client({ routerUrl: router.url })
      const req = request({ sessionId: "session-1" })
      const result = yield* engine.generate(req)
      assert.deepStrictEqual(result.outputIds, (yield* (yield* embedded).generate(req)).outputIds)
      const routed = router.requests.find((r) => r.path === "/generate")
      assert.strictEqual(routed?.headers["x-smg-routing-key"], "session-1")
      assert.strictEqual(a.generateCount() + b.generateCount(), 1)
      yield* engine.abort(req.rid)
      assert.deepStrictEqual(a.aborts, [req.rid])
      assert.deepStrictEqual(b.aborts, [req.rid])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("is chosen with --sglang-router-url on the command line or in --config, and routes sticky by Session", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const b = yield* fake()
      const router = yield* fake({ routeTo: [a.url, b.url] })
      const settingsOf = (argv: ReadonlyArray<string>) =>
        Cli.parseArgs(argv).pipe(
          Effect.flatMap((values) => Cli.settingsFromFlags(values)),
          Effect.provide(NodeServices.layer)
        )
      const common = [
        "--prompt-data",
        "d.jsonl",
        "--rollout-batch-size",
        "1",
        "--engine",
        "sglang",
        "--tokenizer",
        "/m"
      ]
      const fromFlags = yield* settingsOf([...common, "--sglang-router-url", router.url])
      const file = Path.join(yield* TempDir.scoped("sglang-router-"), "rollout.json")
      Fs.writeFileSync(file, JSON.stringify({ "sglang-router-url": router.url }))
      const fromConfig = yield* settingsOf([...common, "--config", file])
      assert.deepStrictEqual(
        SglangEngine.SglangEngine.optionsOf(fromConfig),
        SglangEngine.SglangEngine.optionsOf(fromFlags)
      )
      const engine = yield* client(SglangEngine.SglangEngine.optionsOf(fromFlags))
      yield* engine.generate(request({ sessionId: "session-a" }))
      yield* engine.generate(request({ sessionId: "session-a" }))
      const keys = router.requests.filter((r) => r.path === "/generate").map((r) => r.headers["x-smg-routing-key"])
      assert.deepStrictEqual(keys, ["session-a", "session-a"])
      // The fake router hashes the key: both requests of the Session reached the same worker.
      assert.deepStrictEqual([a.generateCount(), b.generateCount()].sort(), [0, 2])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("falls back to /list_workers, and reports a router that lists no workers", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const router = yield* fake({ routeTo: [a.url], listWorkersOnly: true })
      const engine = yield* client({ routerUrl: router.url })
      yield* engine.abort(freshRid())
      assert.strictEqual(a.aborts.length, 1)
      const empty = yield* fake({ routeTo: [] })
      const error = yield* SglangEngine.SglangEngine.make({ routerUrl: empty.url }).pipe(Effect.flip)
      assert.include(error.message, `SGLang returned no workers: the router at ${empty.url} lists none`)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("SglangEngine against SGLang's real behaviour (docs/sglang.md)", () => {
  it.live("an abort that hits a queued request is a zero-token abort, not a failure (Abort in waiting queue)", () =>
    Effect.gen(function*() {
      const server = yield* fake({ maxRunningRequests: 1 })
      const engine = yield* client({ workerUrls: [server.url] })
      server.hold(2)
      const running = request({ sessionId: "s1" })
      const queued = request({ sessionId: "s2" })
      const first = yield* engine.generate(running).pipe(Effect.forkChild)
      yield* server.awaitGenerates(1)
      const second = yield* engine.generate(queued).pipe(Effect.forkChild)
      yield* server.awaitQueued(1)
      // The one-call weight update aborts both: the running one with its partial, the queued one with nothing.
      yield* engine.updateWeights("v2")
      const partial = yield* Fiber.join(first)
      const empty = yield* Fiber.join(second)
      assert.deepStrictEqual(partial.finishReason, { type: "abort", message: "Aborted" })
      assert.strictEqual(partial.outputIds.length, 2)
      assert.deepStrictEqual(empty.outputIds, [])
      assert.deepStrictEqual(empty.finishReason, { type: "abort", message: "Abort in waiting queue" })
      assert.strictEqual(empty.promptTokens, prompt.length)
      // SGLang labels both with the new version (stamped on the way out); neither ran on it.
      assert.strictEqual(partial.weightVersion, "default")
      assert.strictEqual(empty.weightVersion, "default")
      // The update cut them: their requests resume, and even the empty one never counts toward giving up.
      assert.deepStrictEqual([partial.cutByUpdate, empty.cutByUpdate], [true, true])
      server.release()
      assert.strictEqual((yield* engine.generate(request())).weightVersion, "v2")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("pause (abort) parks running and queued attempts, holds new ones, and resume runs them on the pushed version", () =>
    Effect.gen(function*() {
      const server = yield* fake({ maxRunningRequests: 1 })
      const engine = yield* client({ workerUrls: [server.url] })
      server.hold(3)
      const first = yield* engine.generate(request()).pipe(Effect.forkChild)
      yield* server.awaitGenerates(1)
      const second = yield* engine.generate(request()).pipe(Effect.forkChild)
      yield* server.awaitQueued(1)
      yield* engine.pauseGeneration("abort")
      const [partial, empty] = [yield* Fiber.join(first), yield* Fiber.join(second)]
      assert.deepStrictEqual([partial.outputIds.length, partial.weightVersion], [3, "default"])
      assert.deepStrictEqual([empty.outputIds.length, empty.weightVersion], [0, "default"])
      // A new attempt waits in the client while paused: the server never sees it.
      server.release()
      const held = yield* engine.generate(request()).pipe(Effect.forkChild)
      const before = server.generateCount()
      // The trainer pushes its weights with their version (here straight to the server, as a trainer would).
      const push = yield* Effect.promise(() =>
        fetch(`${server.url}/update_weights_from_disk`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model_path: "/ckpt/step-1", weight_version: "step-1" })
        }).then((r) => r.status)
      )
      assert.strictEqual(push, 200)
      assert.strictEqual(server.generateCount(), before)
      assert.strictEqual(yield* engine.resumeGeneration(), "step-1")
      assert.strictEqual((yield* Fiber.join(held)).weightVersion, "step-1")
      assert.strictEqual(yield* engine.weightVersion, "step-1")
      const paths = server.requests.map((r) => r.path).filter((p) => p.endsWith("_generation"))
      assert.deepStrictEqual(paths, ["/pause_generation", "/continue_generation"])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live(
    "an attempt held by a pause that is aborted (a step boundary) ends at once with no tokens, on both engines; held, it is counted in relax_agentic_generations_held",
    () =>
      Effect.gen(function*() {
        const server = yield* fake()
        const sglang = yield* client({ workerUrls: [server.url] })
        const direct = yield* embedded
        const heldNow = Effect.map(Metric.value(Instruments.generationsHeld), (state) => state.value)
        for (const engine of [sglang, direct]) {
          const before = yield* heldNow
          yield* engine.pauseGeneration("abort")
          const req = request()
          const held = yield* engine.generate(req).pipe(Effect.forkChild)
          yield* Effect.yieldNow
          assert.strictEqual((yield* heldNow) - before, 1)
          yield* engine.abort(req.rid)
          const result = yield* Fiber.join(held)
          assert.deepStrictEqual([result.outputIds, result.finishReason.type], [[], "abort"])
          assert.strictEqual(yield* heldNow, before)
          yield* engine.resumeGeneration("v1")
        }
        assert.strictEqual(server.generateCount(), 0)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
  )

  it.live("the versions and aborts of attempts running, queued and in transit at a pause, per mode", () =>
    Effect.gen(function*() {
      const server = yield* fake({ maxRunningRequests: 1 })
      const engine = yield* client({ workerUrls: [server.url] })
      // Per mode: what the attempt running, the one queued and the one still in transit to SGLang report.
      const expected = {
        // Cut (an abort on the version it started on); the one in transit waits at SGLang's pause and runs wholly
        // on the new weights.
        abort: [["abort", ["default"], true], ["abort", ["default"], true], ["finished", ["v1"], undefined]],
        // Kept by SGLang and continued: one attempt, no abort, both versions (the queued and in-transit ones too:
        // SGLang's answer does not say they had not started).
        retract: [0, 1, 2].map(() => ["finished", ["default", "v1"], undefined] as const),
        in_place: [0, 1, 2].map(() => ["finished", ["default", "v1"], undefined] as const)
      } as const
      for (const mode of ["abort", "retract", "in_place"] as const) {
        const seen = server.generateCount()
        server.hold(2)
        const running = yield* engine.generate(request()).pipe(Effect.forkChild)
        yield* server.awaitGenerates(seen + 1)
        const queued = yield* engine.generate(request()).pipe(Effect.forkChild)
        yield* server.awaitQueued(1)
        const arrive = server.stallNextGenerate()
        const inTransit = yield* engine.generate(request()).pipe(Effect.forkChild)
        yield* server.awaitGenerates(seen + 3)
        yield* engine.pauseGeneration(mode)
        arrive()
        server.release()
        yield* pushVersion(server, "v1")
        assert.strictEqual(yield* engine.resumeGeneration(), "v1")
        const results = [yield* Fiber.join(running), yield* Fiber.join(queued), yield* Fiber.join(inTransit)]
        assert.deepStrictEqual(
          results.map((r) => [
            r.finishReason.type === "abort" ? "abort" : "finished",
            r.weightVersions ?? [r.weightVersion],
            r.cutByUpdate
          ]),
          expected[mode].map(([finish, versions, cut]) => [finish, [...versions], cut]),
          mode
        )
        // Back to "default" for the next mode (a relabel between generations changes nothing in flight).
        yield* engine.updateWeights("default")
      }
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("the scheduler's input-length 400 is a ContextLengthError; a silently truncated prompt refuses the turn", () =>
    Effect.gen(function*() {
      const strict = yield* fake({ maxReqInputLen: 8 })
      const engine = yield* client({ workerUrls: [strict.url] })
      const error = yield* engine.generate(request()).pipe(Effect.flip)
      assert.strictEqual(error._tag, "ContextLengthError")
      assert.include(error.message, "Input length (9 tokens) exceeds the maximum allowed length (8 tokens)")
      const truncating = yield* fake({ maxReqInputLen: 8, allowAutoTruncate: true })
      const cut = yield* (yield* client({ workerUrls: [truncating.url] })).generate(request()).pipe(Effect.flip)
      assert.isTrue(cut._tag === "EngineError" && cut.reason === "prompt-mismatch" && !cut.retryable)
      assert.include(cut.message, "read 8 of the 9 prompt tokens sent")
      assert.include(cut.message, "--allow-auto-truncate")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a re-send SGLang refuses as a duplicate rid aborts the first copy and goes out under a retry rid", () =>
    Effect.gen(function*() {
      const server = yield* fake()
      const engine = yield* client({ workerUrls: [server.url] })
      server.breakNextGenerate()
      const req = request()
      const result = yield* engine.generate(req)
      assert.notStrictEqual(result.finishReason.type, "abort")
      const rids = generateBodies(server).map((b) => b["rid"])
      assert.deepStrictEqual(rids, [req.rid, req.rid, Rid.retry(req.rid, 1)])
      assert.deepStrictEqual(server.aborts, [req.rid])
      assert.isTrue(Rid.retry(req.rid, 1).startsWith(req.rid))
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("keeps idle connections below SGLang's 5 s keep-alive, which the fake enforces", () =>
    Effect.gen(function*() {
      assert.isBelow(Http.keepAliveTimeoutMs, 5000)
      const server = yield* fake({ keepAliveTimeoutMs: 50 })
      const engine = yield* client({ workerUrls: [server.url] })
      yield* engine.generate(request())
      yield* engine.generate(request())
      const reused = server.connections()
      // Past the server's idle timeout the socket is gone; the next request opens a new one and succeeds.
      yield* Effect.sleep("150 millis")
      yield* engine.generate(request())
      assert.isAbove(server.connections(), reused)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("an unknown sampling key (500 TypeError) fails at once; 429 is retried; 503 at startup is waited for", () =>
    Effect.gen(function*() {
      const server = yield* fake({ startingHealthChecks: 2 })
      const engine = yield* client({ workerUrls: [server.url], healthInterval: "5 millis" })
      assert.strictEqual(server.requests.filter((r) => r.path === "/health").length, 3)
      server.failNext(1, 500, "SamplingParams.__init__() got an unexpected keyword argument 'sampling_seed'")
      const error = yield* engine.generate(request()).pipe(Effect.flip)
      assert.isTrue(error._tag === "EngineError" && error.reason === "invalid-request" && !error.retryable)
      assert.include(error.message, "drop --sglang-enable-deterministic-inference")
      assert.strictEqual(server.generateCount(), 1)
      server.failNext(2, 429, "Too many concurrent requests")
      assert.isAbove((yield* engine.generate(request())).outputIds.length, 0)
      assert.strictEqual(server.generateCount(), 4)
      const starting = yield* fake({ startingHealthChecks: 1000 })
      const late = yield* SglangEngine.SglangEngine.make({
        workerUrls: [starting.url],
        healthInterval: "5 millis",
        startupTimeout: "30 millis"
      }).pipe(Effect.flip)
      assert.strictEqual(late.reason, "unhealthy")
      assert.include(late.message, "HTTP 503")
      assert.include(late.message, "after waiting")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("sends Authorization: Bearer to servers launched with --api-key", () =>
    Effect.gen(function*() {
      const server = yield* fake({ apiKey: "secret" })
      const anonymous = yield* client({ workerUrls: [server.url] })
      const refused = yield* anonymous.generate(request()).pipe(Effect.flip)
      assert.include(refused.message, "HTTP 401: Unauthorized")
      const engine = yield* client({ workerUrls: [server.url], apiKey: "secret" })
      yield* engine.generate(request())
      assert.strictEqual(server.requests.at(-1)?.headers.authorization, "Bearer secret")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("a --dp-aware router's url@rank workers become origins; a worker registered later gets the next update", () =>
    Effect.gen(function*() {
      const a = yield* fake()
      const b = yield* fake()
      const router = yield* fake({ routeTo: [a.url], dpSize: 2 })
      const engine = yield* client({ routerUrl: router.url })
      yield* engine.abort(freshRid())
      assert.strictEqual(a.aborts.length, 1)
      router.addWorker(b.url)
      yield* engine.updateWeights("v3")
      assert.strictEqual(a.weightVersion(), "v3")
      assert.strictEqual(b.weightVersion(), "v3")
      router.removeWorker(a.url)
      yield* engine.pauseGeneration("abort")
      yield* engine.resumeGeneration("v4")
      assert.strictEqual(a.weightVersion(), "v3")
      assert.deepStrictEqual(b.requests.map((r) => r.path).filter((p) => p.endsWith("_generation")), [
        "/pause_generation",
        "/continue_generation"
      ])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.live("sends priority for resumed attempts and protected Sessions' requests, and lora_path when configured", () =>
    Effect.gen(function*() {
      const server = yield* fake({ enablePriorityScheduling: true })
      // The fixed adapter of --sglang-lora-path, loaded on the server by its operator.
      const [dir] = (yield* LoraAdapters.versions(1)).dirs
      yield* Effect.promise(() =>
        fetch(`${server.url}/load_lora_adapter`, {
          method: "POST",
          body: JSON.stringify({ lora_name: "adapter-1", lora_path: dir })
        })
      )
      const engine = yield* client({ workerUrls: [server.url], priorityScheduling: true, loraPath: "adapter-1" })
      yield* engine.generate(request())
      yield* engine.generate(request({ inputIds: [...prompt, 5, 6], resumedTokens: 2 }, { maxNewTokens: 4 }))
      yield* engine.generate(request({ protected: true }))
      const bodies = generateBodies(server)
      assert.deepStrictEqual(bodies.map((b) => b["priority"]), [0, 1, 1])
      assert.deepStrictEqual(bodies.map((b) => b["lora_path"]), ["adapter-1", "adapter-1", "adapter-1"])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})
