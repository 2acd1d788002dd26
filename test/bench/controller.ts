/**
 * `npm run bench -- controller`: one controller against many runners (issue 42, "Controller scale"): 100 runners ×
 * 100,000 Sessions a step (`full`; quick: 4 runners × 2,000). Prints the controller's CPU per Session, placement
 * latency p50 / p99 (a Group's `Reserve` until granted), PostgreSQL transactions per second (idle, with Sessions
 * held, during the step), the controller's CPU per held Session per second (its `Touch` calls and the runners' `Alive`
 * events), and the heap per held Session on a runner against the same Session held the single-process way.
 *
 * **Details**
 * The controller is this process: a client-only Effect Cluster member (TCP, `SqlRunnerStorage` / `SqlMessageStorage`
 * in an embedded PostgreSQL, as `rollout --cluster-database-url` joins) running the real `Remote` SessionRunner and
 * `Fleet`; the step is driven here the way the Group pool drives it (each Group placed, its Sessions' tickets on a
 * first-request barrier, the lease granted once every Session of the Group arrived), without the pool's own ledger
 * (planning, credit, Transfer: their cost per Session is the single-process one, `simulation`). The runners are real
 * cluster members with the real Group entity and `Host`, all in one child process (controllerRunners.ts) so this
 * process's CPU is the controller's alone; their agents are simulated (no processes; a Session ends as soon as it is
 * leased, `CONTROLLER_THINK_MS` later). The cluster needs the live clock (it sleeps and polls), so the step runs in
 * real time. Transactions: PostgreSQL's `pg_stat_database` commits and rollbacks over each window (a statement outside
 * a transaction counts once; membership polls, shard-lock renewals and message polls of every member). Heap: `heapUsed`
 * after full collections in the runners' process, with `hold` Sessions held (every agent waiting for its lease) less
 * without; single-process: the same simulated Sessions held in that process on a barrier's tickets, no cluster.
 * `CONTROLLER_CPUPROF=<file>` writes a CPU profile of the controller over the step, `CONTROLLER_HEAPSNAPSHOT=<dir>`
 * heap snapshots of the runners' process without and with the held Sessions (`test/bench/profile/heapDiff.mjs`).
 * `CONTROLLER_RUNNERS`, `CONTROLLER_SESSIONS`, `CONTROLLER_CONCURRENCY` (Groups in flight) override the sizes.
 */
import { NodeClusterSocket } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type ChildProcess, fork } from "node:child_process"
import * as Os from "node:os"
import * as Path from "node:path"
import { performance } from "node:perf_hooks"
import * as Fleet from "../../layers/cluster/Fleet.ts"
import * as Remote from "../../layers/cluster/Remote.ts"
import * as Credit from "../../layers/credit/Credit.ts"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as FirstRequestBarrier from "../../layers/schedule/FirstRequestBarrier.ts"
import { creditOptions } from "../../src/index.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Runners from "./controllerRunners.ts"
import * as Harness from "./harness.ts"
import * as Profiles from "./profiles.ts"

interface Sizes {
  readonly runners: number
  readonly sessions: number
  /** Sessions of a Group (`--n-samples-per-prompt`). */
  readonly groupSize: number
  /** Groups in flight at once (`--agentic-concurrency`). */
  readonly concurrency: number
  /** Sessions held for the heap and idle figures. */
  readonly hold: number
  readonly shards: number
}

const sizesOf = (full: boolean): Sizes => {
  const number = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
  const runners = number("CONTROLLER_RUNNERS", full ? 100 : 4)
  return {
    runners,
    sessions: number("CONTROLLER_SESSIONS", full ? 100_000 : 2_000),
    groupSize: 8,
    concurrency: number("CONTROLLER_CONCURRENCY", full ? 500 : 50),
    hold: Math.max(8, Math.round(Math.min(20 * runners, 2_000) / 8) * 8),
    shards: Math.max(64, runners * 3)
  }
}

const callTimeout = Duration.seconds(60)

interface RunnersProcess {
  readonly child: ChildProcess
  /** How long the runners took to join, milliseconds. */
  readonly startMs: number
  readonly ask: (command: Runners.Command) => Promise<Runners.Answer>
  readonly stderr: () => string
  /** How many of the runners' log lines matched each of {@link watchedLogs} so far. */
  readonly logged: () => ReadonlyMap<string, number>
}

/**
 * The runners' log lines the bench counts: a runner that dropped its shards because its lock storage did not answer in
 * time (its entities' calls are interrupted), shard moves that failed, Sessions reaped as orphans.
 */
const watchedLogs = [
  "Shard lock storage is unhealthy",
  "Could not acquire/release shards",
  "reaps Session",
  "Defect in entity"
]

/** The runners' process, and a request/answer over its IPC channel. */
const startRunners = (url: string, sizes: Sizes, thinkMs: number) =>
  Effect.acquireRelease(
    Effect.callback<RunnersProcess>(
      (resume) => {
        const child = fork(Path.join(import.meta.dirname, "controllerRunners.ts"), [], {
          env: {
            ...process.env,
            DATABASE_URL: url,
            RUNNERS: String(sizes.runners),
            SHARDS: String(sizes.shards),
            THINK_MS: String(thinkMs)
          },
          execArgv: ["--expose-gc", "--max-old-space-size=8192"],
          // The runners log a line per hosted Session, as a runner does; only the watched lines are counted.
          stdio: ["ignore", "pipe", "pipe", "ipc"]
        })
        let stderr = ""
        const logged = new Map<string, number>()
        const watch = () => {
          let rest = ""
          return (chunk: Buffer) => {
            const lines = (rest + chunk.toString()).split("\n")
            rest = lines.pop() ?? ""
            for (const line of lines) {
              for (const watched of watchedLogs) {
                if (line.includes(watched)) logged.set(watched, (logged.get(watched) ?? 0) + 1)
              }
            }
          }
        }
        child.stdout?.on("data", watch())
        const watchStderr = watch()
        child.stderr?.on("data", (chunk: Buffer) => {
          stderr = (stderr + chunk.toString()).slice(-4000)
          watchStderr(chunk)
        })
        const waiting: Array<(answer: Runners.Answer) => void> = []
        child.on("message", (message: { readonly ready?: number; readonly startMs?: number } & Runners.Answer) => {
          if (message.ready !== undefined) {
            resume(Effect.succeed({
              child,
              startMs: message.startMs ?? Number.NaN,
              ask: (command: Runners.Command) =>
                new Promise<Runners.Answer>((answered) => {
                  waiting.push(answered)
                  child.send(command)
                }),
              stderr: () => stderr,
              logged: () => logged
            }))
          } else {
            waiting.shift()?.(message)
          }
        })
        child.on("exit", (code) => {
          if (code !== 0 && code !== null) resume(Effect.die(new Error(`the runners exited ${code}:\n${stderr}`)))
        })
      }
    ),
    (runners) => Effect.sync(() => runners.child.kill("SIGKILL"))
  )

/** PostgreSQL's committed and rolled-back transactions so far, over every database. */
const transactions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<
    { readonly n: string }
  >`SELECT sum(xact_commit + xact_rollback)::text AS n FROM pg_stat_database`
  return Number(rows[0]?.n ?? Number.NaN)
}).pipe(Effect.orDie)

/** A window's rate: transactions per second and the controller's CPU milliseconds. */
const window = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    // pg_stat_database is updated as backends flush their counts (at most once a second).
    const before = yield* transactions
    const cpu = process.cpuUsage()
    const started = performance.now()
    const result = yield* body
    const used = process.cpuUsage(cpu)
    const cpuMs = (used.user + used.system) / 1000
    const wallMs = performance.now() - started
    yield* Effect.sleep("1200 millis")
    const perSecond = ((yield* transactions) - before - 2) / ((performance.now() - started) / 1000)
    return { result, cpuMs, wallMs, perSecond }
  })

interface Step {
  readonly placements: Array<number>
  /** When each placement started, milliseconds after the first. */
  readonly placedAt: Array<number>
  readonly failures: Array<string>
  sessions: number
}

/**
 * Run `groups` Groups of `size` simulated Sessions, `concurrency` Groups at once, as the Group pool would: place the
 * Group, make its Sessions' tickets on a first-request barrier, lease the Group once they all arrived (`onReady`;
 * `hold` instead waits for the caller's `release`).
 */
const runGroups = (
  runner: SessionRunner.SessionRunnerShape,
  options: {
    readonly from: number
    readonly groups: number
    readonly size: number
    readonly concurrency: number
    readonly hold?: { readonly ready: () => void; readonly release: Deferred.Deferred<void> }
  }
) =>
  Effect.gen(function*() {
    const step: Step = { placements: [], placedAt: [], failures: [], sessions: 0 }
    const began = performance.now()
    const newSessionId = runner.newSessionId
    if (newSessionId === undefined) return yield* Effect.die("the controller's runner places no Group")
    yield* Effect.forEach(
      Array.from({ length: options.groups }, (_, i) => options.from + i),
      (g) =>
        Effect.gen(function*() {
          const group: SessionRunner.PlannedGroup = {
            groupId: `train:prepare_group_${g}`,
            size: options.size,
            seq: g,
            mode: "train",
            row: 0,
            data: { prompt: "1+1" },
            promptIndex: g,
            firstIndex: g * options.size
          }
          const idOf = newSessionId(group)
          const placing = performance.now()
          const first = yield* idOf
          step.placements.push(performance.now() - placing)
          step.placedAt.push(placing - began)
          const sessionIds = [first]
          for (let i = 1; i < options.size; i++) sessionIds.push(yield* idOf)
          const lease = yield* Deferred.make<boolean>()
          const hold = options.hold
          const barrier = yield* FirstRequestBarrier.make({
            groupId: group.groupId,
            sessionIds,
            lease,
            rolloutId: () => 0,
            onReady: hold === undefined
              ? Deferred.succeed(lease, true).pipe(Effect.asVoid)
              : Effect.sync(hold.ready).pipe(
                Effect.andThen(Effect.forkDetach(
                  Deferred.await(hold.release).pipe(
                    Effect.andThen(Deferred.succeed(lease, true))
                  )
                ))
              ).pipe(Effect.asVoid)
          })
          yield* Effect.forEach(sessionIds, (_, i) =>
            runner.session(group, barrier.ticket(i)).pipe(
              Effect.exit,
              Effect.map((exit) => {
                step.sessions += 1
                if (Exit.isFailure(exit)) step.failures.push(String(exit.cause).slice(0, 300))
              })
            ), { concurrency: "unbounded", discard: true })
        }),
      { concurrency: options.concurrency, discard: true }
    )
    return step
  })

/** When the slowest 1% of a step's placements started: min–max seconds into the step. */
const slowestStarts = (step: Step): string => {
  const limit = Harness.percentile(step.placements, 99)
  const starts = step.placedAt.filter((_, i) => (step.placements[i] ?? 0) >= limit)
  return `${(Math.min(...starts) / 1000).toFixed(1)}–${(Math.max(...starts) / 1000).toFixed(1)}`
}

const percentileMs = (values: ReadonlyArray<number>, p: number) => Harness.formatMs(Harness.percentile(values, p))

const measure = (sizes: Sizes, thinkMs: number) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* EmbeddedPg.start
    const runners = yield* startRunners(db.url, sizes, thinkMs)
    const sql = PgClient.layer({ url: Redacted.make(db.url) })
    const member = NodeClusterSocket.layer({
      clientOnly: true,
      storage: "sql",
      shardingConfig: Runners.sharding(sizes.shards)
    })
    const fleet = Fleet.layer({ callTimeout, shards: sizes.shards }).pipe(Layer.provideMerge(member))
    const credit = Layer.unwrap(Effect.map(
      Effect.service(RolloutConfig.RolloutConfig),
      (settings) => Credit.Credit.layer(creditOptions(settings))
    )).pipe(Layer.provide(Layer.merge(Runners.settings, Telemetry.Telemetry.layer)), Layer.orDie)
    const controller = Remote.layer({ callTimeout, shards: sizes.shards }).pipe(
      Layer.provideMerge(fleet),
      Layer.provide(Layer.mergeAll(Runners.settings, credit)),
      Layer.provideMerge(sql),
      Layer.orDie
    )
    return yield* Effect.gen(function*() {
      const runner = yield* SessionRunner.SessionRunner
      // Every runner's shards are assigned once the controller has read the membership (refreshed every second).
      yield* Effect.sleep("3 seconds")
      const ask = (command: Runners.Command) => Effect.promise(() => runners.ask(command))
      const size = sizes.groupSize
      // Warm-up: every code path compiled before anything is measured.
      const warm = yield* runGroups(runner, {
        from: 0,
        groups: Math.max(4, sizes.runners),
        size,
        concurrency: sizes.concurrency
      })
      if (warm.failures.length > 0) return yield* Effect.die(new Error(`warm-up failed: ${warm.failures[0]}`))
      const idle = yield* window(Effect.sleep("5 seconds"))
      // CONTROLLER_HEAPSNAPSHOT=<dir>: heap snapshots of the runners' process without and with the held Sessions.
      const snapshots = process.env["CONTROLLER_HEAPSNAPSHOT"]
      const snapshot = (name: string) =>
        snapshots === undefined ? undefined : Path.join(snapshots, `${name}.heapsnapshot`)
      const emptyHeap = yield* ask({ cmd: "heap", snapshot: snapshot("runners-empty") })

      // Sessions held: every agent waits for its lease.
      const release = yield* Deferred.make<void>()
      const holdGroups = sizes.hold / size
      let ready = 0
      const held = yield* Effect.forkChild(runGroups(runner, {
        from: 1_000_000,
        groups: holdGroups,
        size,
        concurrency: holdGroups,
        hold: { ready: () => void (ready += 1), release }
      }))
      while (ready < holdGroups) yield* Effect.sleep("100 millis")
      const heldHeap = yield* ask({ cmd: "heap", snapshot: snapshot("runners-held") })
      const holding = yield* window(Effect.sleep("5 seconds"))
      yield* Deferred.succeed(release, undefined)
      const heldStep = yield* Fiber.join(held)
      if (heldStep.failures.length > 0) {
        return yield* Effect.die(
          new Error(
            `held: ${heldStep.failures.length} failed, the first: ${heldStep.failures[0]}; the runners logged ${
              JSON.stringify([...runners.logged()])
            }`
          )
        )
      }
      // The same Sessions held the single-process way, in the runners' process.
      const singleEmpty = yield* ask({ cmd: "heap" })
      const singleHeld = yield* ask({ cmd: "hold", count: sizes.hold, size })
      yield* ask({ cmd: "release" })

      const groups = Math.ceil(sizes.sessions / size)
      const stepRun = runGroups(runner, { from: 2_000_000, groups, size, concurrency: sizes.concurrency })
      const runnersBefore = yield* ask({ cmd: "load" })
      const paused = Runners.pauses()
      // CONTROLLER_CPUPROF=<file>: a CPU profile of the controller over the step.
      const profileFile = process.env["CONTROLLER_CPUPROF"]
      const step = yield* window(
        profileFile === undefined ? stepRun : Effect.flatMap(
          Effect.context<Effect.Services<typeof stepRun>>(),
          (context) =>
            Effect.promise(() =>
              Profiles.cpuProfile(profileFile, () => Effect.runPromise(Effect.provideContext(stepRun, context)))
            )
        )
      )
      const controllerPauses = paused.read()
      const runnersAfter = yield* ask({ cmd: "load" })
      return {
        idle,
        holding,
        step,
        startMs: runners.startMs,
        runnersCpuMs: runnersAfter.cpuMs - runnersBefore.cpuMs,
        runnersPauses: runnersAfter,
        controllerPauses,
        runnersLogged: [...runners.logged()].map(([line, n]) => `${n} × "${line}"`),
        runnerPerSession: (heldHeap.heap - emptyHeap.heap) / (heldHeap.hosted - emptyHeap.hosted),
        singlePerSession: (singleHeld.heap - singleEmpty.heap) / sizes.hold,
        hostedWhileHeld: heldHeap.hosted
      }
    }).pipe(Effect.provide(controller))
  }))

export const bench: Harness.Bench = {
  name: "controller",
  run: async ({ full }): Promise<Harness.BenchResult> => {
    const sizes = sizesOf(full)
    const thinkMs = Number(process.env["CONTROLLER_THINK_MS"] ?? 0)
    const load = Os.loadavg()[0]!
    const m = await Effect.runPromise(measure(sizes, thinkMs))
    const loadAfter = Os.loadavg()[0]!
    const { step } = m
    const sessions = step.result.sessions
    const cpuPerSession = (step.cpuMs * 1000) / sessions
    const p99 = Harness.percentile(step.result.placements, 99)
    return {
      title: `One controller, ${sizes.runners} runners × ${sessions.toLocaleString("en")} Sessions a step`,
      rows: [
        {
          measure: "Sessions completed / failed",
          value: `${sessions - step.result.failures.length} / ${step.result.failures.length}`
        },
        { measure: "step wall time", value: Harness.formatMs(step.wallMs) },
        { measure: `${sizes.runners} runners joined in`, value: Harness.formatMs(m.startMs) },
        { measure: "controller CPU per Session (target ≤ 200 µs)", value: `${cpuPerSession.toFixed(0)} µs` },
        {
          measure: "placement latency p50 / p99 (target p99 ≤ 1 s)",
          value: `${percentileMs(step.result.placements, 50)} / ${percentileMs(step.result.placements, 99)}`
        },
        {
          measure: "slowest 1% of placements started at (s into the step)",
          value: slowestStarts(step.result)
        },
        {
          measure: "CPU during the step: controller / runners' process",
          value: `${(step.cpuMs / step.wallMs * 100).toFixed(0)}% / ${
            (m.runnersCpuMs / step.wallMs * 100).toFixed(0)
          }% of a core`
        },
        {
          measure: "longest event-loop delay during the step: controller / runners",
          value: `${Harness.formatMs(m.controllerPauses.maxDelayMs)} / ${Harness.formatMs(m.runnersPauses.maxDelayMs)}`
        },
        {
          measure: "GC during the step, all / longest: controller; runners",
          value: `${Harness.formatMs(m.controllerPauses.gcMs)} / ${Harness.formatMs(m.controllerPauses.maxGcMs)}; ${
            Harness.formatMs(m.runnersPauses.gcMs)
          } / ${Harness.formatMs(m.runnersPauses.maxGcMs)}`
        },
        { measure: "PostgreSQL transactions/s idle", value: m.idle.perSecond.toFixed(0) },
        {
          measure: `PostgreSQL transactions/s with ${m.hostedWhileHeld} Sessions held`,
          value: m.holding.perSecond.toFixed(0)
        },
        { measure: "PostgreSQL transactions/s during the step", value: step.perSecond.toFixed(0) },
        {
          measure: "controller CPU per held Session per second",
          value: `${
            ((m.holding.cpuMs - m.idle.cpuMs) * 1000 / m.hostedWhileHeld / (m.holding.wallMs / 1000)).toFixed(1)
          } µs`
        },
        {
          measure: "controller CPU idle (per second)",
          value: `${(m.idle.cpuMs / (m.idle.wallMs / 1000)).toFixed(1)} ms`
        },
        { measure: "heap per held Session: runner", value: Harness.formatBytes(m.runnerPerSession) },
        { measure: "heap per held Session: single process", value: Harness.formatBytes(m.singlePerSession) },
        { measure: "  runner / single process", value: Harness.formatRatio(m.runnerPerSession / m.singlePerSession) }
      ],
      notes: [
        `Holds? 100,000 Sessions complete: ${
          sessions >= 100_000 && step.result.failures.length === 0 ? "yes" : "no (at this size)"
        }; controller CPU ≤ 200 µs a Session: ${cpuPerSession <= 200 ? "yes" : "no"}; placement p99 ≤ 1 s: ${
          p99 <= 1000 ? "yes" : "no"
        }.`,
        `${sizes.runners} runners in one child process (real Group entity and Host, simulated agents, think ${thinkMs} ms), ${sizes.shards} shards, Groups of ${sizes.groupSize}, ${sizes.concurrency} Groups in flight; the controller (this process) runs Remote + Fleet as a client-only member. Transactions: pg_stat_database commits + rollbacks over the window (every member's membership polls, lock renewals, message polls).`,
        "Heap per held Session: the runners' heapUsed with the held Sessions less without (full collections), per Session; single process: the same simulated Sessions held on a barrier's tickets in that process, no cluster — the agent here holds nothing, so the ratio is the cluster's own per-Session state over an empty Session's.",
        ...(step.result.failures.length > 0 ? [`first failure: ${step.result.failures[0]}`] : []),
        `The runners' watched log lines over the whole run: ${
          m.runnersLogged.length === 0 ? "none" : m.runnersLogged.join(", ")
        }.`,
        `Load average (1 min) before / after: ${load.toFixed(2)} / ${
          loadAfter.toFixed(2)
        } on ${Os.availableParallelism()} cores.`
      ]
    }
  }
}
