/**
 * A bad output path costs nothing (docs/outputs.md "Before the first step"): with the real command line and real agent
 * processes, an `--output-dir` or `--save-debug-rollout-data` that cannot be created or written fails at startup,
 * naming the flag and the path, before any agent starts (the agent would record its start in a directory); `/proc/nope`
 * fails at once instead of spinning. The same holds for `check` and `serve`. A write that fails mid-run keeps the
 * step's samples in a fallback file and stops the run with an error naming the path, the fallback and the fix.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { TrainingSample } from "../../src/forest/TrainingSample.ts"
import { awaitAgents } from "../support/agentProcesses.ts"
import { startCli } from "../support/cliProcess.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures", "rollout")

const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "relax-outputs-"))

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

const run = (args: ReadonlyArray<string>) => Effect.scoped(Effect.flatMap(startCli(args), (cli) => cli.ended))

describe("a bad output path fails at startup, before any agent starts", () => {
  it.live("rollout --output-dir under a file, and --save-debug-rollout-data under a file", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const pids = Path.join(dir, "pids")
      Fs.mkdirSync(pids)
      const file = aFile(dir)
      const ended = yield* run(["rollout", ...hangingAgent(pids), "--output-dir", Path.join(file, "out")])
      assert.strictEqual(ended.code, 1, ended.stdout + ended.stderr)
      assert.include(ended.stderr, `--output-dir ${Path.join(file, "out")}: cannot create the directory: a part of the path is a file`)
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
      assert.include(debug.stderr, `--save-debug-rollout-data ${Path.join(file, "dumps")}: cannot create the directory`)
      // No agent ever started.
      assert.deepStrictEqual(Fs.readdirSync(pids), [])
      Fs.rmSync(dir, { recursive: true, force: true })
    }), { timeout: 90_000 })

  it.live("rollout --output-dir /proc/nope fails at once (no recursive mkdir loop)", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const ended = yield* run(["rollout", ...hangingAgent(dir), "--output-dir", "/proc/nope/out"])
      assert.strictEqual(ended.code, 1, ended.stdout + ended.stderr)
      assert.include(ended.stderr, "--output-dir /proc/nope/out: cannot create the directory: the file system refuses new entries there")
      assert.deepStrictEqual(Fs.readdirSync(dir), [])
      Fs.rmSync(dir, { recursive: true, force: true })
    }), { timeout: 60_000 })

  it.live("check and serve refuse the same paths before starting an agent or listening", () =>
    Effect.gen(function*() {
      const dir = tempDir()
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
      Fs.rmSync(dir, { recursive: true, force: true })
    }), { timeout: 90_000 })
})
