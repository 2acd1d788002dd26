/**
 * The real-process sample of the fault tests (the 1,000-Session run is simulated: test/sim/faults.test.ts): real agent
 * processes that crash, hang, ignore SIGTERM with a grandchild that ignores it too, write corrupt output, exit
 * without a request, or leave a grandchild behind after a clean run, next to normal ones, in one rollout step on the
 * embedded engine. The step completes with the normal Sessions' samples, and afterwards no agent process or agent
 * child is left running.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as ProcessGroup from "../../layers/session/ProcessGroup.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as TempDir from "../support/TempDir.ts"

const fixtures = Path.join(import.meta.dirname, "..", "fixtures", "rollout")

describe("faulty agent processes (real processes)", () => {
  it.live(
    "cost their Groups only: the step completes, and no agent or agent child outlives it",
    () =>
      Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-faults-")
        const sink = memorySink()
        const step = yield* Effect.gen(function*() {
          return yield* (yield* Rollout).runStep(0)
        }).pipe(
          Effect.provide(makeRollout({
            promptData: Path.join(fixtures, "faults.jsonl"),
            labelKey: "label",
            agentCommand: "bash faulty.sh",
            agentCwd: fixtures,
            agentEnv: [`PIDS_DIR=${dir}`],
            agentTimeout: 30,
            nSamplesPerPrompt: 1,
            rolloutBatchSize: 2,
            // Over-sampling starts all seven rows at once; the two that are still running when the step has its two
            // samples (hang, ignore-term) are stopped then.
            overSamplingBatchSize: 7,
            agenticConcurrency: 7,
            agenticMaxConsecutiveDrops: 0,
            rolloutShuffle: false,
            outputDir: Path.join(dir, "out")
          }, { telemetry: sink, embedded: EmbeddedEngine.EmbeddedEngine.instant })),
          Effect.scoped
        )
        // Only the two rows whose agents work give samples (refills may repeat a row: the dataset wraps).
        assert.strictEqual(step.samples.length, 2)
        for (const sample of step.samples) assert.include(["normal", "children"], sample.metadata["mode"])
        for (const sample of step.samples) {
          assert.strictEqual(sample.loss_mask.length, sample.response_length)
          assert.strictEqual(sample.status, "completed")
        }
        const recorded = Fs.readdirSync(dir).filter((name) => name !== "out" && !name.endsWith(".tmp"))
        const pids = recorded.flatMap((name) =>
          Fs.readFileSync(Path.join(dir, name), "utf8").trim().split("\n").map(Number)
        )
        // Every agent that got to record itself (the seven modes at least once), and its children, are gone.
        assert.isAtLeast(recorded.length, 7)
        assert.deepStrictEqual(pids.filter((pid) => !ProcessGroup.hasExited(pid)), [])
        // The failed Sessions' logs were kept under the output directory.
        assert.isAbove(Fs.readdirSync(Path.join(dir, "out", "logs")).length, 0)
        const text = sink.captured.lines.join("\n")
        const seen = [
          "exited with code 3",
          "produced invalid output",
          "exited before every first IR existed",
          "timed out"
        ]
          .filter((line) => text.includes(line))
        console.log(
          `faults (real processes): ${recorded.length} agents, ${pids.length} processes, none left running; ` +
            `drops seen: ${seen.join(", ")}; ` +
            `Groups accepted ${step.groups.accepted}, dropped ${step.groups.dropped}`
        )
      }),
    { timeout: 120_000 }
  )
})
