/**
 * `rescore` end to end (docs/debugging.md "Rescore"): a real run of the arithmetic example (`npm start`'s config, real
 * agents) re-scored with another reward function changes exactly the rewards that function gives differently, keeps
 * the recorded ones as `metadata.original_reward`, and gives the advantages a fresh rollout with that function (a
 * Group RM, which scores every row in a rollout too) gives on the same tokens; `--keep-agent-rewards` keeps the
 * agent's; a sample file without a field is an error naming it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import { runRescore } from "../../src/index.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as Rm from "../fixtures/replay/rm.ts"
import * as CliProcess from "../support/cliProcess.ts"
import * as Example from "../support/example.ts"
import * as TempDir from "../support/TempDir.ts"

const scratch = TempDir.forFile("relax-rescore-")

const cli = (args: ReadonlyArray<string>) => Effect.scoped(Effect.flatMap(CliProcess.startCli(args), (c) => c.ended))

const rmHook = (name: string) => `${Path.join(Example.root, "test", "fixtures", "replay", "rm.ts")}#${name}`

/** One step of the arithmetic example's config (2 Groups of 4) into `dir`, with `extra` flags. */
const rollout = (dir: string, extra: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const ended = yield* cli(Example.oneStep(dir, ["--rollout-batch-size", "2", ...extra]))
    assert.strictEqual(ended.code, 0, ended.stdout + ended.stderr)
  })

const samplesOf = (file: string): ReadonlyArray<TrainingSample.TrainingSample> =>
  Fs.readFileSync(file, "utf8").trim().split("\n").map((line) =>
    Schema.decodeUnknownSync(TrainingSample.TrainingSample)(JSON.parse(line))
  )

describe("rescore", () => {
  it.live(
    "another RM changes exactly its rewards, and gives a fresh rollout's advantages on the same tokens",
    () =>
      Effect.gen(function*() {
        const recorded = Path.join(scratch, "recorded")
        yield* rollout(recorded)
        const before = samplesOf(Path.join(recorded, "rollout_0.jsonl"))
        assert.strictEqual(before.length, 8)

        // One call per sample: every sample re-scored, the recorded reward kept beside it.
        const out = Path.join(scratch, "rescored")
        const printed = yield* cli([
          "rescore",
          recorded,
          "--custom-rm-path",
          rmHook("lengthRm"),
          "--reward-key",
          "score",
          "--output-dir",
          out
        ])
        assert.strictEqual(printed.code, 0, printed.stdout + printed.stderr)
        const after = samplesOf(Path.join(out, "rollout_0.jsonl"))
        assert.deepStrictEqual(after.map((s) => s.tokens), before.map((s) => s.tokens))
        after.forEach((sample, i) => {
          assert.deepStrictEqual(sample.reward, Rm.lengthRm(sample))
          assert.deepStrictEqual(sample.metadata["original_reward"], before[i]!.reward)
        })
        const summary = JSON.parse(Fs.readFileSync(Path.join(out, "rescore_summary.json"), "utf8"))
        const expectedChanged = before.flatMap((s) => {
          const was = Records.primaryReward(s, "score")
          const now = Rm.lengthRm(s).score
          return was === now ? [] : [{ sessionId: s.session_id, exportName: s.export_name, before: was, after: now }]
        })
        assert.deepStrictEqual(summary.steps[0].changedRewards, expectedChanged)
        assert.include(
          printed.stdout,
          `rescore rollout_0: 8 sample(s) in 2 Group(s); ${expectedChanged.length} reward(s) changed`
        )
        const metrics = JSON.parse(Fs.readFileSync(Path.join(out, "metrics.jsonl"), "utf8").trim())
        assert.strictEqual(metrics.rollout_id, 0)
        assert.strictEqual(
          metrics.metrics["rollout/raw_reward"],
          after.reduce((n, s) => n + Rm.lengthRm(s).score, 0) / 8
        )

        // A fresh rollout whose Group RM is the same function (a Group RM scores every row in a rollout too).
        const fresh = Path.join(scratch, "fresh")
        yield* rollout(fresh, ["--custom-rm-path", rmHook("groupLengthRm"), "--group-rm"])
        const freshSamples = samplesOf(Path.join(fresh, "rollout_0.jsonl"))
        assert.deepStrictEqual(freshSamples.map((s) => s.tokens), before.map((s) => s.tokens), "not the same tokens")
        const groupRescored = yield* Effect.promise(() =>
          runRescore(recorded, {
            customRmPath: rmHook("groupLengthRm"),
            groupRm: true,
            rewardKey: "score",
            outputDir: Path.join(scratch, "group")
          })
        )
        const regrouped = samplesOf(Path.join(groupRescored.outputDir, "rollout_0.jsonl"))
        assert.deepStrictEqual(regrouped.map((s) => s.advantage), freshSamples.map((s) => s.advantage))
        assert.deepStrictEqual(after.map((s) => s.advantage), freshSamples.map((s) => s.advantage))
        assert.deepStrictEqual(regrouped.map((s) => s.reward), freshSamples.map((s) => s.reward))

        // --keep-agent-rewards: the agent's rewards win, as in a rollout; nothing changes.
        const kept = yield* Effect.promise(() =>
          runRescore(recorded, {
            customRmPath: rmHook("lengthRm"),
            keepAgentRewards: true,
            rewardKey: "score",
            outputDir: Path.join(scratch, "kept")
          })
        )
        assert.deepStrictEqual(kept.steps[0]!.changedRewards, [])
        assert.deepStrictEqual(
          samplesOf(Path.join(kept.outputDir, "rollout_0.jsonl")).map((s) => s.advantage),
          before.map((s) => s.advantage)
        )
      }),
    { timeout: 300_000 }
  )

  it.live("a sample without a field is an error naming the file, the line and the field", () =>
    Effect.gen(function*() {
      const dir = Path.join(scratch, "missing")
      Fs.mkdirSync(dir)
      const sample = JSON.parse(
        Fs.readFileSync(Path.join(scratch, "recorded", "rollout_0.jsonl"), "utf8").split("\n")[0]!
      )
      delete sample.response_length
      Fs.writeFileSync(Path.join(dir, "rollout_0.jsonl"), JSON.stringify(sample) + "\n")
      const ended = yield* cli(["rescore", dir, "--custom-rm-path", rmHook("lengthRm")])
      assert.strictEqual(ended.code, 1)
      assert.include(ended.stderr, `${Path.join(dir, "rollout_0.jsonl")}:1: not a training sample:`)
      assert.include(ended.stderr, "response_length")
    }), { timeout: 120_000 })
})
