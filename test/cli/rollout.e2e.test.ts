import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as Example from "../support/example.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Example.root
const example = Example.dir
const node = process.execPath

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Run the real command line (`node src/cli.ts ...`) to its end. */
const cli = (args: ReadonlyArray<string>) =>
  Effect.callback<Ran>((resume) => {
    const child = spawn(node, [Path.join(root, "src", "cli.ts"), ...args], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => {
      child.kill("SIGTERM")
    })
  })

const lines = (path: string): Array<string> =>
  Fs.readFileSync(path, "utf8").split("\n").filter((line) => line.trim().length > 0)

const decodeSample = Schema.decodeUnknownSync(Schema.fromJsonString(TrainingSample.TrainingSample))
const MetricsLine = Schema.Struct({ rollout_id: Schema.Int, metrics: Schema.Record(Schema.String, Schema.Number) })
const decodeMetrics = Schema.decodeUnknownSync(Schema.fromJsonString(MetricsLine))
const ScoreReward = Schema.Struct({ score: Schema.Number })

describe("relax-agentic rollout (end to end)", () => {
  it.live(
    "runs one step of real agent processes and writes samples, metrics and the accounting_end line",
    () =>
      Effect.gen(function*() {
        const out = yield* TempDir.scoped("cli-rollout-")
        const ran = yield* cli([
          "rollout",
          "--use-agentic-rollout",
          ...Example.flags({ rolloutBatchSize: 2, nSamplesPerPrompt: 2 }),
          "--label-key",
          "label",
          ...Example.oneStepInto(out),
          // Below the 4 required slots: the rollout warns (as `check` does) and still runs.
          "--agent-max-slots",
          "1"
        ])
        assert.strictEqual(ran.code, 0, `${ran.stdout}\n${ran.stderr}`)
        assert.match(ran.stderr, /WARNING --agent-max-slots 1 is below the required 4 external agent slots/)
        assert.match(ran.stdout, /AGENTIC ROLLOUT event=accounting_start rollout=0 /)
        assert.match(ran.stdout, /AGENTIC ROLLOUT event=accounting_end rollout=0 groups=2 rows=4 /)
        assert.include(ran.stdout, out)

        // Every line is a training sample with the field names trainers rely on (decoding checks the shape).
        const samples = lines(Path.join(out, "rollout_0.jsonl")).map((line) => decodeSample(line))
        assert.strictEqual(samples.length, 4)
        for (const sample of samples) {
          assert.strictEqual(sample.rollout_id, 0)
          assert.strictEqual(sample.export_name, null)
          assert.strictEqual(sample.loss_mask.length, sample.response_length)
          assert.strictEqual(sample.rollout_log_probs.length, sample.response_length)
          assert.isBelow(sample.response_length, sample.tokens.length)
          // Two turns (calculator call, then the answer) with the tool result between them as an observation.
          assert.lengthOf(sample.turn_spans, 2)
          assert.include(sample.loss_mask, 0)
          assert.include(sample.loss_mask, 1)
          sample.loss_mask.forEach((m, i) => {
            if (m === 0) assert.strictEqual(sample.rollout_log_probs[i], 0, `observation token ${i}`)
          })
          for (const [start, end] of sample.turn_spans) {
            assert.deepStrictEqual(sample.loss_mask.slice(start, end), new Array(end - start).fill(1))
          }
          assert.typeOf(sample.advantage, "number")
          assert.oneOf(Schema.decodeUnknownSync(ScoreReward)(sample.reward).score, [0, 1])
          assert.strictEqual(sample.status, "completed")
        }
        // GRPO: the advantages of each Group sum to zero.
        const byGroup = new Map<number, number>()
        for (const sample of samples) {
          byGroup.set(sample.group_index, (byGroup.get(sample.group_index) ?? 0) + Number(sample.advantage))
        }
        for (const sum of byGroup.values()) assert.closeTo(sum, 0, 1e-9)

        const metrics = lines(Path.join(out, "metrics.jsonl")).map((line) => decodeMetrics(line))
        assert.strictEqual(metrics.length, 1)
        assert.strictEqual(metrics[0]!.rollout_id, 0)
        assert.typeOf(metrics[0]!.metrics["rollout/raw_reward"], "number")
        assert.isTrue(Fs.existsSync(Path.join(out, "debug_0.jsonl")))
      }),
    120_000
  )

  it.live(
    "stops an agent that fails on every Group after --agentic-max-consecutive-drops drops, exit code 1",
    () =>
      Effect.gen(function*() {
        const out = yield* TempDir.scoped("cli-drops-")
        const ran = yield* cli([
          "rollout",
          "--prompt-data",
          Path.join(example, "data", "train.jsonl"),
          "--rollout-batch-size",
          "1",
          "--agent-cwd",
          example,
          "--agent-command",
          "echo 'ImportError: no module named harness' >&2; exit 3",
          "--agentic-max-consecutive-drops",
          "2",
          "--output-dir",
          out
        ])
        assert.strictEqual(ran.code, 1, `${ran.stdout}\n${ran.stderr}`)
        assert.strictEqual(ran.stdout.split("\n").filter((l) => l === "AGENTIC Dropped 1 group").length, 2)
        assert.include(ran.stderr, "2 Groups were dropped in a row (--agentic-max-consecutive-drops 2)")
        assert.include(ran.stderr, "error_type=AgentExecutionError")
        assert.include(ran.stderr, "| Managed command agent exited with code 3.")
        assert.include(ran.stderr, "| ImportError: no module named harness")
        assert.include(ran.stderr, "relax-agentic check")
        // The step never finished: no sample or metric file was written; the failed Sessions' logs were kept.
        assert.deepStrictEqual(Fs.readdirSync(out), ["logs"])
        const logs = Fs.readdirSync(Path.join(out, "logs"))
        assert.strictEqual(logs.length, 2)
        for (const log of logs) {
          assert.match(log, /^[0-9a-f]{32}\.log$/)
          assert.strictEqual(
            Fs.readFileSync(Path.join(out, "logs", log), "utf8"),
            "ImportError: no module named harness\n"
          )
          assert.include(ran.stderr + ran.stdout, `(full log: ${Path.join(out, "logs", log)})`)
        }
      }),
    60_000
  )

  it.live(
    "loads a TypeScript hook Node cannot strip (an enum, an extensionless import) through tsx",
    () =>
      Effect.gen(function*() {
        const dir = yield* TempDir.scoped("cli-hook-")
        // An enum and a parameter property need a transform; `./answer` has no extension: Node alone refuses both.
        Fs.writeFileSync(
          Path.join(dir, "answer.ts"),
          "export enum Verdict { Known = 1 }\nexport class Box { constructor(readonly text: string) {} }\n"
        )
        Fs.writeFileSync(
          Path.join(dir, "policy.ts"),
          `import { Box, Verdict } from "./answer"\n` +
            `import { policy as arithmetic } from ${JSON.stringify(Path.join(example, "policy.ts"))}\n` +
            "export const policy = (request: Parameters<typeof arithmetic>[0]): string =>\n" +
            "  new Box(Verdict.Known === 1 ? arithmetic(request) : \"\").text\n"
        )
        const out = Path.join(dir, "out")
        const flags = Example.flags({ rolloutBatchSize: 1, nSamplesPerPrompt: 2 })
        flags[flags.indexOf("--embedded-policy") + 1] = `${Path.join(dir, "policy.ts")}#policy`
        const ran = yield* cli(["rollout", ...flags, "--num-rollout", "1", "--output-dir", out])
        assert.strictEqual(ran.code, 0, `${ran.stdout}\n${ran.stderr}`)
        const samples = lines(Path.join(out, "rollout_0.jsonl")).map((line) => decodeSample(line))
        assert.strictEqual(samples.length, 2)
        // The wrapped arithmetic policy answered: a calculator call, then the answer.
        for (const sample of samples) assert.lengthOf(sample.turn_spans, 2)
      }),
    120_000
  )

  it.live("exits with code 1 and a one-line error naming the flag", () =>
    Effect.gen(function*() {
      const ran = yield* cli([
        "rollout",
        "--prompt-data",
        "d.jsonl",
        "--rollout-batch-size",
        "2",
        "--over-sampling-batch-size",
        "1"
      ])
      assert.strictEqual(ran.code, 1)
      assert.include(ran.stderr, "--over-sampling-batch-size: 1 is below --rollout-batch-size 2")
    }))
})
