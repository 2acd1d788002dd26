/**
 * Shutdown always ends, and says what it left (docs/runtime.md "Shutdown"), with the real command line and real agent
 * processes: Ctrl-C with every agent's model request in flight ends with one line naming the interrupted step and what
 * was written, without "client disconnected" warnings; SIGTERM while a write hangs (a FIFO at the write's temporary
 * path: its `open` blocks until a reader comes, which never does) ends the process and keeps the step's samples in the
 * fallback file; a second Ctrl-C ends a shutdown that waits for agents deaf to SIGTERM at once; a write that fails
 * mid-run (the output directory replaced by a file) keeps the samples in the fallback file and stops the run.
 * Processes are observed through files they write (file-system events) and polled only for a bounded time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as AgentProcesses from "../support/agentProcesses.ts"
import * as CliProcess from "../support/cliProcess.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures", "rollout")
/** Poll bound for processes to be gone once the command ended. */
const boundMs = 3_000
/** 2 Groups × 2 Sessions. */
const sessions = 4

const common = [
  "--prompt-data",
  Path.join(fixtures, "train.jsonl"),
  "--label-key",
  "label",
  "--agent-cwd",
  fixtures,
  "--n-samples-per-prompt",
  "2",
  "--rollout-batch-size",
  "2",
  "--num-rollout",
  "1",
  "--rollout-max-response-len",
  "8"
]

const node = JSON.stringify(process.execPath)
const lastLine = (text: string) => text.trimEnd().split("\n").at(-1) ?? ""
const decodeSample = Schema.decodeUnknownSync(Schema.fromJsonString(TrainingSample.TrainingSample))
const samplesIn = (path: string) =>
  Fs.readFileSync(path, "utf8").split("\n").filter((line) => line.length > 0).map((line) => decodeSample(line))

/** The fallback file a salvaged output went to, as the command's output names it. */
const fallbackOf = (output: string, name: string): string => {
  const found = new RegExp(`saved to (\\S+/relax-agentic-unsaved-[^/\\s]+/${name.replace(".", "\\.")})`).exec(output)
  assert.isNotNull(found, output)
  return found![1]!
}

/** Wait (file-system events) until `dir` holds `count` files. */
const awaitFiles = AgentProcesses.awaitAgents

describe("shutdown", () => {
  it.live(
    "Ctrl-C with every model request in flight: one last line names the step and what was written, no 499 warnings",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-shutdown-")
        const pids = Path.join(dir, "pids")
        const calls = Path.join(dir, "calls")
        Fs.mkdirSync(pids)
        Fs.mkdirSync(calls)
        const out = Path.join(dir, "out")
        const cli = yield* CliProcess.startCli([
          "rollout",
          ...common,
          "--agent-command",
          `${node} mid-tool.mjs`,
          "--agent-env",
          `PIDS_DIR=${pids}`,
          "--embedded-policy",
          Path.join(fixtures, "stall-policy.mjs"),
          "--output-dir",
          out
        ], { STALL_DIR: calls })
        yield* awaitFiles(calls, sessions)
        cli.child.kill("SIGINT")
        const ended = yield* cli.ended
        assert.strictEqual(ended.signal, "SIGINT", cli.output())
        assert.include(ended.stderr, "relax-agentic: SIGINT received: stopping every agent and closing")
        assert.strictEqual(
          lastLine(ended.stdout),
          `Interrupted by SIGINT during step 0: step 0's samples were not written; nothing was written to ${out}`
        )
        assert.notInclude(cli.output(), "client disconnected")
        assert.deepStrictEqual(Fs.readdirSync(out), [])
      })),
    { timeout: 120_000 }
  )

  it.live(
    "SIGTERM while a write hangs ends the process; the step's samples are kept in the fallback file",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-shutdown-")
        const out = Path.join(dir, "out")
        Fs.mkdirSync(out)
        const cli = yield* CliProcess.startCli([
          "rollout",
          ...common,
          "--agent-command",
          `${node} agent.mjs`,
          "--embedded-policy",
          Path.join(root, "test", "fixtures", "trainer", "policy.mjs"),
          "--output-dir",
          out
        ])
        // The write of rollout_0.jsonl goes to `rollout_0.jsonl.tmp-<pid>` first: as a FIFO without a reader, its open
        // never returns, as on a hung mount.
        const fifo = Path.join(out, `rollout_0.jsonl.tmp-${cli.child.pid}`)
        execFileSync("mkfifo", [fifo])
        yield* cli.waitFor(/event=accounting_end rollout=0 /)
        cli.child.kill("SIGTERM")
        const ended = yield* cli.ended
        assert.strictEqual(ended.signal, "SIGTERM", cli.output())
        const line = lastLine(ended.stdout)
        assert.match(
          line,
          /^Interrupted by SIGTERM during step 0 while writing its outputs: step 0's samples were not written; /
        )
        assert.include(line, `abandoned unfinished write(s) of ${Path.join(out, "rollout_0.jsonl")}`)
        const fallback = fallbackOf(line, "rollout_0.jsonl")
        assert.lengthOf(samplesIn(fallback), sessions)
        assert.isFalse(Fs.existsSync(Path.join(out, "rollout_0.jsonl")))
        Fs.rmSync(Path.dirname(fallback), { recursive: true, force: true })
      })),
    { timeout: 120_000 }
  )

  it.live(
    "a second Ctrl-C ends a shutdown waiting for agents deaf to SIGTERM at once, and kills them",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-shutdown-")
        const pids = Path.join(dir, "pids")
        Fs.mkdirSync(pids)
        const cli = yield* CliProcess.startCli([
          "rollout",
          ...common,
          "--agent-command",
          "bash deaf.sh",
          "--agent-env",
          `PIDS_DIR=${pids}`,
          "--output-dir",
          Path.join(dir, "out")
        ])
        yield* AgentProcesses.awaitAgents(pids, sessions)
        const agents = AgentProcesses.recordedPids(pids)
        cli.child.kill("SIGINT")
        yield* cli.waitFor(/SIGINT received: stopping every agent/)
        // The agents ignore the SIGTERM of the first shutdown, which therefore waits out their grace period.
        cli.child.kill("SIGINT")
        const ended = yield* cli.ended
        assert.strictEqual(ended.signal, "SIGINT", cli.output())
        assert.include(
          ended.stderr,
          `relax-agentic: SIGINT received again: SIGKILLed ${sessions} agent process group(s); abandoned`
        )
        assert.match(
          lastLine(ended.stdout),
          /^Interrupted by SIGINT during step 0: step 0's samples were not written; nothing was written/
        )
        assert.deepStrictEqual(yield* CliProcess.awaitGone(agents, AgentProcesses.running, boundMs), [])
      })),
    { timeout: 120_000 }
  )

  it.live(
    "a write that fails mid-run keeps the step's samples in the fallback file and stops the run, naming the path",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-shutdown-")
        const pids = Path.join(dir, "pids")
        Fs.mkdirSync(pids)
        const out = Path.join(dir, "out")
        const gate = Path.join(dir, "gate")
        const cli = yield* CliProcess.startCli([
          "rollout",
          ...common,
          "--agent-command",
          `${node} gated.mjs`,
          "--agent-env",
          `PIDS_DIR=${pids}`,
          "--agent-env",
          `GATE=${gate}`,
          "--output-dir",
          out
        ])
        yield* AgentProcesses.awaitAgents(pids, sessions)
        // The output directory passed the startup check; now it is replaced by a file, then the agents finish.
        Fs.rmSync(out, { recursive: true, force: true })
        Fs.writeFileSync(out, "not a directory")
        Fs.writeFileSync(gate, "")
        const ended = yield* cli.ended
        assert.strictEqual(ended.code, 1, cli.output())
        assert.include(ended.stdout, "event=accounting_end rollout=0 groups=2 rows=4")
        assert.include(ended.stderr, `cannot write ${Path.join(out, "rollout_0.jsonl")}: a part of the path is a file`)
        assert.include(ended.stderr, "The rollout stopped; free space or fix the directory's permissions")
        const fallback = fallbackOf(ended.stderr, "rollout_0.jsonl")
        assert.lengthOf(samplesIn(fallback), sessions)
        assert.deepStrictEqual(AgentProcesses.recordedPids(pids).filter(AgentProcesses.running), [])
        Fs.rmSync(Path.dirname(fallback), { recursive: true, force: true })
      })),
    { timeout: 120_000 }
  )
})
