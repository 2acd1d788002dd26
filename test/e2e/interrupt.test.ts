/**
 * Nothing keeps running after a rollout ends or is interrupted: real agent processes (each with a background child of
 * its own) are all gone once the rollout's scope closes, and once `relax-agentic rollout` exits on Ctrl-C (SIGINT).
 *
 * The agents never send a request, so the step cannot finish on its own; the tests wait for every agent to have
 * recorded its pids (file-system events, no timers) and then interrupt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Scope } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as AgentProcesses from "../support/agentProcesses.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures", "rollout")

/** 2 Groups × 2 Sessions of the hanging agent. */
const sessions = 4

describe("interrupting a rollout leaves no agent process running", () => {
  it.live("closing the rollout's scope mid-step kills every agent and its children", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("relax-interrupt-")
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        makeRollout({
          promptData: Path.join(fixtures, "train.jsonl"),
          labelKey: "label",
          agentCommand: "bash hang.sh",
          agentCwd: fixtures,
          agentEnv: [`PIDS_DIR=${dir}`],
          nSamplesPerPrompt: 2,
          rolloutBatchSize: 2
        }, { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant }),
        scope
      )
      const step = yield* Effect.gen(function*() {
        const rollout = yield* Rollout
        return yield* rollout.runStep(0)
      }).pipe(Effect.provide(context), Effect.forkDetach)
      yield* AgentProcesses.awaitAgents(dir, sessions)
      const pids = AgentProcesses.recordedPids(dir)
      assert.lengthOf(pids, 2 * sessions)
      assert.isTrue(pids.every(AgentProcesses.running), "every agent and its child run before the interruption")

      yield* Fiber.interrupt(step)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(pids.filter(AgentProcesses.running), [])
    }), { timeout: 60_000 })

  it.live(
    "Ctrl-C (SIGINT) to `relax-agentic rollout` ends it, and no agent or agent child outlives it",
    () =>
      Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-interrupt-")
        const out = Path.join(dir, "out")
        const agentsDir = Path.join(dir, "agents")
        Fs.mkdirSync(agentsDir)
        const child = spawn(process.execPath, [
          Path.join(root, "src", "cli.ts"),
          "rollout",
          "--prompt-data",
          Path.join(fixtures, "train.jsonl"),
          "--label-key",
          "label",
          "--rollout-batch-size",
          "2",
          "--n-samples-per-prompt",
          "2",
          "--num-rollout",
          "1",
          "--agent-cwd",
          fixtures,
          "--agent-command",
          "bash hang.sh",
          "--agent-env",
          `PIDS_DIR=${agentsDir}`,
          "--output-dir",
          out
        ], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
        let output = ""
        child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
        child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
        const exited = yield* Effect.callback<{ readonly code: number | null; readonly signal: string | null }>(
          (resume) => {
            child.on("close", (code, signal) => resume(Effect.succeed({ code, signal })))
            // If the test itself is interrupted, do not leave the CLI behind either.
            return Effect.sync(() => child.kill("SIGKILL"))
          }
        ).pipe(Effect.forkChild)

        yield* AgentProcesses.awaitAgents(agentsDir, sessions)
        const pids = AgentProcesses.recordedPids(agentsDir)
        assert.lengthOf(pids, 2 * sessions)
        assert.isTrue(pids.every(AgentProcesses.running), "every agent and its child run before Ctrl-C")
        assert.include(output, "AGENTIC ROLLOUT event=accounting_start rollout=0")

        child.kill("SIGINT")
        const exit = yield* Fiber.join(exited)
        // The CLI ends on its own (no SIGKILL needed), by the signal it got (as a shell expects of Ctrl-C), and its last
        // line says it did not complete the step.
        assert.strictEqual(exit.signal, "SIGINT", output)
        assert.notInclude(output, "event=accounting_end")
        assert.include(
          output,
          `Interrupted by SIGINT during step 0: step 0's samples were not written; nothing was written to ${out}`
        )
        assert.deepStrictEqual(pids.filter(AgentProcesses.running), [], output)
        // No half-written sample file: the step never completed, so there is none at all.
        assert.isFalse(Fs.existsSync(Path.join(out, "rollout_0.jsonl")))
      }),
    { timeout: 120_000 }
  )
})
