/**
 * `npm run bench -- cluster`: the forwarding hop of the cluster (docs/scale-out.md). A throwaway PostgreSQL, two
 * runner processes and a controller; runner 2 gives its agents runner 1's gateway (`--gateway-public-url`), so the
 * requests of Sessions held by runner 2 are forwarded by runner 1 (non-owner) while runner 1's own Sessions are
 * answered where they arrive (owner). The same agents then run in one process. Each agent sends its requests one
 * after another and times them; the table gives p50 / p90 per path and the ratios, at a few and at 64 concurrent
 * agents (clients).
 *
 * **Details**
 * Every request is a full one-turn generation of the same size on the embedded engine (instant policy), so the
 * difference between the paths is the hop: one cluster call (serialize, TCP, the owner's entity handler) and its answer.
 * Not measured here yet: CPU per request, Sessions and heap per runner (failover time: clusterFailover.ts).
 */
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Processes from "../cluster/processes.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import type * as Harness from "./harness.ts"

const fixtures = Path.join(Processes.root, "test", "fixtures")
const decodeLatencies = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(Schema.Number)))

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
}

const flags = (outputDir: string, reports: string, groups: number, requests: number) => [
  "--prompt-data",
  Path.join(fixtures, "rollout", "train.jsonl"),
  "--rollout-batch-size",
  String(groups),
  "--n-samples-per-prompt",
  "2",
  "--num-rollout",
  "1",
  "--agentic-concurrency",
  String(groups),
  "--agent-cwd",
  Path.join(Processes.root, "test", "bench"),
  "--agent-command",
  `"${process.execPath}" clusterAgent.mjs`,
  "--agent-env",
  `REPORT_DIR=${reports}`,
  `REQUESTS=${requests}`,
  "--embedded-policy",
  Path.join(fixtures, "cluster", "policy.mjs"),
  "--rollout-max-response-len",
  "16",
  "--output-dir",
  outputDir
]

const cluster = (url: string) => [
  "--cluster-database-url",
  url,
  "--cluster-lock-expiration",
  "20",
  "--cluster-lock-refresh",
  "5"
]

const latencies = (reports: string, sessions: ReadonlySet<string> | undefined): Array<number> =>
  Fs.readdirSync(reports)
    .filter((f) => sessions === undefined || sessions.has(f.replace(/\.json$/, "")))
    .flatMap((f) => [...decodeLatencies(Fs.readFileSync(Path.join(reports, f), "utf8"))])

const hostedBy = (runner: Processes.Runner): Set<string> =>
  new Set([...runner.output().matchAll(/hosts Session (\S+)/g)].map((m) => m[1]!))

const measure = (clients: number, requests: number) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* EmbeddedPg.start
    const port = yield* EmbeddedPg.freePort
    const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "relax-bench-cluster-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(work, { recursive: true, force: true })))
    const groups = Math.max(1, Math.round(clients / 2))
    const dir = (name: string) => {
      const path = Path.join(work, name)
      Fs.mkdirSync(path, { recursive: true })
      return path
    }
    const clusterReports = dir("cluster-reports")
    const runnerArgs = (i: number, extra: ReadonlyArray<string>) => [
      ...flags(dir(`runner${i}`), clusterReports, groups, requests),
      ...cluster(db.url),
      "--runner-address",
      `127.0.0.1:${port + i}`,
      ...extra
    ]
    const owner = yield* Processes.runner(runnerArgs(1, []))
    const other = yield* Processes.runner(runnerArgs(2, ["--gateway-public-url", owner.gatewayUrl]))
    yield* Processes.run(["rollout", ...flags(dir("cluster"), clusterReports, groups, requests), ...cluster(db.url)])
    const singleReports = dir("single-reports")
    yield* Processes.run(["rollout", ...flags(dir("single"), singleReports, groups, requests)])
    const direct = latencies(clusterReports, hostedBy(owner))
    const forwarded = latencies(clusterReports, hostedBy(other))
    const single = latencies(singleReports, undefined)
    const p50 = { direct: percentile(direct, 50), forwarded: percentile(forwarded, 50), single: percentile(single, 50) }
    return {
      clients: String(groups * 2),
      "requests (owner / non-owner / single)": `${direct.length} / ${forwarded.length} / ${single.length}`,
      "p50 owner": `${p50.direct.toFixed(2)} ms`,
      "p50 non-owner": `${p50.forwarded.toFixed(2)} ms`,
      "p50 single": `${p50.single.toFixed(2)} ms`,
      "p90 owner / non-owner / single": `${percentile(direct, 90).toFixed(1)} / ${
        percentile(forwarded, 90).toFixed(1)
      } / ${percentile(single, 90).toFixed(1)} ms`,
      "non-owner / owner": `${(p50.forwarded / p50.direct).toFixed(2)}x`,
      "owner / single": `${(p50.direct / p50.single).toFixed(2)}x`
    }
  }))

export const bench: Harness.Bench = {
  name: "cluster",
  run: async ({ full }): Promise<Harness.BenchResult> => {
    const rows = [
      await Effect.runPromise(measure(2, full ? 200 : 40)),
      await Effect.runPromise(measure(64, full ? 50 : 10))
    ]
    return {
      title: "Cluster forwarding hop: a request at its owner vs at a non-owner runner vs one process",
      rows,
      notes: [
        "Two runners and a controller over an embedded PostgreSQL; runner 2's agents call runner 1, which forwards their requests (non-owner).",
        "Each agent sends its requests one after another; `clients` agents at once. Target: non-owner ≤ 1.3x owner.",
        "Not measured yet: CPU per request, Sessions and heap per runner (failover time: `npm run bench -- failover`)."
      ]
    }
  }
}
