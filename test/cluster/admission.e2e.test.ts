/**
 * KV admission across real cluster processes (docs/sglang.md "KV scheduling", docs/scale-out.md): a controller and two
 * `relax-agentic runner` processes on one PostgreSQL, all with `--agentic-program-admission`, generating on the SGLang
 * double with a small KV pool and `--enable-metrics` (test/support/FakeSglang.ts). Every backend attempt of both
 * runners reserves against the one `kv-admission` writer: the step's ledger metrics (read by the controller from the
 * writer) admit exactly the attempts the worker received, from Sessions both runners held, with nothing bypassed, and
 * the ledger is back to zero when the step ends; the pool never retracted a request.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as SglangWorker from "../support/sglangWorker.ts"
import * as Processes from "./processes.ts"

/** The worker's KV pool: a few attempts at once (a reservation is its prompt + 16 tokens). */
const pool = 400

const MetricsLine = Schema.Struct({ rollout_id: Schema.Number, metrics: Schema.Record(Schema.String, Schema.Number) })
const decodeMetricsLine = Schema.decodeUnknownSync(Schema.fromJsonString(MetricsLine))

describe("KV admission in a cluster (end to end)", () => {
  it.live(
    "two runners reserve against one ledger: every attempt of both admitted, the ledger back to zero, no retraction",
    () =>
      Effect.gen(function*() {
        const { worker } = yield* SglangWorker.instantWorker({ seed: 5 }, {
          enableMetrics: true,
          kvPool: { maxTotalNumTokens: pool, tickMs: 20, prefillTokensPerTick: 10_000 }
        })
        const db = yield* EmbeddedPg.start
        const work = yield* Processes.workDir("relax-cluster-admission-")
        const out = Path.join(work, "out")
        const flags = [
          ...Processes.memberFlags({
            agent: "agent.mjs",
            agentCwd: Path.join(Processes.fixtures, "rollout"),
            policy: "rollout",
            sglang: { workers: [worker.url] },
            batchSize: 3,
            samplesPerPrompt: 2,
            numRollout: 1,
            seed: 11,
            outputDir: out
          }),
          "--agentic-program-admission",
          ...Processes.clusterFlags(db.url)
        ]
        const ports = yield* Effect.forEach([1, 2], () => EmbeddedPg.freePort)
        const runners = yield* Effect.forEach(ports, (port) =>
          Processes.runner([...flags, ...Processes.runnerAt(port)]), {
          concurrency: "unbounded"
        })
        const controller = yield* Processes.start(["rollout", ...flags])
        const code = yield* Processes.within(
          Processes.byName(controller, runners),
          "the rollout",
          240,
          controller.exited
        )
        const everyOutput = () =>
          [controller, ...runners].map((p) =>
            p.output().slice(-3000)
          ).join("\n=====\n")
        assert.strictEqual(code, 0, everyOutput())

        const samples = Processes.samplesOf(out, 0)
        assert.lengthOf(samples, 6)
        // Both runners held Sessions of the step (so both sent attempts through the writer).
        const sessions = new Set(samples.map((s) => s.session_id))
        for (const runner of runners) {
          assert.isAbove(Processes.hostedBy(runner).filter((s) => sessions.has(s)).length, 0, everyOutput())
        }
        const firstLine = Fs.readFileSync(Path.join(out, "metrics.jsonl"), "utf8").split("\n").find((l) => l !== "")
        const metrics = decodeMetricsLine(firstLine ?? "").metrics
        const generates = worker.requests.filter((r) => r.path === "/generate").length
        // Every attempt the worker received was admitted by the one ledger (none sent unreserved: a runner that could
        // not reach the writer, or a missing snapshot, would show as a bypass and fewer admits).
        assert.strictEqual(metrics["agentic_kv/admission/admit"], generates, JSON.stringify(metrics))
        assert.isUndefined(metrics["agentic_kv/admission/bypass"])
        assert.strictEqual(metrics["agentic_kv/budget/ceiling"], Math.floor(pool * 0.9))
        // The ledger is back to zero: every lease was released, however its runner is placed.
        assert.strictEqual(metrics["agentic_kv/budget/reserved"], 0)
        assert.strictEqual(metrics["agentic_kv/budget/lease_count"], 0)
        assert.strictEqual(metrics["agentic_kv/admission/waiting"], 0)
        assert.strictEqual(worker.kv?.retractions, 0)
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))),
    300_000
  )
})
