import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Result } from "effect"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Cli from "../../src/cli.ts"
import * as Settings from "../../src/config/Settings.ts"
import { makeTrainer, memorySink, type RolloutOptionsInput, TrainerService } from "../../src/index.ts"
import * as AgentServer from "./agentServer.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const config = Cli.readConfigFile(Path.join(root, "examples", "coding-agent", "rollout.json"))

/**
 * The example's flags, pointed at the agent server at `url` with `slots` slots (what run.sh passes). The tests run
 * Groups of 2 instead of the example's 4 (each agent start costs a login shell): `--rollout-seed 5` then gives one
 * wrong fix in each of the first two Groups.
 */
const optionsFor = (url: string, slots: number, groupSize = 2): RolloutOptionsInput => {
  if (Result.isFailure(config)) throw new Error(config.failure.message)
  return {
    ...config.success,
    nSamplesPerPrompt: groupSize,
    rolloutSeed: 5,
    agentEnv: [`CODING_AGENT_SERVER=${url}`],
    agentMaxSlots: slots
  } as RolloutOptionsInput
}

const lastToolOutput = (response: string): string => {
  const outputs = response.split("<tool_response>")
  return outputs[outputs.length - 1] ?? ""
}

describe("the coding example (a thin client per Session, an agent server with a hard slot limit)", () => {
  it.live(
    "runs two steps through the server, rewards from the task's tests, never past the server's slots",
    () =>
      Effect.gen(function*() {
        const slots = 2
        const url = yield* AgentServer.start(slots)
        // The guide's table for the example's own settings: T = 1 Group x 4 samples, no Eval: 4 slots (run.sh's default).
        assert.strictEqual(Cli.capacityOf(yield* Settings.resolve(optionsFor(url, 4, 4))).requiredSlots, 4)
        // For the test's Groups of 2: 2 slots, which the server has.
        const capacity = Cli.capacityOf(yield* Settings.resolve(optionsFor(url, slots)))
        assert.strictEqual(capacity.requiredSlots, 2)
        assert.isUndefined(capacity.warning)

        const steps = yield* Effect.gen(function*() {
          const trainer = yield* TrainerService
          return [yield* trainer.step(0), yield* trainer.step(1)]
        }).pipe(
          Effect.provide(
            makeTrainer(optionsFor(url, slots), {
              telemetry: memorySink(),
              embedded: EmbeddedEngine.EmbeddedEngine.instant
            })
          )
        )

        // One wrong fix in each Group (reward 0), so the GRPO advantages are not zero.
        const scores = steps.map((step) => step.samples.map((s) => (s.reward as { readonly score: number }).score))
        assert.deepStrictEqual(scores, [[0, 1], [1, 0]])
        for (const step of steps) {
          assert.strictEqual(new Set(step.samples.map((s) => s.metadata["task_id"])).size, 1)
          for (const sample of step.samples) {
            const reward = sample.reward as {
              readonly score: number
              readonly tool_calls: number
              readonly patch_lines: number
              readonly test_ms: number
            }
            assert.strictEqual(sample.status, "completed")
            assert.notStrictEqual(sample.advantage, 0)
            // The hook's verdict (its own run of the task's tests) agrees with the agent's last run in its working copy.
            const passedInLoop = /^# fail 0$/m.test(lastToolOutput(sample.response))
            assert.strictEqual(reward.score, passedInLoop ? 1 : 0)
            assert.include(sample.response, "apply_patch")
            assert.strictEqual(reward.tool_calls, sample.metadata["tool_calls"])
            // Failed commands: the first test run, and the second one after a wrong fix.
            assert.strictEqual(sample.metadata["failed_commands"], reward.score === 1 ? 1 : 2)
            assert.strictEqual(reward.patch_lines, 2)
            assert.isAbove(reward.test_ms, 0)
            // Only the source file changed, in the Session's own working copy.
            const changes = sample.metadata["changes"] as Record<string, string>
            assert.deepStrictEqual(Object.keys(changes).map((path) => path.startsWith("src/")), [true])
          }
        }
        const server = yield* AgentServer.status(url)
        // Every Session of a Group has to be running at once (the first-request barrier), and never more.
        assert.strictEqual(server.peak_running, slots)
        assert.deepInclude(server, { submitted: 4, completed: 4, failed: 0, cancelled: 0, running: 0, queued: 0 })
      }).pipe(Effect.scoped),
    { timeout: 180_000 }
  )

  it.live(
    "an undersized server: check fails before launch; a launch deadlocks; stopping it cancels the tasks",
    () =>
      Effect.gen(function*() {
        const slots = 1
        const url = yield* AgentServer.start(slots)
        const settings = yield* Settings.resolve(optionsFor(url, slots))
        const report = yield* Cli.runCheck(settings)
        // The harness itself is fine (one Session fits in one slot) ...
        assert.isTrue(report.requirements.every((requirement) => requirement.passed))
        // ... but the server cannot hold a Group: the check's capacity warning (exit code 1 in the CLI).
        assert.strictEqual(report.capacity.requiredSlots, 2)
        assert.include(
          Cli.renderCheck(report, settings),
          "--agent-max-slots 1 is below the required 2 external agent slots"
        )

        // Launched anyway: the first Session takes the slot and waits at the Group's first-request barrier for the
        // second, which waits in the server's queue for a slot.
        const deadlocked = yield* Effect.gen(function*() {
          const trainer = yield* TrainerService
          const step = yield* Effect.forkChild(trainer.step(0))
          const stuck = yield* AgentServer.waitFor(url, (s) =>
            s.running === 1 && s.awaiting_model === 1 && s.queued === 1)
          yield* Fiber.interrupt(step)
          return stuck
        }).pipe(
          Effect.provide(
            makeTrainer(optionsFor(url, slots), {
              telemetry: memorySink(),
              embedded: EmbeddedEngine.EmbeddedEngine.instant
            })
          )
        )
        assert.strictEqual(deadlocked.completed, 1) // the check's Session
        // Stopping the rollout stopped its Sessions; each client forwarded the cancellation: the running task was
        // aborted and the queued one left the queue. The server never ran more than its one slot.
        const after = yield* AgentServer.waitFor(url, (s) =>
          s.running === 0 && s.queued === 0)
        assert.deepInclude(after, {
          submitted: 3,
          completed: 1,
          cancelled: 2,
          failed: 0,
          awaiting_model: 0,
          peak_running: 1
        })
      }).pipe(Effect.scoped),
    { timeout: 180_000 }
  )
})
