/**
 * Agents share their owner's fate: when `relax-agentic rollout` or `serve` is killed by SIGKILL (what the OOM killer
 * does), so that no shutdown code of it runs, its agents mid-tool and the children they spawned are gone within a
 * second (the owner link, layers/session/OwnerLink.ts; docs/runtime.md "Fate sharing").
 *
 * Each agent (test/fixtures/rollout/mid-tool.mjs) sends its first model request, then runs a never-ending tool with a
 * grandchild, and records the three pids; the test waits for every record (file-system events), SIGKILLs the command,
 * and polls the pids for a bounded time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as AgentProcesses from "../support/agentProcesses.ts"
import * as CliProcess from "../support/cliProcess.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures", "rollout")
/** Poll bound after the SIGKILL: the guarantee is one second; the slack absorbs a loaded test machine. */
const boundMs = 3_000

/** 2 Groups × 2 Sessions of the mid-tool agent. */
const sessions = 4

const agentArgs = (pidsDir: string) => [
  "--prompt-data",
  Path.join(fixtures, "train.jsonl"),
  "--label-key",
  "label",
  "--agent-command",
  `${JSON.stringify(process.execPath)} mid-tool.mjs`,
  "--agent-cwd",
  fixtures,
  "--agent-env",
  `PIDS_DIR=${pidsDir}`,
  "--n-samples-per-prompt",
  "2",
  "--rollout-batch-size",
  "2",
  "--rollout-max-response-len",
  "8"
]

describe("agents share their owner's fate (SIGKILL of the command)", () => {
  it.live(
    "`rollout` killed with SIGKILL mid-step: no agent, tool or tool child is alive afterwards",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-fate-")
        const agents = Path.join(dir, "pids")
        Fs.mkdirSync(agents)
        const cli = yield* CliProcess.startCli([
          "rollout",
          ...agentArgs(agents),
          "--num-rollout",
          "1",
          "--output-dir",
          Path.join(dir, "out")
        ])
        yield* AgentProcesses.awaitAgents(agents, sessions)
        const pids = AgentProcesses.recordedPids(agents)
        assert.lengthOf(pids, 3 * sessions)
        assert.isTrue(pids.every(AgentProcesses.running), "every agent and its tool processes run before the SIGKILL")
        cli.child.kill("SIGKILL")
        const ended = yield* cli.ended
        assert.strictEqual(ended.signal, "SIGKILL")
        assert.deepStrictEqual(yield* CliProcess.awaitGone(pids, AgentProcesses.running, boundMs), [], cli.output())
      })),
    { timeout: 90_000 }
  )

  it.live(
    "`serve` killed with SIGKILL during a Step: no agent, tool or tool child is alive afterwards",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-fate-")
        const cli = yield* CliProcess.startCli(["serve", ...agentArgs(dir), "--rpc-port", "0"])
        const url = (yield* cli.waitFor(/listening on (http:\/\/\S+\/rpc)/))[1]!
        // The step never finishes (the tools never end); the request is cut off by the kill.
        yield* Effect.promise(() =>
          fetch(url, {
            method: "POST",
            body: `${
              JSON.stringify({ _tag: "Request", id: "1", tag: "Step", payload: { rolloutId: 0 }, headers: [] })
            }\n`
          }).then((response) => response.text()).catch((error: unknown) => String(error))
        ).pipe(Effect.forkScoped)
        yield* AgentProcesses.awaitAgents(dir, sessions)
        const pids = AgentProcesses.recordedPids(dir)
        assert.lengthOf(pids, 3 * sessions)
        assert.isTrue(pids.every(AgentProcesses.running), "every agent and its tool processes run before the SIGKILL")
        cli.child.kill("SIGKILL")
        assert.strictEqual((yield* cli.ended).signal, "SIGKILL")
        assert.deepStrictEqual(yield* CliProcess.awaitGone(pids, AgentProcesses.running, boundMs), [], cli.output())
      })),
    { timeout: 90_000 }
  )
})
