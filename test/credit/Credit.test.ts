import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { fileURLToPath } from "node:url"
import * as Credit from "../../layers/credit/Credit.ts"
import * as Hooks from "../../layers/platform/Hooks.ts"
import * as CreditOptions from "../../src/credit/CreditOptions.ts"
import type * as Group from "../../src/credit/Group.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as Samples from "./samples.ts"

const hooksDir = fileURLToPath(new URL("../fixtures/hooks/", import.meta.url))

const multiContext: CreditOptions.CreditOptions = {
  ...CreditOptions.defaults,
  nSamplesPerPrompt: 2,
  useDynamicBatchSize: true,
  maxTokensPerGpu: 64
}

const service = (options: Partial<CreditOptions.CreditOptions>, settings: Credit.CreditSettings = {}) =>
  Credit.make({ ...CreditOptions.defaults, ...options }, { cwd: hooksDir, ...settings })

const rowsOf = (
  result: ReadonlyArray<TrainingSample.TrainingSample> | "filtered"
): ReadonlyArray<TrainingSample.TrainingSample> => {
  if (result === "filtered") throw new Error("the Group was filtered")
  return result
}

const summary = (rows: ReadonlyArray<TrainingSample.TrainingSample>) =>
  rows.map((row) => [row.session_id, row.export_name, row.reward, row.advantage])

describe("custom advantage (the guide's worked example)", () => {
  it.effect("the TypeScript hook returns exactly the guide's value", () =>
    Effect.gen(function*() {
      const hook = yield* Hooks.load("--agentic-custom-advantage-path", "advantage.ts#outcomeTimesUsefulness", hooksDir)
      assert.deepStrictEqual(
        hook([
          { main: { outcome: 1.0 }, searcher_0: { usefulness: 0.6 } },
          { main: { outcome: 0.0 }, searcher_0: { usefulness: 0.2 } }
        ]),
        [{ main: 1.0, searcher_0: 0.6 }, { main: 0.0, searcher_0: 0.0 }]
      )
    }))

  it.effect("main gets the outcome and searcher_0 gets outcome × usefulness (sync .ts hook)", () =>
    Effect.gen(function*() {
      const credit = yield* service({ ...multiContext, customAdvantagePath: "advantage.ts#outcomeTimesUsefulness" })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.guideGroup(), "train"))
      assert.deepStrictEqual(summary(rows), [
        ["first", "main", 1.0, 1.0],
        ["first", "searcher_0", null, 0.6],
        ["second", "main", 0.0, 0.0],
        ["second", "searcher_0", null, 0.0]
      ])
    }))

  it.effect("gives the same credit through an async .mjs default export", () =>
    Effect.gen(function*() {
      const credit = yield* service({ ...multiContext, customAdvantagePath: "advantage.mjs" })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.guideGroup(), "train"))
      assert.deepStrictEqual(rows.map((row) => row.advantage), [1.0, 0.6, 0.0, 0.0])
    }))

  it.effect("expands per-turn credit over each turn's tokens", () =>
    Effect.gen(function*() {
      const credit = yield* service({ ...multiContext, customAdvantagePath: "advantage.ts#perTurn" })
      const group = Samples.guideGroup([{ turn_credit: [0.5, 1.5] }, { turn_credit: [-1, 2] }])
      const rows = rowsOf(yield* credit.scoreGroup(group, "train"))
      assert.deepStrictEqual(rows.map((row) => row.advantage), [
        [0.5, 0.5, 0, 0, 1.5, 1.5],
        0.25,
        [-1, -1, 0, 0, 2, 2],
        0.25
      ])
    }))

  it.effect("credits an implicit export under the key \"null\"", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2, customAdvantagePath: "advantage.ts#implicitOutcome" })
      const group: Group.Group = {
        groupIndex: 0,
        sessions: [
          Samples.session("a", [Samples.sample({ metadata: { outcome: 0.3 } })]),
          Samples.session("b", [Samples.sample({ metadata: { outcome: -0.3 } })])
        ]
      }
      const rows = rowsOf(yield* credit.scoreGroup(group, "train"))
      assert.deepStrictEqual(rows.map((row) => row.advantage), [0.3, -0.3])
    }))

  it.effect("filters the whole Group when the hook returns null (sync) or nothing (async)", () =>
    Effect.gen(function*() {
      for (const path of ["advantage.mjs#filterAll", "advantage.mjs#filterUndefined"]) {
        const credit = yield* service({ ...multiContext, customAdvantagePath: path })
        assert.strictEqual(yield* credit.scoreGroup(Samples.guideGroup(), "train"), "filtered")
      }
    }))

  it.effect("is never called in eval", () =>
    Effect.gen(function*() {
      const credit = yield* service({ ...multiContext, customAdvantagePath: "advantage.ts#throws" })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.guideGroup(), "eval"))
      assert.deepStrictEqual(rows.map((row) => row.advantage), [null, null, null, null])
    }))

  it.effect("does not let a hook that mutates its input change the samples", () =>
    Effect.gen(function*() {
      const credit = yield* service({ ...multiContext, customAdvantagePath: "advantage.ts#mutatesInput" })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.guideGroup(), "train"))
      assert.strictEqual(rows[0]!.metadata["outcome"], 1.0)
    }))

  it.effect("fails with a message naming the session index and context for each broken result", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
        ["wrongLength", ["returned 1 mapping for 2 Sessions"]],
        ["missingName", [`session index 1 (Session second), context "searcher_0"`, "keys returned: \"main\""]],
        ["notANumber", [`session index 0 (Session first), context "searcher_0"`, "the value is NaN"]],
        ["infinite", [`session index 1 (Session second), context "main"`, "the value is Infinity"]],
        ["tooManyTurns", [`session index 0 (Session first), context "main"`, "the list has 8 values"]],
        ["wrongType", [`context "main"`, `the value is "1.0"`]],
        ["notAList", ["must return a list with one mapping per Session (2 here)"]],
        ["throws", ["the hook threw: advantage service unavailable"]]
      ]
      for (const [name, fragments] of cases) {
        const credit = yield* service({ ...multiContext, customAdvantagePath: `advantage.ts#${name}` })
        const error = yield* credit.scoreGroup(Samples.guideGroup(), "train").pipe(Effect.flip)
        assert.strictEqual(error._tag, "AdvantageError", name)
        assert.include(error.message, "--agentic-custom-advantage-path result for Group 3")
        for (const fragment of fragments) assert.include(error.message, fragment, name)
      }
      const rejecting = yield* service({ ...multiContext, customAdvantagePath: "advantage.mjs#rejects" })
      const rejected = yield* rejecting.scoreGroup(Samples.guideGroup(), "train").pipe(Effect.flip)
      assert.include(rejected.message, "the hook threw: remote judge timed out")
    }))
})

describe("export rules at scoring time", () => {
  it.effect("rejects several contexts per Session without a custom advantage hook", () =>
    Effect.gen(function*() {
      const credit = yield* service({ ...multiContext })
      const error = yield* credit.scoreGroup(Samples.guideGroup(), "train").pipe(Effect.flip)
      assert.strictEqual(error._tag, "CreditConfigError")
      assert.include(error.message, "requires --agentic-custom-advantage-path")
    }))

  it.effect("rejects several contexts per Session without dynamic batching", () =>
    Effect.gen(function*() {
      const credit = yield* service({
        nSamplesPerPrompt: 2,
        customAdvantagePath: "advantage.ts#outcomeTimesUsefulness"
      })
      const error = yield* credit.scoreGroup(Samples.guideGroup(), "train").pipe(Effect.flip)
      assert.include(error.message, "requires --use-dynamic-batch-size")
    }))
})

describe("standard reward and GRPO", () => {
  it.effect("normalizes exported rewards per Group with GRPO", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 3 })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([3, 1, 2]), "train"))
      const scale = 1 + 1e-6 // sample std of [3, 1, 2] is 1
      assert.deepStrictEqual(rows.map((row) => row.advantage), [1 / scale, -1 / scale, 0])
      assert.deepStrictEqual(rows.map((row) => row.reward), [3, 1, 2])
    }))

  it.effect("reads object rewards through --reward-key", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2, rewardKey: "acc", disableGrpoStdNormalization: true })
      const rows = rowsOf(
        yield* credit.scoreGroup(Samples.singleContextGroup([{ acc: 1, len: 3 }, { acc: 0, len: 5 }]), "train")
      )
      assert.deepStrictEqual(rows.map((row) => row.advantage), [0.5, -0.5])
    }))

  it.effect("fails when the --reward-key is missing, naming the key and the keys present", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2, rewardKey: "score" })
      const error = yield* credit.scoreGroup(Samples.singleContextGroup([{ acc: 1 }, { acc: 0 }]), "train").pipe(
        Effect.flip
      )
      assert.strictEqual(error._tag, "RewardError")
      assert.include(error.message, `reward of Session g0s0, context null (implicit export)`)
      assert.include(error.message, `--reward-key "score" is not in the reward object (keys present: acc)`)
    }))

  it.effect("fails when a context has no reward and no custom RM is configured", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2 })
      const error = yield* credit.scoreGroup(Samples.singleContextGroup([1, null]), "train").pipe(Effect.flip)
      assert.include(error.message, "Session g0s1")
      assert.include(error.message, "has no reward; write reward in the agent output, or configure --custom-rm-path")
    }))

  it.effect("fails on a Group whose size is not n_samples_per_prompt", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 4 })
      const error = yield* credit.scoreGroup(Samples.singleContextGroup([1, 0]), "train").pipe(Effect.flip)
      assert.strictEqual(error._tag, "NormalizationError")
      assert.include(error.message, "Group 0 has 2 samples, expected --n-samples-per-prompt 4")
    }))

  it.effect("runs the custom RM only where the reward is missing (sync .ts hook, config passed)", () =>
    Effect.gen(function*() {
      const credit = yield* service(
        { nSamplesPerPrompt: 2, customRmPath: "rm.ts#byMetadata", disableRewardsNormalization: true },
        { rmConfig: { bonus: 0.5 } }
      )
      const group: Group.Group = {
        groupIndex: 0,
        sessions: [
          Samples.session("a", [Samples.sample({ reward: 0.1, metadata: { score: 7 } })]),
          Samples.session("b", [Samples.sample({ reward: null, metadata: { score: 2 } })])
        ]
      }
      const rows = rowsOf(yield* credit.scoreGroup(group, "train"))
      assert.deepStrictEqual(rows.map((row) => row.reward), [0.1, 2.5])
      assert.deepStrictEqual(rows.map((row) => row.advantage), [0.1, 2.5])
    }))

  it.effect("awaits an async .mjs custom RM", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2, customRmPath: "rm.mjs", disableGrpoStdNormalization: true })
      const group = Samples.singleContextGroup([null, null])
      const scored: Group.Group = {
        ...group,
        sessions: group.sessions.map((s, i) => ({
          ...s,
          exports: s.exports.map((row) => ({ ...row, metadata: { score: i } }))
        }))
      }
      const rows = rowsOf(yield* credit.scoreGroup(scored, "train"))
      assert.deepStrictEqual(rows.map((row) => row.reward), [0, 10])
      assert.deepStrictEqual(rows.map((row) => row.advantage), [-5, 5])
    }))

  it.effect("keeps an RM's reward object and reads its primary value by --reward-key", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 1, customRmPath: "rm.ts#objectReward", rewardKey: "acc" })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([null]), "train"))
      assert.deepStrictEqual(rows[0]!.reward, { acc: 0, length: 3 })
      assert.strictEqual(rows[0]!.advantage, 0)
    }))

  it.effect("rejects what an RM returns when it is not a reward, naming the row", () =>
    Effect.gen(function*() {
      for (
        const [path, fragment] of [
          ["rm.ts#returnsNothing", "the custom RM returned null"],
          ["rm.ts#returnsText", `the custom RM returned "good"`],
          ["rm.mjs#rejects", "the hook threw: judge unreachable"]
        ] as const
      ) {
        const credit = yield* service({ nSamplesPerPrompt: 1, customRmPath: path })
        const error = yield* credit.scoreGroup(Samples.singleContextGroup([null]), "train").pipe(Effect.flip)
        assert.strictEqual(error._tag, "RewardError", path)
        assert.include(error.message, "reward of Session g0s0, context null (implicit export): --custom-rm-path:")
        assert.include(error.message, fragment, path)
      }
    }))

  it.effect("scores every exported row with a Group RM, overwriting exported rewards", () =>
    Effect.gen(function*() {
      const credit = yield* service({
        nSamplesPerPrompt: 3,
        customRmPath: "rm.ts#position",
        groupRm: true,
        disableRewardsNormalization: true
      })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([1, null, 1]), "train"))
      assert.deepStrictEqual(rows.map((row) => row.reward), [0, 1, 2])
    }))

  it.effect("lets a reviewed async Group RM write rewards while custom advantage gives the credit", () =>
    Effect.gen(function*() {
      const credit = yield* service({
        ...multiContext,
        customRmPath: "rm.mjs#firstWins",
        groupRm: true,
        customAdvantagePath: "advantage.ts#outcomeTimesUsefulness"
      })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.guideGroup(), "train"))
      assert.deepStrictEqual(summary(rows), [
        ["first", "main", 1, 1.0],
        ["first", "searcher_0", 0, 0.6],
        ["second", "main", 0, 0.0],
        ["second", "searcher_0", 0, 0.0]
      ])
    }))

  it.effect("rejects a Group RM result of the wrong length", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2, customRmPath: "rm.mjs#oneShort", groupRm: true })
      const error = yield* credit.scoreGroup(Samples.singleContextGroup([null, null], 5), "train").pipe(Effect.flip)
      assert.strictEqual(error._tag, "GroupRewardError")
      assert.include(error.message, "--custom-rm-path (--group-rm) for Group 5: the Group RM returned 1 rewards for 2")
    }))

  it.effect("skips the ordinary RM in training when custom advantage gives the credit, but runs it in eval", () =>
    Effect.gen(function*() {
      const credit = yield* service({
        ...multiContext,
        customRmPath: "rm.ts#byMetadata",
        customAdvantagePath: "advantage.ts#outcomeTimesUsefulness"
      })
      const train = rowsOf(yield* credit.scoreGroup(Samples.guideGroup(), "train"))
      assert.deepStrictEqual(train.map((row) => row.reward), [1.0, null, 0.0, null])
      const evaluated = rowsOf(yield* credit.scoreGroup(Samples.guideGroup(), "eval"))
      assert.deepStrictEqual(evaluated.map((row) => row.reward), [1.0, 0, 0.0, 0])
      assert.deepStrictEqual(evaluated.map((row) => row.advantage), [null, null, null, null])
    }))
})

describe("dynamic sampling filter (--dynamic-sampling-filter-path)", () => {
  it.effect("filters a training Group the hook rejects and counts the reason in the step's metrics", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2, dynamicSamplingFilterPath: "filter.mjs#rewardsDiffer" })
      assert.strictEqual(yield* credit.scoreGroup(Samples.singleContextGroup([1, 1]), "train"), "filtered")
      assert.strictEqual(yield* credit.scoreGroup(Samples.singleContextGroup([0, 0]), "train"), "filtered")
      const kept = rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([1, 0]), "train"))
      assert.deepStrictEqual(kept.map((row) => row.reward), [1, 0])
      const step = yield* credit.finishStep(kept, "train")
      assert.strictEqual(step.metrics["rollout/dynamic_filter/drop_zero_std"], 2)
      // The count is per step.
      const next = yield* credit.finishStep(kept, "train")
      assert.notProperty(next.metrics, "rollout/dynamic_filter/drop_zero_std")
    }))

  it.effect("takes a boolean verdict, and never filters Eval", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 1, dynamicSamplingFilterPath: "filter.mjs#severalRows" })
      assert.strictEqual(yield* credit.scoreGroup(Samples.singleContextGroup([1]), "train"), "filtered")
      assert.strictEqual(rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([1]), "eval")).length, 1)
      const step = yield* credit.finishStep([], "train")
      assert.isFalse(Object.keys(step.metrics).some((key) => key.startsWith("rollout/dynamic_filter/")))
    }))

  it.effect("fails the Group on a return value that is not a verdict, naming the flag", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 2, dynamicSamplingFilterPath: "filter.mjs#notAVerdict" })
      const error = yield* credit.scoreGroup(Samples.singleContextGroup([1, 0]), "train").pipe(Effect.flip)
      assert.strictEqual(error._tag, "FilterError")
      assert.include(
        error.message,
        `--dynamic-sampling-filter-path for Group 0: the filter must return true, false or { keep: boolean, reason?: string }, got "keep"`
      )
    }))

  it.effect("refuses a Python dotted path at startup with the path.ts#export form", () =>
    Effect.gen(function*() {
      const error = yield* service({ dynamicSamplingFilterPath: "my_pkg.filters.check" }).pipe(Effect.flip)
      assert.strictEqual(error._tag, "HookSpecError")
      assert.include(error.message, "e.g. my_pkg/filters.ts#check")
    }))
})

describe("startup", () => {
  it.effect("fails when a hook module has no such export", () =>
    Effect.gen(function*() {
      const error = yield* service({ customAdvantagePath: "advantage.mjs#notAFunction" }).pipe(Effect.flip)
      assert.strictEqual(error._tag, "HookLoadError")
      assert.include(error.message, "--agentic-custom-advantage-path")
      const missing = yield* service({ customRmPath: "rm.ts#nope" }).pipe(Effect.flip)
      assert.include(missing.message, `export "nope" is missing`)
    }))

  it.effect("requires --max-tokens-per-gpu with --use-dynamic-batch-size", () =>
    Effect.gen(function*() {
      const error = yield* service({ useDynamicBatchSize: true }).pipe(Effect.flip)
      assert.strictEqual(error._tag, "CreditConfigError")
      assert.include(error.message, "--max-tokens-per-gpu is required with --use-dynamic-batch-size")
    }))

  it.effect("requires --custom-rm-path with --group-rm, and a positive --n-samples-per-prompt", () =>
    Effect.gen(function*() {
      assert.include(
        (yield* service({ groupRm: true }).pipe(Effect.flip)).message,
        "--group-rm requires --custom-rm-path"
      )
      assert.include(
        (yield* service({ nSamplesPerPrompt: 0 }).pipe(Effect.flip)).message,
        "--n-samples-per-prompt must be a positive integer"
      )
    }))

  it.effect("provides the service as a layer", () =>
    Effect.gen(function*() {
      const credit = yield* Credit.Credit
      assert.strictEqual(credit.options.nSamplesPerPrompt, 2)
    }).pipe(
      Effect.provide(Credit.Credit.layer({ ...CreditOptions.defaults, nSamplesPerPrompt: 2 }, { cwd: hooksDir }))
    ))

  it.effect("fails to build the layer on a bad option", () =>
    Effect.gen(function*() {
      const error = yield* Layer.build(Credit.Credit.layer({ ...CreditOptions.defaults, useDynamicBatchSize: true }))
        .pipe(
          Effect.flip
        )
      assert.strictEqual(error._tag, "CreditConfigError")
    }))
})

describe("finishing a step", () => {
  it.effect("whitens, reports metrics and packs micro-batches in training", () =>
    Effect.gen(function*() {
      const credit = yield* service({
        nSamplesPerPrompt: 2,
        normalizeAdvantages: true,
        logPassrate: true,
        useDynamicBatchSize: true,
        maxTokensPerGpu: 16
      })
      const first = rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([1, 0], 0), "train"))
      const second = rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([1, 1], 1), "train"))
      const step = yield* credit.finishStep([...first, ...second], "train")
      // GRPO gives ±1/(sqrt(0.5)+1e-6)·0.5 and 0, 0; each row has 3 loss-masked tokens.
      const raw = 0.5 / (Math.sqrt(0.5) + 1e-6)
      const mean = 0
      const variance = (3 * raw * raw * 2) / (12 - 1)
      const scale = Math.sqrt(variance + 1e-8)
      const expected = [(raw - mean) / scale, (-raw - mean) / scale, 0, 0]
      step.samples.forEach((row, i) => assert.closeTo(row.advantage as number, expected[i]!, 1e-12))
      assert.strictEqual(step.metrics["rollout/raw_reward"], 0.75)
      assert.strictEqual(step.metrics["rollout/passrate/pass@1"], 0.75)
      assert.strictEqual(step.metrics["rollout/passrate/pass@2"], 1)
      // Each row has 7 tokens: two fit in 16.
      assert.deepStrictEqual(step.microBatches, [{ indices: [0, 1], tokens: 14 }, { indices: [2, 3], tokens: 14 }])
    }))

  it.effect("fails the step when a sample exceeds --max-tokens-per-gpu", () =>
    Effect.gen(function*() {
      const credit = yield* service({ nSamplesPerPrompt: 1, useDynamicBatchSize: true, maxTokensPerGpu: 5 })
      const rows = rowsOf(yield* credit.scoreGroup(Samples.singleContextGroup([1]), "train"))
      const error = yield* credit.finishStep(rows, "train").pipe(Effect.flip)
      assert.strictEqual(error._tag, "BatchingError")
      assert.include(error.message, "has 7 tokens, more than --max-tokens-per-gpu 5")
    }))

  it.effect("in eval, neither whitens nor packs, and reads rewards by --eval-reward-key", () =>
    Effect.gen(function*() {
      const credit = yield* service({
        nSamplesPerPrompt: 2,
        rewardKey: "train_score",
        evalRewardKey: "acc",
        normalizeAdvantages: true,
        useDynamicBatchSize: true,
        maxTokensPerGpu: 5,
        logPassrate: true
      })
      const rows = rowsOf(
        yield* credit.scoreGroup(Samples.singleContextGroup([{ acc: 1 }, { acc: 0 }, { acc: 1 }, { acc: 1 }]), "eval")
      )
      const step = yield* credit.finishStep(rows, "eval", 4)
      assert.deepStrictEqual(step.samples, rows)
      assert.isNull(step.microBatches)
      assert.strictEqual(step.metrics["rollout/raw_reward"], 0.75)
      assert.strictEqual(step.metrics["rollout/passrate/pass@4"], 1)
    }))
})
