/**
 * A runner killed in the middle of a step (SIGKILL, as the OOM killer or a machine loss): real PostgreSQL, two
 * runners, a controller and real agents that are mid-tool when it happens. The step completes on the survivor, the
 * lost Groups are dropped and refilled, no Session's samples arrive twice, and a request for a Session of the dead
 * runner is answered 404 `session_discarded` by the runner that inherited its shard.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

const MetricsLine = Schema.Struct({ rollout_id: Schema.Int, metrics: Schema.Record(Schema.String, Schema.Number) })
const decodeMetrics = Schema.decodeUnknownSync(Schema.fromJsonString(MetricsLine))
const ErrorBody = Schema.decodeUnknownSync(
  Schema.fromJsonString(Schema.Struct({ error: Schema.Struct({ code: Schema.String }) }))
)

describe("cluster faults (end to end)", () => {
  it.live(
    "SIGKILL of a runner mid-step: the step completes on the survivor, lost Groups refilled, no duplicate, 404 for its Sessions",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const db = yield* EmbeddedPg.start
        const ports = yield* EmbeddedPg.freePorts(2)
        const work = yield* Processes.workDir("relax-cluster-faults-")
        const pids = Path.join(work, "pids")
        Fs.mkdirSync(pids)
        // Where an agent marks its Session once its first request was answered (slow.mjs's ANSWERED_DIR).
        const answered = Path.join(work, "answered")
        Fs.mkdirSync(answered)
        const flags = (outputDir: string) => [
          ...Processes.memberFlags({
            ...Processes.slowAgent(pids),
            agentEnv: [`PID_DIR=${pids}`, `ANSWERED_DIR=${answered}`],
            batchSize: 4,
            numRollout: 1,
            outputDir
          }),
          ...Processes.clusterFlags(db.url, { lockExpiration: 10, lockRefresh: 3, healthCheck: 3 })
        ]
        const runners = yield* Effect.forEach(
          [1, 2],
          (i) => Processes.runner([...flags(Path.join(work, `runner${i}`)), ...Processes.runnerAt(ports[i - 1]!)]),
          { concurrency: "unbounded" }
        )
        const out = Path.join(work, "out")
        const controller = yield* Processes.start(["rollout", ...flags(out)])
        // Kill the runner that first holds a Session whose agent had its first request answered: its Group holds its
        // lease, so its runner took it for good (a runner killed before its Group's first answer only makes the
        // controller place that Group again, no drop), and the agent is mid-tool (slow.mjs's 4-second tool).
        const victim = yield* Effect.gen(function*() {
          while (true) {
            const done = new Set(Fs.readdirSync(answered))
            const found = runners.find((r) => Processes.hostedBy(r).some((s) => done.has(s)))
            if (found !== undefined) return found
            yield* Effect.sleep("200 millis")
          }
        }).pipe(Effect.timeout("240 seconds"))
        const survivor = runners.find((r) => r !== victim)!
        victim.child.kill("SIGKILL")
        const lost = Processes.hostedBy(victim)
        assert.isAbove(lost.length, 0)

        const code = yield* controller.exited
        assert.strictEqual(code, 0, controller.output().slice(-3000))
        const samples = Processes.samplesOf(out, 0)
        assert.strictEqual(samples.length, 8)
        const sessions = samples.map((s) => s.session_id)
        assert.strictEqual(new Set(sessions).size, sessions.length, "a Session's samples arrived twice")
        for (const s of sessions) assert.notInclude(lost, s, "a sample of the killed runner's Session was delivered")
        const metrics = decodeMetrics(Fs.readFileSync(Path.join(out, "metrics.jsonl"), "utf8").split("\n")[0]!)
        assert.isAtLeast(metrics.metrics["rollout/groups_dropped"] ?? 0, 1)
        assert.match(controller.output(), /error_type=(RunnerLostError|ClusterCallError)/)
        // No agent of the step is left running: neither the killed runner's nor the survivor's.
        assert.deepStrictEqual(Processes.runningAgents(pids), [])

        // The killed runner's Session, asked at the survivor: its new owner does not hold it.
        const response = yield* Effect.promise(() =>
          fetch(`${survivor.gatewayUrl}v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${lost[0]}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hello" }] })
          })
        )
        assert.strictEqual(response.status, 404)
        const body = ErrorBody(yield* Effect.promise(() => response.text()))
        assert.strictEqual(body.error.code, "session_discarded")
      })),
    600_000
  )
})
