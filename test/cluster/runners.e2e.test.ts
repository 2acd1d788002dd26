/**
 * The runner side of a cluster, real processes only, on one PostgreSQL and one cluster: capacity (`--runner-slots`:
 * no runner ever holds more Sessions than its slots, Groups wait at the controller when no runner has room;
 * `--agent-max-starting` on the runners), one configuration (a controller or a runner whose sample-changing settings
 * differ from the live members' is refused at join, naming the flag), a rolling update: runner 1 is SIGTERMed and
 * drains (its resident Groups finish there, it takes no other, then it exits 0 by itself) while runner 2 joins mid-step
 * and takes the shards of some of runner 1's Groups: those Groups stay on runner 1 (their agents, held mid-tool, keep
 * running) and finish there, none is dropped, the joining runner receives the new Group, no sample twice; and
 * `relax-agentic check --cluster-database-url` counts the live runners' slots.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Routing from "../../src/cluster/Routing.ts"
import * as AgentProcesses from "../support/agentProcesses.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

/** The most slots a runner ever had in use, from its `hosts Session … [slots used/capacity]` lines. */
const peakSlots = (runner: Processes.Started): number =>
  Math.max(0, ...[...runner.output().matchAll(/\[slots (\d+)\/\d+\]/g)].map((m) => Number(m[1])))

/** Every process the test started, by name, so a failure shows what each printed. */
const started = new Map<string, Processes.Started>()

/** `effect`, failing after 4 minutes with `what` and every process's output. */
const within = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) => Processes.within(started, what, 240, effect)

/** Wait (up to 4 minutes) until `condition` holds. */
const until = (what: string, condition: () => boolean) => Processes.until(started, what, 240, condition)

describe("cluster runners (end to end)", () => {
  it.live(
    "--runner-slots, refusal at join, a rolling update: a runner joins mid-step while another drains, 0 Groups dropped",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const db = yield* EmbeddedPg.start
        // Runner 1's port, the refused runner's, then the candidates for runner 2's (chosen below by the shards it takes).
        const [firstPort, refusedPort, ...candidates] = yield* EmbeddedPg.freePorts(42)
        const work = yield* Processes.workDir("relax-cluster-runners-")
        // Until released, every agent stays in its tool: runner 1's Groups are mid-step when runner 2 joins.
        const agents = Processes.heldSlowAgents(work)
        const pids = agents.pids
        const flags = (outputDir: string, temperature = "1") => [
          ...Processes.memberFlags({
            ...agents.member,
            batchSize: 4,
            numRollout: 1,
            temperature,
            outputDir
          }),
          ...Processes.clusterFlags(db.url)
        ]
        const runnerArgs = (i: number, temperature = "1", slots = 2, at = refusedPort!, starting = 1) => [
          ...flags(Path.join(work, `runner${i}`), temperature),
          ...Processes.runnerAt(at),
          "--runner-slots",
          String(slots),
          "--agent-max-starting",
          String(starting)
        ]
        const first = yield* within("runner 1 to join", Processes.runner(runnerArgs(1, "1", 6, firstPort!, 3)))
        started.set("runner 1", first)

        // A controller whose sampling differs from the live runner's is refused before it starts a Group (its
        // refusal writes nothing, so the real controller can start beside it).
        const refusedController = yield* Processes.start(["rollout", ...flags(Path.join(work, "refused"), "0.5")])
        started.set("refused controller", refusedController)
        const out = Path.join(work, "out")
        const controller = yield* Processes.start(["rollout", ...flags(out)])
        started.set("controller", controller)
        assert.notStrictEqual(yield* within("the refused controller to exit", refusedController.exited), 0)
        assert.match(
          refusedController.output(),
          /this controller is refused: --rollout-temperature: the runner 127\.0\.0\.1:\d+ has 1, this controller 0\.5/
        )
        assert.isFalse(Fs.existsSync(Path.join(work, "refused", "rollout_0.jsonl")))

        // Runner 1 (6 slots) holds three Groups, the fourth waits; SIGTERM it once all six agents are in their tool.
        yield* until("runner 1's six agents", () => {
          const hosted = Processes.hostedBy(first)
          return hosted.length === 6 && hosted.every((s) => Fs.existsSync(Path.join(pids, s)))
        })
        const resident = Processes.hostedBy(first)
        const keys = [...new Set(resident.map((s) => Routing.groupKeyOf(s)!))]
        // A runner with other sampling settings is refused at join while the controller runs.
        const refusedRunner = yield* Processes.start(["runner", ...runnerArgs(9, "0.5")])
        started.set("refused runner", refusedRunner)
        assert.notStrictEqual(yield* within("the refused runner to exit", refusedRunner.exited), 0)
        // A runner whose cluster port another process holds (runner 1's) says which flag and address.
        const takenPort = yield* Processes.start(["runner", ...runnerArgs(8, "1", 2, firstPort!)])
        started.set("runner on a taken port", takenPort)
        assert.notStrictEqual(yield* within("the runner on a taken port to exit", takenPort.exited), 0)
        assert.match(
          takenPort.output(),
          new RegExp(
            `--runner-address / --runner-listen-address: cannot listen on 127\\.0\\.0\\.1:${firstPort}.*EADDRINUSE`
          )
        )
        first.child.kill("SIGTERM")
        // Runner 2 joins while step 0 cannot finish without it (runner 1 drains and takes no other Group). Its port
        // is chosen so that it takes the shard of at least one of runner 1's Groups and leaves at least one.
        const movesTo = (p: number) => {
          const owners = Processes.shardOwners([firstPort!, p])
          return keys.filter((k) => owners[Processes.shardOf(k)] === `127.0.0.1:${p}`)
        }
        // Every candidate that splits runner 1's Groups so (the first its port is still free at).
        const splitting = candidates.filter((p) => movesTo(p).length > 0 && movesTo(p).length < keys.length)
        assert.isNotEmpty(splitting, `runner 1's Groups ${keys.join(", ")} all fall on one shard`)
        const second = yield* within(
          "runner 2 to join",
          Processes.runnerAtFirstFree(splitting, (port) => runnerArgs(2, "1", 2, port))
        )
        const moved = movesTo(second.port)
        const movedSessions = resident.filter((s) => moved.includes(Routing.groupKeyOf(s)!))
        const pidOf = (s: string) => Number(Fs.readFileSync(Path.join(pids, s), "utf8"))
        started.set("runner 2", second)

        // The joining runner takes the new Group (the one waiting for slots) while runner 1's Groups, those whose
        // shards moved to runner 2 included, keep running on runner 1: their agents are still in their tool.
        yield* until("runner 2 to receive the waiting Group", () => Processes.hostedBy(second).length === 2)
        yield* Effect.sleep("3 seconds")
        assert.isTrue(agents.held())
        for (const s of resident) {
          assert.isTrue(AgentProcesses.running(pidOf(s)), `${s} was stopped when its shard moved`)
        }
        agents.release()

        // The drained runner's resident Groups whose shards stayed finished there; then it left with exit code 0.
        assert.strictEqual(yield* within("runner 1 to drain and exit", first.exited), 0)
        assert.match(first.output(), /drained; leaving the cluster/)
        assert.deepStrictEqual(Processes.hostedBy(first), resident, "runner 1 took a Group while it drained")
        // `check` with the cluster counts the live runners' slots: runner 1 has left, runner 2's 2 are below
        // T = 4 Groups x 2 Sessions.
        const check = yield* Processes.start([
          "check",
          ...flags(Path.join(work, "check")).map((arg) => arg.endsWith("slow.mjs") ? "true" : arg)
        ])
        started.set("check", check)

        assert.strictEqual(yield* within("the rollout", controller.exited), 0, controller.output().slice(-3000))
        const sessions = Processes.samplesOf(out, 0).map((s) => s.session_id)
        assert.strictEqual(sessions.length, 8)
        assert.strictEqual(new Set(sessions).size, 8, "a Session's samples arrived twice")
        // Every Group resident on the drained runner finished there, those whose shards moved included.
        for (const s of resident) assert.include(sessions, s, "the drained runner's resident Group did not finish")
        assert.isAbove(movedSessions.length, 0)
        // Runner 2, joined mid-step, ran the rest of the step: the waiting Group.
        assert.strictEqual(sessions.filter((s) => Processes.hostedBy(second).includes(s)).length, 8 - resident.length)
        // No Group was dropped.
        assert.deepStrictEqual([...controller.output().matchAll(/error_type=(\w+)/g)].map((m) => m[1]), [])
        assert.match(controller.output(), /waits for a runner with 2 free slot\(s\)/)
        // No runner ever held more Sessions than its slots.
        assert.isAtMost(peakSlots(first), 6)
        assert.isAtMost(peakSlots(second), 2)

        assert.notStrictEqual(yield* within("check", check.exited), 0)
        assert.match(check.output(), /runners: 1; --runner-slots: 127\.0\.0\.1:\d+ 2; runner slots in all = 2/)
        assert.match(check.output(), /WARNING: the 1 runner\(s\) hold 2 agent slot\(s\) in all .* below the 8 Sessions/)
        assert.match(refusedRunner.output(), /refused at join: --rollout-temperature: this runner has 0\.5/)
        assert.deepStrictEqual(Processes.hostedBy(refusedRunner), [])
        assert.deepStrictEqual(Processes.runningAgents(pids), [])
      })),
    600_000
  )
})
