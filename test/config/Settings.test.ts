import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as FlagTable from "../../src/config/FlagTable.ts"
import * as Settings from "../../src/config/Settings.ts"

const base = { promptData: "train.jsonl", rolloutBatchSize: 4 }

describe("rollout configuration", () => {
  it.effect("fills the reference defaults", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve(base)
      assert.strictEqual(s.overSamplingBatchSize, 4)
      assert.strictEqual(s.agenticConcurrency, 4)
      assert.strictEqual(s.nSamplesPerPrompt, 1)
      assert.strictEqual(s.agentTimeout, 1800)
      assert.strictEqual(s.rolloutTemperature, 1)
      assert.strictEqual(s.rolloutTopP, 1)
      assert.strictEqual(s.rolloutTopK, -1)
      assert.strictEqual(s.rolloutSeed, 42)
      assert.strictEqual(s.inputKey, "input")
      assert.strictEqual(s.metadataKey, "metadata")
      assert.strictEqual(s.engine, "embedded")
      assert.strictEqual(s.host, "127.0.0.1")
      assert.strictEqual(s.port, 0)
      assert.strictEqual(s.agenticPrelaunch, false)
      assert.strictEqual(s.nSamplesPerEvalPrompt, 1)
    }))

  it.effect("derives agentic_concurrency from over_sampling_batch_size, and the batch size from the global batch", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve({
        promptData: "t.jsonl",
        globalBatchSize: 32,
        nSamplesPerPrompt: 4,
        overSamplingBatchSize: 10
      })
      assert.strictEqual(s.rolloutBatchSize, 8)
      assert.strictEqual(s.agenticConcurrency, 10)
    }))

  it.effect("rejects over-sampling below the batch size, naming both flags", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Settings.resolve({ ...base, overSamplingBatchSize: 2 }))
      assert.strictEqual(
        error.message,
        "--over-sampling-batch-size: 2 is below --rollout-batch-size 4; it must be >= the batch size (or omit it)"
      )
    }))

  it.effect("rejects reserved agent environment keys and malformed entries", () =>
    Effect.gen(function*() {
      const reserved = yield* Effect.flip(Settings.resolve({ ...base, agentEnv: ["RELAX_BASE_URL=x"] }))
      assert.include(
        reserved.message,
        "--agent-env: key 'RELAX_BASE_URL' is reserved: keys starting with RELAX_ are set by Relax"
      )
      const malformed = yield* Effect.flip(Settings.resolve({ ...base, agentEnv: ["FOO"] }))
      assert.include(malformed.message, "--agent-env: entry 'FOO' must have the form KEY=VALUE")
      const ok = yield* Settings.resolve({ ...base, agentEnv: ["A=b=c"] })
      assert.deepStrictEqual(ok.agentEnvVars, { A: "b=c" })
    }))

  it.effect("names the flag of a value of the wrong shape", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Settings.resolve({ ...base, nSamplesPerPrompt: 0 }))
      assert.strictEqual(error.option, "configuration")
      assert.include(error.message, "--n-samples-per-prompt")
      const unknown = yield* Effect.flip(Settings.resolve({ ...base, rolloutBatchSzie: 3 }))
      assert.strictEqual(unknown.message, "configuration: Expected no excess property\n  at --rollout-batch-szie")
    }))

  it.effect("checks the cross-field rules", () =>
    Effect.gen(function*() {
      const messages = yield* Effect.forEach([
        {},
        { ...base, saveDebugRolloutData: "dump.jsonl" },
        { ...base, evalInterval: 2 },
        { ...base, engine: "sglang" },
        { ...base, useDynamicBatchSize: true },
        { ...base, evalPromptData: [{ name: "a", path: "a" }, { name: "a", path: "b" }] },
        { ...base, groupRm: true }
      ], (input) => Effect.flip(Settings.resolve(input)).pipe(Effect.map((e) => e.message)))
      assert.match(messages[0]!, /^--prompt-data: a training dataset is required/)
      assert.match(messages[1]!, /^--save-debug-rollout-data: "dump.jsonl" must contain \{rollout_id\}/)
      assert.match(messages[2]!, /^--eval-interval: is set but no --eval-prompt-data NAME PATH is given/)
      assert.match(messages[3]!, /^--sglang-url: --engine sglang needs the SGLang workers/)
      assert.match(messages[4]!, /^--max-tokens-per-gpu: is required with --use-dynamic-batch-size/)
      assert.match(messages[5]!, /^--eval-prompt-data: the Eval dataset name "a" is used twice/)
      assert.match(messages[6]!, /^--group-rm: requires --custom-rm-path/)
    }))

  it.effect("requires the served model's tokenizer and one way to reach SGLang with --engine sglang", () =>
    Effect.gen(function*() {
      const sglang = { ...base, engine: "sglang", tokenizer: "/models/qwen" }
      const message = (input: object) => Effect.flip(Settings.resolve(input)).pipe(Effect.map((e) => e.message))
      assert.match(
        yield* message({ ...base, engine: "sglang", sglangUrls: ["http://w:30000"] }),
        /^--tokenizer: is required with --engine sglang: give the served model's tokenizer directory/
      )
      assert.match(yield* message(sglang), /^--sglang-url: --engine sglang needs the SGLang workers .* or a router/)
      assert.match(
        yield* message({ ...sglang, sglangUrls: ["http://w:30000"], sglangRouterUrl: "http://r:30000" }),
        /^--sglang-router-url: give either --sglang-url \(the workers\) or --sglang-router-url/
      )
      const routed = yield* Settings.resolve({ ...sglang, sglangRouterUrl: "http://r:30000" })
      assert.strictEqual(routed.sglangRouterUrl, "http://r:30000")
    }))

  it.effect("refuses a flag the chosen engine would ignore", () =>
    Effect.gen(function*() {
      const message = (input: object) => Effect.flip(Settings.resolve(input)).pipe(Effect.map((e) => e.message))
      assert.strictEqual(
        yield* message({ ...base, sglangUrls: ["http://w:30000"] }),
        "--sglang-url: is only used with --engine sglang; add --engine sglang or remove it"
      )
      assert.match(
        yield* message({ ...base, sglangEnableDeterministicInference: true }),
        /^--sglang-enable-deterministic-inference: is only used/
      )
      assert.match(
        yield* message({ ...base, agenticSessionLifecycle: true }),
        /^--agentic-session-lifecycle: is only used/
      )
      assert.match(
        yield* message({ ...base, sglangServerConcurrency: 8 }),
        /^--sglang-server-concurrency: is only used/
      )
      assert.match(
        yield* message({
          ...base,
          engine: "sglang",
          tokenizer: "/m",
          sglangUrls: ["http://w:1"],
          embeddedPolicy: "p.ts#f"
        }),
        /^--embedded-policy: scripts the embedded engine and is not used with --engine sglang/
      )
    }))

  it.effect("gives train and Eval sampling from the configuration, Eval falling back to rollout values", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve({
        ...base,
        rolloutTemperature: 0.7,
        rolloutMaxResponseLen: 256,
        rolloutStop: ["</answer>"],
        evalTemperature: 0,
        evalMaxResponseLen: 64,
        rolloutMaxContextLen: 4096
      })
      assert.deepStrictEqual(Settings.trainSampling(s, 2), {
        maxNewTokens: 256,
        temperature: 0.7,
        topP: 1,
        topK: -1,
        stop: ["</answer>"],
        stopTokenIds: [],
        seed: 44
      })
      const e = Settings.evalSampling(s, 0)
      assert.strictEqual(e.temperature, 0)
      assert.strictEqual(e.maxNewTokens, 64)
      assert.strictEqual(e.topP, 1)
      assert.strictEqual(Settings.evalMaxContextLen(s), 4096)
    }))

  it.effect("computes Eval concurrency and the capacity table from the settings", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve({
        ...base,
        nSamplesPerPrompt: 8,
        agenticPrelaunch: true,
        evalPromptData: [{ name: "a", path: "a.jsonl", nSamplesPerEvalPrompt: 3 }],
        agentMaxSlots: 40
      })
      assert.strictEqual(Settings.evalConcurrency(s, 3), 11)
      const report = Settings.capacity(s)
      assert.strictEqual(report.requiredSlots, 32 + 33)
      assert.isString(report.warning)
    }))

  it.effect("rejects --partial-rollout-max-aborted-count without --partial-rollout, and --normalize-advantages with --fully-async", () =>
    Effect.gen(function*() {
      const [maxAborted, normalize] = yield* Effect.forEach([
        { ...base, partialRolloutMaxAbortedCount: 2 },
        { ...base, fullyAsync: true, normalizeAdvantages: true }
      ], (input) => Effect.flip(Settings.resolve(input)).pipe(Effect.map((e) => e.message)))
      assert.match(maxAborted!, /^--partial-rollout-max-aborted-count: only applies with --partial-rollout/)
      assert.match(normalize!, /^--normalize-advantages: cannot be used with --fully-async: global advantage whitening/)
      assert.strictEqual(
        (yield* Effect.flip(Settings.resolve({ ...base, partialRolloutMaxAbortedCount: 0 }))).option,
        "configuration"
      )
    }))

  it.effect("counts --partial-rollout and --fully-async as keeping training Sessions resident during Eval", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve({
        ...base,
        nSamplesPerPrompt: 2,
        evalPromptData: [{ name: "a", path: "a.jsonl" }]
      })
      assert.strictEqual(Settings.capacity(s).rule, "max(T, E_peak)")
      for (const mode of [{ partialRollout: true }, { fullyAsync: true }, { partialRollout: true, fullyAsync: true }]) {
        const report = Settings.capacity({ ...s, ...mode })
        assert.strictEqual(report.rule, "T + E_peak")
        assert.strictEqual(report.requiredSlots, 8 + 8)
        assert.deepStrictEqual(
          report.residentBecause,
          [
            ...("partialRollout" in mode ? ["--partial-rollout"] : []),
            ...("fullyAsync" in mode ? ["--fully-async"] : [])
          ]
        )
      }
      assert.deepStrictEqual(
        Settings.retentionMode({ ...s, partialRollout: true, partialRolloutMaxAbortedCount: 3 }),
        { partialRollout: true, fullyAsync: false, maxAbortedCount: 3 }
      )
    }))

  it.effect("defaults the consecutive-drop limit to max(8, 2 * agentic_concurrency), keeps 0 (unlimited)", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* Settings.resolve(base)).agenticMaxConsecutiveDrops, 8)
      assert.strictEqual((yield* Settings.resolve({ ...base, agenticConcurrency: 6 })).agenticMaxConsecutiveDrops, 12)
      assert.strictEqual(
        (yield* Settings.resolve({ ...base, agenticMaxConsecutiveDrops: 0 })).agenticMaxConsecutiveDrops,
        0
      )
      assert.strictEqual(
        (yield* Settings.resolve({ ...base, agenticMaxConsecutiveDrops: 3 })).agenticMaxConsecutiveDrops,
        3
      )
    }))

  it.effect("rejects a negative or fractional consecutive-drop limit, naming the flag", () =>
    Effect.gen(function*() {
      const negative = yield* Effect.flip(Settings.resolve({ ...base, agenticMaxConsecutiveDrops: -1 }))
      assert.include(negative.message, "--agentic-max-consecutive-drops")
      assert.include(negative.message, "greater than or equal to 0")
      const fractional = yield* Effect.flip(Settings.resolve({ ...base, agenticMaxConsecutiveDrops: 1.5 }))
      assert.include(fractional.message, "--agentic-max-consecutive-drops")
    }))

  it("maps fields to flag names", () => {
    assert.strictEqual(FlagTable.flagOf("agenticCustomAdvantagePath"), "--agentic-custom-advantage-path")
    assert.strictEqual(FlagTable.flagOf("port"), "--port")
    assert.strictEqual(FlagTable.flagOf("strictMatch"), "--agentic-strict-match")
    assert.strictEqual(FlagTable.flagOf("sglangUrls"), "--sglang-url")
    assert.strictEqual(FlagTable.flagOf("sglangRouterUrl"), "--sglang-router-url")
  })
})
