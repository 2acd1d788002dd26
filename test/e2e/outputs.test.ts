/**
 * A bad output path costs nothing (docs/outputs.md "Before the first step"): with the real command line and real agent
 * processes, an `--output-dir` or `--save-debug-rollout-data` that cannot be created or written fails at startup,
 * naming the flag and the path, before any agent starts (the agent would record its start in a directory); `/proc/nope`
 * fails at once instead of spinning. The same holds for `check` and `serve`. A debug dump that cannot be written
 * mid-run costs the trainer nothing: the step's samples still arrive over the RPC, the dump is kept in the fallback
 * file, and the next step fails with the error instead of running without its outputs (the `rollout` command's
 * mid-run failure: test/e2e/shutdown.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import { makeRpcClient, memorySink, resolveConfig, RolloutRpcServer, serveFromSettings } from "../../src/index.ts"
import * as CliProcess from "../support/cliProcess.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures", "rollout")

/** A regular file: nothing can be created under it (ENOTDIR). */
const aFile = (dir: string) => {
  const file = Path.join(dir, "afile")
  Fs.writeFileSync(file, "x")
  return file
}

/** The hanging agent, which records its start in `pids` (it never ends, so a started agent would be seen). */
const hangingAgent = (pids: string) => [
  "--prompt-data",
  Path.join(fixtures, "train.jsonl"),
  "--agent-command",
  "bash hang.sh",
  "--agent-cwd",
  fixtures,
  "--agent-env",
  `PIDS_DIR=${pids}`,
  "--n-samples-per-prompt",
  "2",
  "--rollout-batch-size",
  "2"
]

const run = (args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.flatMap(CliProcess.startCli(args), (cli) => cli.ended))

describe("a bad output path fails at startup, before any agent starts", () => {
  it.live(
    "rollout --output-dir under a file, and --save-debug-rollout-data under a file",
    () =>
      Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-outputs-")
        const pids = Path.join(dir, "pids")
        Fs.mkdirSync(pids)
        const file = aFile(dir)
        const ended = yield* run(["rollout", ...hangingAgent(pids), "--output-dir", Path.join(file, "out")])
        assert.strictEqual(ended.code, 1, ended.stdout + ended.stderr)
        assert.include(
          ended.stderr,
          `--output-dir ${Path.join(file, "out")}: cannot create the directory: a part of the path is a file`
        )
        assert.notInclude(ended.stdout, "event=accounting_start")
        const debug = yield* run([
          "rollout",
          ...hangingAgent(pids),
          "--output-dir",
          Path.join(dir, "out"),
          "--save-debug-rollout-data",
          Path.join(file, "dumps", "debug_{rollout_id}.jsonl")
        ])
        assert.strictEqual(debug.code, 1, debug.stdout + debug.stderr)
        assert.include(
          debug.stderr,
          `--save-debug-rollout-data ${Path.join(file, "dumps")}: cannot create the directory`
        )
        // No agent ever started.
        assert.deepStrictEqual(Fs.readdirSync(pids), [])
      }),
    { timeout: 90_000 }
  )

  it.live("rollout --output-dir /proc/nope fails at once (no recursive mkdir loop)", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("relax-outputs-")
      const ended = yield* run(["rollout", ...hangingAgent(dir), "--output-dir", "/proc/nope/out"])
      assert.strictEqual(ended.code, 1, ended.stdout + ended.stderr)
      assert.include(
        ended.stderr,
        "--output-dir /proc/nope/out: cannot create the directory: the file system refuses new entries there"
      )
      assert.deepStrictEqual(Fs.readdirSync(dir), [])
    }), { timeout: 60_000 })

  it.live("check and serve refuse the same paths before starting an agent or listening", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("relax-outputs-")
      const file = aFile(dir)
      const checked = yield* run(["check", ...hangingAgent(dir), "--output-dir", Path.join(file, "out")])
      assert.strictEqual(checked.code, 1, checked.stdout + checked.stderr)
      assert.include(checked.stderr, `--output-dir ${Path.join(file, "out")}: cannot create the directory`)
      assert.notInclude(checked.stdout, "Launch checks")
      const served = yield* run([
        "serve",
        ...hangingAgent(dir),
        "--rpc-port",
        "0",
        "--save-debug-rollout-data",
        Path.join(file, "debug_{rollout_id}.jsonl")
      ])
      assert.strictEqual(served.code, 1, served.stdout + served.stderr)
      assert.include(served.stderr, `--save-debug-rollout-data ${file}: cannot create the directory`)
      assert.notInclude(served.stdout, "listening on")
      assert.deepStrictEqual(Fs.readdirSync(dir), ["afile"])
    }), { timeout: 90_000 })
})

describe("a debug dump that fails mid-run", () => {
  it.live(
    "still delivers the step's samples to the trainer over the RPC; the next Step fails naming the path",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-outputs-")
        const dumps = Path.join(dir, "dumps")
        const settings = yield* resolveConfig({
          promptData: Path.join(fixtures, "train.jsonl"),
          labelKey: "label",
          agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
          agentCwd: fixtures,
          agentTimeout: 60,
          embeddedPolicy: Path.join(root, "test", "fixtures", "trainer", "policy.mjs"),
          nSamplesPerPrompt: 2,
          rolloutBatchSize: 1,
          rolloutMaxResponseLen: 32,
          saveDebugRolloutData: Path.join(dumps, "{rollout_id}", "debug.jsonl")
        })
        const services = yield* Layer.build(
          serveFromSettings(settings, { port: 0 }, {
            telemetry: memorySink(),
            embedded: EmbeddedEngine.EmbeddedEngine.instant
          })
        )
        const client = yield* makeRpcClient({ url: Context.get(services, RolloutRpcServer).url })
        const first = yield* client.Step({ rolloutId: 0 })
        assert.lengthOf(first.samples, 2)
        assert.isTrue(Fs.existsSync(Path.join(dumps, "0", "debug.jsonl")))
        // Step 1's dump directory cannot be created: a file stands where it would go.
        Fs.writeFileSync(Path.join(dumps, "1"), "in the way")
        const second = yield* client.Step({ rolloutId: 1 })
        assert.lengthOf(second.samples, 2)
        const third = yield* Effect.flip(client.Step({ rolloutId: 2 }))
        const text = String(third.message)
        assert.include(text, `cannot write ${Path.join(dumps, "1", "debug.jsonl")}: a part of the path is a file`)
        const fallback = /saved to (\S+debug\.jsonl) instead/.exec(text)?.[1]
        assert.isDefined(fallback, text)
        assert.strictEqual(Fs.readFileSync(fallback!, "utf8").trim().split("\n").length, 2)
        Fs.rmSync(Path.dirname(fallback!), { recursive: true, force: true })
      })),
    { timeout: 120_000 }
  )
})
