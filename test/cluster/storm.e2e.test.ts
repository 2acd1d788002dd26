/**
 * A shard-move storm, real processes only: while a step of 64 Sessions (32 Groups) runs, runners join and leave every
 * few seconds (joins, drains by SIGTERM, one SIGKILL; the agents held in their tool until the SIGKILL, then let
 * finish while the storm goes on), so shards move again and again under running Groups. Every
 * Group completes, or is dropped only because its own runner died (its Sessions' holder is the SIGKILLed runner, and
 * the reason says the runner was lost); the drained runners exit 0 by themselves; a runner that joins while Groups
 * wait for slots receives Groups (placement by room); no sample arrives twice and no agent is left running.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Routing from "../../src/cluster/Routing.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

/** Every process the test started, by name, so a failure shows what each printed. */
const started = new Map<string, Processes.Started>()

/** What the storm did, with the time (s since its start) and the Sessions each member hosted so far. */
const timeline: Array<string> = []

/** `effect`, failing after `seconds` with `what`, the storm's timeline and every process's output. */
const within = <A, E, R>(what: string, seconds: number, effect: Effect.Effect<A, E, R>) =>
  Processes.within(started, `${what}\n${timeline.join("\n")}`, seconds, effect)

/**
 * What happens at each tick of the storm (every 3 s). Until `release` the agents stay in their tool (the step cannot
 * end before the storm has moved shards under them); after it they finish while runners still come and go.
 */
type Event = "join" | "drain" | "kill" | "release"
const storm: ReadonlyArray<Event> = [
  "join",
  "join",
  "drain",
  "join",
  "kill",
  "release",
  "join",
  "drain",
  "join",
  "drain"
]

/** Reasons a Group of a runner that died is dropped with (test/cluster/faults.e2e.test.ts). */
const lostRunner = ["RunnerLostError", "ClusterCallError"]

describe("cluster shard-move storm (end to end)", () => {
  it.live(
    "runners join and leave every 3 s while 64 Sessions run: every Group completes or is dropped because its runner died",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const db = yield* EmbeddedPg.start
        const work = yield* Processes.workDir("relax-cluster-storm-")
        const pids = Path.join(work, "pids")
        Fs.mkdirSync(pids)
        const hold = Path.join(work, "hold")
        Fs.writeFileSync(hold, "")
        const flags = (outputDir: string) => [
          ...Processes.memberFlags({
            ...Processes.slowAgent(pids),
            agentEnv: [`PID_DIR=${pids}`, `HOLD_FILE=${hold}`],
            batchSize: 32,
            numRollout: 1,
            outputDir
          }),
          // The loaded machine's failover settings: faster ones lose live runners' shards to a slow database here.
          ...Processes.clusterFlags(db.url)
        ]
        // 16 slots a runner: the two runners that stay hold half the step, the rest waits for the joiners.
        const startRunner = (name: string) =>
          Effect.gen(function*() {
            const port = yield* EmbeddedPg.freePort
            const runner = yield* within(
              `${name} to join`,
              120,
              Processes.runner([
                ...flags(Path.join(work, name)),
                ...Processes.runnerAt(port),
                "--runner-slots",
                "16",
                "--agent-max-starting",
                "4"
              ])
            )
            started.set(name, runner)
            timeline.push(`${name} joined as ${runner.incarnation}`)
            return runner
          })
        yield* startRunner("stays-1")
        yield* startRunner("stays-2")
        const out = Path.join(work, "out")
        const controller = yield* Processes.start(["rollout", ...flags(out)])
        started.set("controller", controller)
        yield* within(
          "the first Sessions",
          120,
          Effect.gen(function*() {
            while (Fs.readdirSync(pids).length === 0) yield* Effect.sleep("200 millis")
          })
        )

        // The storm: joiners come and go while the step runs (the oldest live joiner leaves).
        const joiners: Array<Processes.Runner> = []
        const drained: Array<Processes.Runner> = []
        const killed: Array<Processes.Runner> = []
        const t0 = Date.now()
        for (const [i, event] of storm.entries()) {
          if (controller.child.exitCode !== null) break
          timeline.push(
            `${((Date.now() - t0) / 1000).toFixed(1)} s: ${event}; hosted ` +
              [...started].map(([name, p]) => `${name} ${Processes.hostedBy(p).length}`).join(", ")
          )
          if (event === "release") Fs.rmSync(hold)
          else if (event === "join") {
            joiners.push(yield* startRunner(`joiner-${i}`))
          } else {
            // The kill takes a joiner holding Sessions (its Groups are lost with it), a drain the oldest.
            const live = joiners.filter((j) => !drained.includes(j) && !killed.includes(j))
            const victim = event === "kill" ? live.find((j) => Processes.hostedBy(j).length > 0) ?? live[0] : live[0]
            if (victim !== undefined) {
              victim.child.kill(event === "kill" ? "SIGKILL" : "SIGTERM")
              ;(event === "kill" ? killed : drained).push(victim)
            }
          }
          yield* Effect.sleep("3 seconds")
        }

        assert.strictEqual(yield* within("the rollout", 180, controller.exited), 0, controller.output().slice(-3000))
        for (const runner of drained) {
          assert.strictEqual(yield* within("a drained runner to exit", 120, runner.exited), 0, runner.output())
          assert.match(runner.output(), /drained; leaving the cluster/)
        }
        const samples = Processes.samplesOf(out, 0)
        assert.strictEqual(samples.length, 64)
        const sessions = samples.map((s) => s.session_id)
        assert.strictEqual(new Set(sessions).size, 64, "a Session's samples arrived twice")

        // Every drop is a Group of the killed runner, for that reason; none of its Sessions delivered a sample.
        const dead = new Set(killed.map((r) => r.incarnation))
        const drops = Processes.drops(controller.output())
        for (const drop of drops) {
          assert.isTrue(dead.has(Routing.holderOf(drop.sessionId) ?? ""), `dropped, its runner alive: ${drop.line}`)
          assert.include(lostRunner, drop.type, drop.line)
        }
        for (const s of sessions) assert.isFalse(dead.has(Routing.holderOf(s) ?? ""), `${s}: its runner was killed`)
        // A runner that joined while Groups waited for slots received some (the first joiner joins with 32 waiting).
        assert.isAbove(Processes.hostedBy(joiners[0]!).length, 0, "the first joiner received no Group")
        assert.deepStrictEqual(Processes.runningAgents(pids), [])
      })),
    600_000
  )
})
