/**
 * The runner side of a cluster, real processes only, on one PostgreSQL and one cluster: capacity (`--runner-slots`:
 * no runner ever holds more Sessions than its slots; `--agent-max-starting` on the runners), one configuration (a
 * controller or a runner whose sample-changing settings differ from the live members' is refused at join, naming the
 * flag), a runner joining mid-step takes work, and SIGTERM drains a runner: its resident Group finishes there, then it
 * exits 0 and the step completes on the other runner.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { TrainingSample } from "../../src/forest/TrainingSample.ts"
import { running } from "../support/agentProcesses.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

const fixtures = Path.join(Processes.root, "test", "fixtures")
const decodeSample = Schema.decodeUnknownSync(Schema.fromJsonString(TrainingSample))

const hostedBy = (runner: Processes.Started): Array<string> =>
  [...runner.output().matchAll(/hosts Session (\S+)/g)].map((m) => m[1]!)

/** The most slots a runner ever had in use, from its `hosts Session … [slots used/capacity]` lines. */
const peakSlots = (runner: Processes.Started): number =>
  Math.max(0, ...[...runner.output().matchAll(/\[slots (\d+)\/\d+\]/g)].map((m) => Number(m[1])))

/** Every process the test started, by name, so a failure shows what each printed. */
const started = new Map<string, Processes.Started>()

/** Poll `condition` every 200 ms until it holds; fails naming `what` (and with every process's output) after 4 min. */
const until = (what: string, condition: () => boolean) =>
  Effect.gen(function*() {
    while (!condition()) yield* Effect.sleep("200 millis")
  }).pipe(
    Effect.timeoutOrElse({
      duration: "240 seconds",
      orElse: () =>
        Effect.die(
          new Error(
            `waited 4 minutes for ${what}\n` +
              [...started].map(([name, p]) => `--- ${name}\n${p.output().slice(-2500)}`).join("\n")
          )
        )
    })
  )

describe("cluster runners (end to end)", () => {
  it.live(
    "--runner-slots, refusal at join, a runner joining mid-step takes work, SIGTERM drains a runner",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const db = yield* EmbeddedPg.start
        const port = yield* EmbeddedPg.freePort
        const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "relax-cluster-runners-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(work, { recursive: true, force: true })))
        const pids = Path.join(work, "pids")
        Fs.mkdirSync(pids)
        const flags = (outputDir: string, temperature = "1") => [
          "--prompt-data",
          Path.join(fixtures, "rollout", "train.jsonl"),
          "--rollout-batch-size",
          "4",
          "--n-samples-per-prompt",
          "2",
          "--num-rollout",
          "2",
          "--rollout-temperature",
          temperature,
          "--agent-cwd",
          Path.join(fixtures, "cluster"),
          "--agent-command",
          `"${process.execPath}" slow.mjs`,
          "--agent-env",
          `PID_DIR=${pids}`,
          "--embedded-policy",
          Path.join(fixtures, "rollout", "policy.mjs"),
          "--rollout-max-response-len",
          "16",
          "--output-dir",
          outputDir,
          "--cluster-database-url",
          db.url,
          "--cluster-lock-expiration",
          "20",
          "--cluster-lock-refresh",
          "5",
          "--cluster-health-check",
          "5"
        ]
        const runnerArgs = (i: number, temperature = "1") => [
          ...flags(Path.join(work, `runner${i}`), temperature),
          "--runner-address",
          `127.0.0.1:${port + i}`,
          "--runner-slots",
          "2",
          "--agent-max-starting",
          "1"
        ]
        const first = yield* Processes.runner(runnerArgs(1))
        started.set("runner 1", first)

        // A controller whose sampling differs from the live runner's is refused before it starts a Group.
        const refusedController = yield* Processes.start(["rollout", ...flags(Path.join(work, "refused"), "0.5")])
        assert.notStrictEqual(yield* refusedController.exited, 0)
        assert.match(refusedController.output(), /refused[\s\S]*--rollout-temperature/)
        assert.deepStrictEqual(Fs.readdirSync(pids), [])

        const out = Path.join(work, "out")
        const controller = yield* Processes.start(["rollout", ...flags(out)])
        started.set("controller", controller)
        // The step runs on runner 1 alone (2 slots: one Group at a time)...
        yield* until("runner 1's first agent", () => hostedBy(first).some((s) => Fs.existsSync(Path.join(pids, s))))
        // ...a runner with other sampling settings is refused at join while the controller runs...
        const refusedRunner = yield* Processes.start(["runner", ...runnerArgs(9, "0.5")])
        // ...and runner 2 joins mid-step and takes work.
        started.set("refused runner", refusedRunner)
        const second = yield* Processes.runner(runnerArgs(2))
        started.set("runner 2", second)
        yield* until("runner 2 to take work", () => hostedBy(second).length > 0)
        assert.isNull(controller.child.exitCode, "the rollout ended before runner 2 took work")
        assert.notStrictEqual(yield* refusedRunner.exited, 0)
        assert.match(refusedRunner.output(), /refused at join: --rollout-temperature: this runner has 0\.5/)

        // SIGTERM runner 1 while a Group it took after runner 2 joined is mid-tool: it finishes there, then runner 1
        // leaves with exit code 0.
        const before = new Set(hostedBy(first))
        yield* until(
          "a new Group on runner 1",
          () => hostedBy(first).some((s) => !before.has(s) && Fs.existsSync(Path.join(pids, s)))
        )
        const resident = hostedBy(first).filter((s) => !before.has(s))
        yield* Effect.sleep("1 second")
        first.child.kill("SIGTERM")
        assert.strictEqual(yield* first.exited, 0, first.output().slice(-3000))
        assert.match(first.output(), /drained; leaving the cluster/)

        assert.strictEqual(yield* controller.exited, 0, controller.output().slice(-3000))
        const sessions = [0, 1].flatMap((step) =>
          Fs.readFileSync(Path.join(out, `rollout_${step}.jsonl`), "utf8").split("\n").filter((l) => l !== "")
            .map((l) => decodeSample(l).session_id)
        )
        assert.strictEqual(sessions.length, 16)
        assert.strictEqual(new Set(sessions).size, 16, "a Session's samples arrived twice")
        for (const s of resident) assert.include(sessions, s, "a Group resident on the drained runner did not finish")
        assert.notMatch(controller.output(), /error_type=RunnerDraining/)
        // No runner ever held more Sessions than its slots.
        assert.isAtMost(peakSlots(first), 2)
        assert.isAtMost(peakSlots(second), 2)
        const orphans = Fs.readdirSync(pids).map((f) => Number(Fs.readFileSync(Path.join(pids, f), "utf8"))).filter(
          running
        )
        assert.deepStrictEqual(orphans, [])
      })),
    600_000
  )
})
