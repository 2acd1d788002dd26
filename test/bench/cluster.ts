/**
 * `npm run bench -- cluster`: the forwarding hop of the cluster (docs/scale-out.md), in three runs of the same agents
 * per client count: `owner` (two runners, each agent calls the runner that holds its Session), `forwarded` (each
 * runner's agents call the other runner, which forwards every request to the owner) and `single` (one process, no
 * cluster). Per path: p50 / p90 latency, CPU per request, Sessions held and heap per process; for `forwarded`, how
 * the timed requests reached their owner (a connection spliced to its gateway, the direct hop, or the cluster).
 *
 * **Details**
 * Every request is a full one-turn generation of the same size on the embedded engine (instant policy), so the
 * difference between the paths is the hop: after a Group's first request (a cluster call: serialize, TCP, the owner's
 * entity handler) a relay of the request to the owner's gateway and of its answer back (docs/scale-out.md "One address
 * for agents").
 * The agents (clusterAgent.mjs) send a warm-up request and wait at a barrier, so every Session is held when the bench
 * reads the heaps (inspector: full collection, then heapUsed) and the CPU window covers only the timed requests: the
 * user+system CPU of the member processes (/proc/<pid>/stat; both runners, or the single process) over the window,
 * divided by the requests. Runner 1 cannot be told runner 2's gateway before runner 2 exists, so in `forwarded`
 * runner 1's agents reach runner 2 through a TCP relay in this process (its CPU is not counted); the latencies of the
 * `forwarded` row are those of runner 2's agents only, which call runner 1 directly. The controller's CPU (idle in
 * the window) is not counted. `CLUSTER_PROFILE=<dir>` writes a CPU profile of each runner over the `forwarded` window,
 * `CLUSTER_HEAPSNAPSHOT=<dir>` a heap snapshot of each member of the `owner` and `single` runs with every Session held
 * (their CPU figures are then not comparable: the snapshots' own work lands in the idle and timed windows).
 * `CLUSTER_ROUNDS=<n>` runs n `owner` / `forwarded` pairs per client count and notes every round's forwarded/owner
 * CPU ratio and their median (one run's CPU per request moves by tens of percent on a shared 2-core machine).
 * Agents get an empty HOME (Processes.emptyHome): under their `bash -lc` a login profile that runs `pyenv init` starves
 * the runners of CPU on a small machine until they miss their shard-lock renewals.
 */
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { performance } from "node:perf_hooks"
import * as ModelRoute from "../../layers/gateway/ModelRoute.ts"
import * as Processes from "../cluster/processes.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import type * as Harness from "./harness.ts"
import * as ProcessCpu from "./processCpu.ts"

const fixtures = Path.join(Processes.root, "test", "fixtures")
const decodeReport = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Struct({
  latencies: Schema.Array(Schema.Number),
  via: Schema.Struct({ spliced: Schema.Number, direct: Schema.Number, cluster: Schema.Number, none: Schema.Number })
})))
const inspect = ["--inspect=127.0.0.1:0"]

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
}

const flags = (outputDir: string, barrier: string, groups: number, requests: number) => [
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
  `BARRIER=${barrier}`,
  `REQUESTS=${requests}`,
  // Warm-up requests per agent before the barrier: about 200 in all, so the processes' code (the relay's as well as
  // the owner's) is compiled and optimized before the timed window.
  `WARMUP=${Math.max(5, Math.ceil(200 / (groups * 2)))}`,
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

type Route = "owner" | "forwarded" | "single"

/** One path's run: its latencies, the members' CPU over the window, and per process the Sessions held and heap. */
interface Measured {
  readonly latencies: ReadonlyArray<number>
  /** How the timed requests of every agent reached their owner (`x-relax-forwarded-via`). */
  readonly via: { readonly spliced: number; readonly direct: number; readonly cluster: number; readonly none: number }
  readonly requests: number
  readonly cpuMs: number
  /** Each member's CPU over the window (runner 1, runner 2; or the single process). */
  readonly memberCpuMs: ReadonlyArray<number>
  /** The members' CPU per wall millisecond while idle (every agent at the barrier). */
  readonly idleRate: number
  readonly windowMs: number
  readonly held: ReadonlyArray<{ readonly sessions: number; readonly heap: number }>
}

/** Polls `done` every 100 ms (fails after `seconds`). */
const until = (what: string, seconds: number, done: () => boolean) =>
  Effect.gen(function*() {
    const since = performance.now()
    while (!done()) {
      if (performance.now() - since > seconds * 1000) return yield* Effect.fail(new Error(`timed out: ${what}`))
      yield* Effect.sleep("100 millis")
    }
  })

/** A TCP relay on 127.0.0.1 to the port `target()` gives at connection time; closed with the scope. */
const relay = (target: () => number) =>
  Effect.acquireRelease(
    Effect.callback<Net.Server>((resume) => {
      const server = Net.createServer((socket) => {
        const upstream = Net.connect(target(), "127.0.0.1")
        socket.pipe(upstream).pipe(socket)
        socket.on("error", () => upstream.destroy())
        upstream.on("error", () => socket.destroy())
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.sync(() => server.close())
  )

const portOf = (url: string): number => Number(new URL(url).port)

const measure = (path: Route, clients: number, requests: number) =>
  Effect.scoped(Effect.gen(function*() {
    const work = yield* Processes.workDir("relax-bench-cluster-")
    const env = { HOME: Processes.emptyHome() }
    const groups = Math.max(1, Math.round(clients / 2))
    const dir = (name: string) => {
      const p = Path.join(work, name)
      Fs.mkdirSync(p, { recursive: true })
      return p
    }
    const barrier = dir("barrier")
    const reports = dir("barrier/reports")
    const ready = dir("barrier/ready")
    const count = (d: string) => Fs.readdirSync(d).length
    let members: ReadonlyArray<Processes.Started>
    let latencyOf: ReadonlySet<string> | undefined
    let controller: Processes.Started
    let runners: ReadonlyArray<Processes.Runner> = []
    if (path === "single") {
      controller = yield* Processes.start(["rollout", ...flags(dir("single"), barrier, groups, requests)], env, inspect)
      members = [controller]
    } else {
      const db = yield* EmbeddedPg.start
      const ports = yield* EmbeddedPg.freePorts(2)
      let secondGateway = 0
      const relayed = yield* relay(() => secondGateway)
      const relayPort = (relayed.address() as Net.AddressInfo).port
      const runnerArgs = (i: number, extra: ReadonlyArray<string>) => [
        ...flags(dir(`runner${i}`), barrier, groups, requests),
        ...cluster(db.url),
        "--runner-address",
        `127.0.0.1:${ports[i - 1]!}`,
        ...extra
      ]
      const forwarded = path === "forwarded"
      const first = yield* Processes.runner(
        runnerArgs(
          1,
          forwarded ? ["--gateway-public-url", `http://127.0.0.1:${relayPort}${ModelRoute.mountPath}/`] : []
        ),
        env,
        inspect
      )
      const second = yield* Processes.runner(
        runnerArgs(2, forwarded ? ["--gateway-public-url", first.gatewayUrl] : []),
        env,
        inspect
      )
      secondGateway = portOf(second.gatewayUrl)
      runners = [first, second]
      members = runners
      controller = yield* Processes.start(
        ["rollout", ...flags(dir("controller"), barrier, groups, requests), ...cluster(db.url)],
        env
      )
    }
    yield* until("every agent at the barrier", 600, () => {
      if (controller.child.exitCode !== null) {
        throw new Error(`the controller exited:\n${controller.output().slice(-3000)}`)
      }
      return count(ready) >= groups * 2
    })
    // Runner 2's Sessions: their agents call runner 1 directly (in `forwarded`, runner 1's agents go through the relay).
    if (path === "forwarded") latencyOf = new Set(Processes.hostedBy(runners[1]!))
    const inspectors = yield* Effect.promise(() =>
      Promise.all(members.map((m) => ProcessCpu.connect(ProcessCpu.inspectorUrl(m.output())!)))
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => inspectors.forEach((i) => i.close())))
    const heaps = yield* Effect.promise(() => Promise.all(inspectors.map(ProcessCpu.heapUsed)))
    // CLUSTER_HEAPSNAPSHOT=<dir>: a heap snapshot of each member with every Session held (compare owner and single).
    const snapshotDir = process.env["CLUSTER_HEAPSNAPSHOT"]
    if (snapshotDir !== undefined && path !== "forwarded") {
      Fs.mkdirSync(snapshotDir, { recursive: true })
      yield* Effect.promise(() =>
        Promise.all(inspectors.map((inspector, i) =>
          inspector.call("Runtime.evaluate", {
            expression: `process.getBuiltinModule("v8").writeHeapSnapshot(${
              JSON.stringify(Path.join(snapshotDir, `${path}-${clients}-member${i + 1}.heapsnapshot`))
            })`,
            returnByValue: true
          })
        ))
      )
    }
    const held = members.map((m, i) => ({
      sessions: path === "single" ? groups * 2 : Processes.hostedBy(runners[i]!).length,
      heap: heaps[i]!
    }))
    const cpu = () => members.reduce((sum, m) => sum + ProcessCpu.cpuMillis(m.child.pid!), 0)
    // The members' CPU while every agent waits at the barrier (shard-lock renewals, the controller's Touch calls,
    // event streams): taken off the window's CPU, so a longer window does not count more background work.
    yield* Effect.sleep("500 millis")
    const idleBefore = cpu()
    const idleStarted = performance.now()
    yield* Effect.sleep("3 seconds")
    const idleRate = (cpu() - idleBefore) / (performance.now() - idleStarted)
    const perMember = () => members.map((m) => ProcessCpu.cpuMillis(m.child.pid!))
    const memberBefore = perMember()
    // CLUSTER_PROFILE: a CPU profile of each runner over the `forwarded` window (the profiler's cost is in its CPU).
    const profileDir = process.env["CLUSTER_PROFILE"]
    const profiling = profileDir !== undefined && path === "forwarded" ? inspectors : []
    yield* Effect.promise(() =>
      Promise.all(profiling.map(async (inspector) => {
        await inspector.call("Profiler.enable")
        await inspector.call("Profiler.setSamplingInterval", { interval: 200 })
        await inspector.call("Profiler.start")
      }))
    )
    const cpuBefore = cpu()
    const started = performance.now()
    Fs.writeFileSync(Path.join(barrier, "go"), "")
    yield* until("every agent's report", 600, () => count(reports) >= groups * 2).pipe(
      // What each member printed last, and which Sessions never reported, for a run that stalls.
      Effect.mapError((error) => {
        const missing = [...Fs.readdirSync(ready)].filter((s) => !Fs.existsSync(Path.join(reports, `${s}.json`)))
        return new Error(
          `${path}, ${clients} clients: ${error.message}; no report from ${missing.join(", ")}\n` +
            [...members, controller].map((m, i) => `--- process ${i + 1}\n${m.output().slice(-3000)}`).join("\n")
        )
      })
    )
    const windowMs = performance.now() - started
    const cpuMs = cpu() - cpuBefore
    const memberCpuMs = perMember().map((c, i) => c - memberBefore[i]!)
    if (profileDir !== undefined) {
      for (const [i, inspector] of profiling.entries()) {
        const stopped = (yield* Effect.promise(() => inspector.call("Profiler.stop"))) as { readonly profile: unknown }
        Fs.mkdirSync(profileDir, { recursive: true })
        Fs.writeFileSync(
          Path.join(profileDir, `forwarded-${clients}-runner${i + 1}.cpuprofile`),
          JSON.stringify(stopped.profile)
        )
      }
    }
    // A Node whose inspector still has a client at exit waits for it to disconnect.
    inspectors.forEach((i) => i.close())
    Fs.writeFileSync(Path.join(barrier, "done"), "")
    const code = yield* controller.exited
    if (code !== 0) return yield* Effect.fail(new Error(`exited ${code}:\n${controller.output().slice(-3000)}`))
    const read = Fs.readdirSync(reports).map((f) => ({
      session: f.replace(/\.json$/, ""),
      report: decodeReport(Fs.readFileSync(Path.join(reports, f), "utf8"))
    }))
    const latencies = read
      .filter(({ session }) => latencyOf === undefined || latencyOf.has(session))
      .flatMap(({ report }) => [...report.latencies])
    const via = { spliced: 0, direct: 0, cluster: 0, none: 0 }
    for (const { report } of read) {
      via.spliced += report.via.spliced
      via.direct += report.via.direct
      via.cluster += report.via.cluster
      via.none += report.via.none
    }
    return {
      latencies,
      via,
      requests: groups * 2 * requests,
      cpuMs,
      memberCpuMs,
      idleRate,
      windowMs,
      held
    } satisfies Measured
  }))

const ms = (n: number) => `${n.toFixed(2)} ms`
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

const rowsOf = (clients: number, runs: Readonly<Record<Route, Measured>>) => {
  const p50 = (p: Route) => percentile(runs[p].latencies, 50)
  const cpu = (p: Route) => runs[p].cpuMs / runs[p].requests
  const net = (p: Route) => (runs[p].cpuMs - runs[p].idleRate * runs[p].windowMs) / runs[p].requests
  const against: Record<Route, Route | undefined> = { owner: "single", forwarded: "owner", single: undefined }
  return (["owner", "forwarded", "single"] as const).map((p) => {
    const base = against[p]
    return {
      clients: String(clients),
      path: p,
      "requests (timed)": `${runs[p].requests} (${runs[p].latencies.length})`,
      "forwarded via spliced / direct / cluster": p === "forwarded"
        ? `${runs[p].via.spliced} / ${runs[p].via.direct} / ${runs[p].via.cluster}`
        : "",
      p50: ms(p50(p)),
      p90: ms(percentile(runs[p].latencies, 90)),
      "CPU / request": ms(cpu(p)),
      "vs": base ?? "",
      "p50 ratio": base === undefined ? "" : ratio(p50(p), p50(base)),
      "CPU ratio": base === undefined ? "" : ratio(cpu(p), cpu(base)),
      "idle CPU": `${(runs[p].idleRate * 100).toFixed(1)}%`,
      "CPU / request net of idle": ms(net(p)),
      "net ratio": base === undefined ? "" : ratio(net(p), net(base)),
      "CPU / request / process": runs[p].memberCpuMs.map((c) => ms(c / runs[p].requests)).join(" + "),
      "Sessions held / process": runs[p].held.map((h) => h.sessions).join(" + "),
      "heap used / process": runs[p].held.map((h) => mib(h.heap)).join(" + ")
    }
  })
}

const runAll = async (clients: number, requests: number) => {
  const runs = {} as Record<Route, Measured>
  for (const p of ["owner", "forwarded", "single"] as const) {
    runs[p] = await Effect.runPromise(measure(p, clients, requests))
  }
  return runs
}

/** CPU per request of a run, gross and net of its idle rate. */
const cpuPerRequest = (m: Measured) => ({
  gross: m.cpuMs / m.requests,
  net: (m.cpuMs - m.idleRate * m.windowMs) / m.requests
})

/**
 * `CLUSTER_ROUNDS` > 1: more `owner` / `forwarded` pairs after the first round, one after the other, for the spread
 * of the forwarded/owner CPU ratio (each run's CPU moves by tens of percent on a shared machine).
 */
const extraRounds = async (clients: number, requests: number, rounds: number) => {
  const ratios: Array<{ readonly gross: number; readonly net: number }> = []
  for (let round = 1; round < rounds; round++) {
    const owner = cpuPerRequest(await Effect.runPromise(measure("owner", clients, requests)))
    const forwarded = cpuPerRequest(await Effect.runPromise(measure("forwarded", clients, requests)))
    ratios.push({ gross: forwarded.gross / owner.gross, net: forwarded.net / owner.net })
  }
  return ratios
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The forwarded/owner CPU ratio of every round (the first is the table's) and their medians. */
const roundsNote = (
  clients: number,
  first: Readonly<Record<Route, Measured>>,
  more: ReadonlyArray<{
    readonly gross: number
    readonly net: number
  }>
): string => {
  const [owner, forwarded] = [cpuPerRequest(first.owner), cpuPerRequest(first.forwarded)]
  const all = [{ gross: forwarded.gross / owner.gross, net: forwarded.net / owner.net }, ...more]
  const list = (pick: (r: { readonly gross: number; readonly net: number }) => number) =>
    all.map((r) => ratio(pick(r), 1)).join(", ")
  return `${clients} clients, ${all.length} rounds: forwarded/owner CPU ${list((r) => r.gross)} (median ${
    ratio(median(all.map((r) => r.gross)), 1)
  }); net of idle ${list((r) => r.net)} (median ${ratio(median(all.map((r) => r.net)), 1)})`
}

/** Heap per Session: the growth of a process's used heap from the small run to the 64-client run, per Session added. */
const heapPerSession = (small: Measured, large: Measured): string => {
  const sessions = (m: Measured) => m.held.reduce((n, h) => n + h.sessions, 0)
  const heap = (m: Measured) => m.held.reduce((n, h) => n + h.heap, 0)
  return `${((heap(large) - heap(small)) / (sessions(large) - sessions(small)) / 1024).toFixed(0)} KiB`
}

export const bench: Harness.Bench = {
  name: "cluster",
  run: async ({ full }): Promise<Harness.BenchResult> => {
    const load = Os.loadavg()[0]!
    const rounds = Math.max(1, Number(process.env["CLUSTER_ROUNDS"] ?? 1))
    const small = await runAll(2, full ? 200 : 40)
    const smallRounds = await extraRounds(2, full ? 200 : 40, rounds)
    const large = await runAll(64, full ? 50 : 10)
    const largeRounds = await extraRounds(64, full ? 50 : 10, rounds)
    const loadAfter = Os.loadavg()[0]!
    return {
      title: "Cluster forwarding hop: a request at its owner runner vs forwarded by a non-owner vs one process",
      rows: [...rowsOf(2, small), ...rowsOf(64, large)],
      notes: [
        "owner: two runners, every agent calls the runner holding its Session; forwarded: every agent calls the other runner, which forwards (a Group's first request over the cluster, the next ones on a connection spliced to the owner's gateway, or relayed there: the timed requests' counts per way); single: one process, no cluster.",
        "Ratios: forwarded vs owner (target ≤ 1.3x, p50 and CPU), owner vs single. CPU / request: user+sys CPU of both runners (or the single process) over the timed window / requests; idle CPU: the same processes' CPU share over 3 s with every agent waiting at the barrier; net of idle: the window's CPU less that idle rate over the window, per request.",
        `Heap per Session (growth from 2 to 64 clients): cluster ${
          heapPerSession(small.owner, large.owner)
        } (both runners, owner run), ` +
        `single ${
          heapPerSession(small.single, large.single)
        }. Heap: heapUsed after a full collection with every Session held.`,
        ...(rounds > 1 ? [roundsNote(2, small, smallRounds), roundsNote(64, large, largeRounds)] : []),
        `Load average (1 min) before / after: ${load.toFixed(2)} / ${
          loadAfter.toFixed(2)
        } on ${Os.availableParallelism()} cores.`
      ]
    }
  }
}
