/**
 * `npm run bench -- controller`: one controller against many runners (issue 42, "Controller scale"): 100 runners ×
 * 100,000 Sessions a step (`full`; quick: 4 runners × 2,000). Prints the controller's CPU per Session, placement
 * latency p50 / p99 (from the start of a Group's placement until its runner started its first Session, on the wall
 * clock both processes share; and until the runner's first answer, which carries its agents' first requests), PostgreSQL transactions per second (idle, with Sessions
 * held, during the step), the controller's CPU per held Session per second (its `Touch` calls and the runners' `Alive`
 * events), and the heap per held Session on a runner against the same Session held the single-process way.
 *
 * **Details**
 * The controller is this process: a client-only Effect Cluster member (TCP, `SqlRunnerStorage` in an embedded
 * PostgreSQL, as `rollout --cluster-database-url` joins) running the real `Remote` SessionRunner and
 * `Fleet`; the step is driven here the way the Group pool drives it (each Group placed, its Sessions' tickets on a
 * first-request barrier, the lease granted once every Session of the Group arrived), without the pool's own ledger
 * (planning, credit, Transfer: their cost per Session is the single-process one, `simulation`). The runners are real
 * cluster members with the real Group entity and `Host`, dealt among child processes (controllerRunners.ts;
 * `CONTROLLER_RUNNER_PROCESSES` sets how many; by default one for every 25 runners, no more than the cores beyond the
 * controller's) so this process's CPU is the controller's alone, and each runners' event loop serves fewer runners
 * where there are cores for them (in a deployment each runner is a process of its own); their agents are simulated (no
 * processes; a Session ends as soon as it is leased, `CONTROLLER_THINK_MS` later). The cluster needs the live clock
 * (it sleeps and polls), so the step runs in real time. Transactions: PostgreSQL's `pg_stat_database` commits and
 * rollbacks over each window (a statement outside a transaction counts once; membership polls and shard-lock renewals of
 * every member; the members have no message storage). Heap: `heapUsed` after full collections in every runners'
 * process, with `hold` Sessions held (every agent waiting for its lease) less without, summed over the processes, per hosted Session;
 * single-process: the same simulated Sessions held in the first runners' process on a barrier's tickets, no cluster.
 * Stalls: every process lists its event-loop stalls over 100 ms (test/bench/stalls.ts), and the slowest 1% of
 * placements are read against the controller's and against those of the process holding their runner.
 * `CONTROLLER_CPUPROF=<file>` writes a CPU profile of the controller over the step (`CONTROLLER_STALL_LOG=<file>` its
 * stalls on the profile's clock, for `test/bench/profile/stalls.mjs`), `CONTROLLER_IDLE_CPUPROF=<file>` one over the
 * idle window, `CONTROLLER_HEAPSNAPSHOT=<dir>` heap snapshots
 * of each runners' process without and with the held Sessions (`runners-empty-<n>`, `runners-held-<n>`;
 * `test/bench/profile/heapDiff.mjs`). `CONTROLLER_RUNNERS_NICE` sets the runners' processes' nice value (default 0).
 * `CONTROLLER_RUNNERS`, `CONTROLLER_SESSIONS`, `CONTROLLER_CONCURRENCY` (Groups in flight) override the sizes.
 */
import { PgClient } from "@effect/sql-pg"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type ChildProcess, fork } from "node:child_process"
import { writeFileSync } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { performance } from "node:perf_hooks"
import * as ClusterJoin from "../../layers/cluster/ClusterJoin.ts"
import * as Fleet from "../../layers/cluster/Fleet.ts"
import * as Remote from "../../layers/cluster/Remote.ts"
import * as Credit from "../../layers/credit/Credit.ts"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as FirstRequestBarrier from "../../layers/schedule/FirstRequestBarrier.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import { creditOptions } from "../../src/index.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Runners from "./controllerRunners.ts"
import * as Harness from "./harness.ts"
import * as Profiles from "./profiles.ts"
import * as Stalls from "./stalls.ts"

interface Sizes {
  readonly runners: number
  /** Processes the runners are dealt among (each its own event loop and heap, as every runner is in a deployment). */
  readonly runnerProcesses: number
  /** The runners' processes' nice value (`CONTROLLER_RUNNERS_NICE`; 0: the controller's). */
  readonly runnersNice: number
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
    runnerProcesses: Math.min(runners, number("CONTROLLER_RUNNER_PROCESSES", defaultRunnerProcesses(runners))),
    runnersNice: number("CONTROLLER_RUNNERS_NICE", 0),
    sessions: number("CONTROLLER_SESSIONS", full ? 100_000 : 2_000),
    groupSize: 8,
    concurrency: number("CONTROLLER_CONCURRENCY", full ? 500 : 50),
    hold: Math.max(8, Math.round(Math.min(20 * runners, 2_000) / 8) * 8),
    shards: Math.max(64, runners * 3)
  }
}

const callTimeout = Duration.seconds(60)

/**
 * The runners' processes by default (`CONTROLLER_RUNNER_PROCESSES` overrides): one for every 25 runners, no more than
 * the cores beyond the controller's: 1 on the 2-core machine of the documented figures, 4 at 100 runners on 5 cores or
 * more. Every runners' process takes its share of the cores from the controller: at 100 × 100,000 on 2 shared cores,
 * 4 processes left the controller 38% of a core and a placement p99 of 2.7 s, and 2 against 1 back to back gave
 * 0.91 / 1.34 s against 0.79 / 1.66 s (docs/performance.md, section 6, "The runners across processes").
 */
const defaultRunnerProcesses = (runners: number) =>
  Math.max(1, Math.min(Math.ceil(runners / 25), Os.availableParallelism() - 1))

interface RunnersProcess {
  readonly child: ChildProcess
  /** How long this process's runners took to join, one after another, milliseconds. */
  readonly startMs: number
  /** Its runners' incarnation ids (a Session id names its holder's). */
  readonly incarnations: ReadonlyArray<string>
  readonly ask: (command: Runners.Command) => Promise<Runners.Answer>
  readonly stderr: () => string
}

/** One runners' process (controllerRunners.ts) with a runner on each of `ports`, and a request/answer over its IPC channel. */
const startRunnersProcess = (url: string, ports: ReadonlyArray<number>, sizes: Sizes, thinkMs: number) =>
  Effect.acquireRelease(
    Effect.callback<RunnersProcess>(
      (resume) => {
        const child = fork(Path.join(import.meta.dirname, "controllerRunners.ts"), [], {
          env: {
            ...process.env,
            DATABASE_URL: url,
            PORTS: ports.join(","),
            SHARDS: String(sizes.shards),
            THINK_MS: String(thinkMs)
          },
          execArgv: ["--expose-gc", "--max-old-space-size=8192"],
          // The runners log a line per placing message (naming its hosted Sessions), as a runner does: they count the
          // watched lines themselves (`Answer.logged`) and their stdout goes nowhere, so reading it costs this process
          // (the controller) nothing.
          stdio: ["ignore", "ignore", "pipe", "ipc"]
        })
        if (child.pid !== undefined && sizes.runnersNice !== 0) Os.setPriority(child.pid, sizes.runnersNice)
        let stderr = ""
        child.stderr?.on("data", (chunk: Buffer) => {
          stderr = (stderr + chunk.toString()).slice(-4000)
        })
        const waiting: Array<(answer: Runners.Answer) => void> = []
        child.on("message", (
          message: {
            readonly ready?: number
            readonly startMs?: number
            readonly incarnations?: ReadonlyArray<string>
          } & Runners.Answer
        ) => {
          if (message.ready !== undefined) {
            resume(Effect.succeed({
              child,
              startMs: message.startMs ?? Number.NaN,
              incarnations: message.incarnations ?? [],
              ask: (command: Runners.Command) =>
                new Promise<Runners.Answer>((answered) => {
                  waiting.push(answered)
                  child.send(command)
                }),
              stderr: () => stderr
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

/** The runners' processes together: what each answered, summed (heap, Sessions, CPU) or the worst (pauses). */
const combined = (answers: ReadonlyArray<Runners.Answer>): Runners.Answer => ({
  heap: answers.reduce((sum, a) => sum + a.heap, 0),
  hosted: answers.reduce((sum, a) => sum + a.hosted, 0),
  cpuMs: answers.reduce((sum, a) => sum + a.cpuMs, 0),
  maxDelayMs: Math.max(...answers.map((a) => a.maxDelayMs)),
  gcMs: answers.reduce((sum, a) => sum + a.gcMs, 0),
  maxGcMs: Math.max(...answers.map((a) => a.maxGcMs)),
  stalls: answers.flatMap((a) => a.stalls),
  started: answers.flatMap((a) => a.started),
  logged: [...answers.reduce((sum, a) => {
    for (const [line, n] of a.logged) sum.set(line, (sum.get(line) ?? 0) + n)
    return sum
  }, new Map<string, number>())]
})

/**
 * `sizes.runnerProcesses` runners' processes, the runners dealt among them in turn (each runner's port taken here, all
 * at once, so they differ); started side by side.
 */
const startRunners = (url: string, sizes: Sizes, thinkMs: number) =>
  Effect.gen(function*() {
    const ports = yield* EmbeddedPg.freePorts(sizes.runners)
    const dealt = Array.from(
      { length: sizes.runnerProcesses },
      (_, p) => ports.filter((_, i) => i % sizes.runnerProcesses === p)
    )
    const started = performance.now()
    const processes = yield* Effect.forEach(dealt, (own) => startRunnersProcess(url, own, sizes, thinkMs), {
      concurrency: "unbounded"
    })
    const all = (command: Runners.Command) => Promise.all(processes.map((p) => p.ask(command)))
    const processOf = new Map(
      processes.flatMap((p, i) => p.incarnations.map((incarnation) => [incarnation, i] as const))
    )
    return {
      /** Which process (its index) holds the runner of incarnation `runner`. */
      processOf: (runner: string) => processOf.get(runner),
      /** Every process answers `command`; the answers, in the processes' order. */
      each: all,
      /** From the first fork until every process's runners joined, milliseconds. */
      startMs: performance.now() - started,
      /** The slowest process's own join time (its runners join one after another), milliseconds. */
      slowestProcessMs: Math.max(...processes.map((p) => p.startMs)),
      /** Every process answers `command`; the answers combined. */
      ask: (command: Runners.Command) => all(command).then(combined),
      /** `heap` of every process, each its own snapshot file (`<name>-<process>.heapsnapshot`) when asked for. */
      heap: (snapshot: (name: string) => string | undefined, name: string) =>
        Promise.all(processes.map((p, i) => p.ask({ cmd: "heap", snapshot: snapshot(`${name}-${i + 1}`) }))).then(
          combined
        ),
      /** The first process alone (the single-process comparison holds its Sessions there). */
      first: (command: Runners.Command) => processes[0]!.ask(command)
    }
  })

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
  /** When each placement started on the wall clock, ms (compared with the processes' stalls). */
  readonly placedAtWall: Array<number>
  /** The runner that took each placement (its incarnation). */
  readonly placedOn: Array<string>
  /** Each placement's Group as its Session ids name it (`<group key>.<holder>`), its runner's record of its start. */
  readonly placedAs: Array<string>
  readonly failures: Array<string>
  sessions: number
  /** Placements that did not take (refused at the Group's first poll) and were made again. */
  replaced: number
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
    const step: Step = {
      placements: [],
      placedAt: [],
      placedAtWall: [],
      placedOn: [],
      placedAs: [],
      failures: [],
      sessions: 0,
      replaced: 0
    }
    const began = performance.now()
    const newSessionId = runner.newSessionId
    if (newSessionId === undefined) return yield* Effect.die("the controller's runner places no Group")
    // As the pool mints a Group's ids: the whole Group at a placement its first poll confirms, where the runner can.
    const newGroupIds = runner.group === undefined ? undefined : runner.newGroupIds
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
          const placing = performance.now()
          const placingWall = performance.timeOrigin + placing
          let placed = false
          /**
           * The runner took the Group (its `Reserve` granted, or the first answer to its first poll): until then, for
           * now; the step's figure is until its runner started it (`placedAs`, from the runners' record).
           */
          const took = (sessionId: string) => {
            if (placed) return
            placed = true
            step.placements.push(performance.now() - placing)
            step.placedAt.push(placing - began)
            step.placedAtWall.push(placingWall)
            step.placedOn.push(Routing.holderOf(sessionId) ?? "")
            step.placedAs.push(sessionId.slice(0, sessionId.lastIndexOf(".")))
          }
          const ended = (exit: Exit.Exit<unknown, unknown>) =>
            Effect.sync(() => {
              step.sessions += 1
              if (Exit.isFailure(exit)) step.failures.push(String(exit.cause).slice(0, 300))
            })
          // A Group whose placement did not take (`refused`) is placed again under new ids, as the pool does.
          while (true) {
            let sessionIds: ReadonlyArray<string>
            if (newGroupIds === undefined) {
              const idOf = newSessionId(group)
              const first = yield* idOf
              took(first)
              const ids = [first]
              for (let i = 1; i < options.size; i++) ids.push(yield* idOf)
              sessionIds = ids
            } else sessionIds = yield* newGroupIds(group)
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
            const tickets = sessionIds.map((_, i) => barrier.ticket(i))
            // The first answer of a placing poll carries the Group's first requests (the agents ask at once).
            const arrive = (position: number) =>
              Effect.suspend(() => {
                took(sessionIds[0] ?? "")
                return barrier.arrive(position)
              })
            // As the pool does: the whole Group at once where the runner can (`group`), else one fiber a Session.
            const ran = runner.group === undefined
              ? yield* Effect.forEach(
                tickets,
                (ticket) => Effect.flatMap(Effect.exit(runner.session(group, ticket)), ended),
                { concurrency: "unbounded", discard: true }
              )
              : yield* runner.group(group, { tickets, arrive }, (_, exit) => ended(exit))
            if (ran !== "refused") return
            step.replaced += 1
          }
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

/**
 * Where the slowest 1% of a step's placements waited: the mean of the time each spent inside event-loop stalls of the
 * controller and of the runners' process holding the runner that took it, against its own mean.
 */
const slowestInStalls = (
  step: Step,
  controller: ReadonlyArray<Stalls.Stall>,
  runnersOf: (runner: string) => ReadonlyArray<Stalls.Stall>
): string => {
  const limit = Harness.percentile(step.placements, 99)
  const slow = step.placements.flatMap((ms, i) =>
    ms >= limit ? [{ from: step.placedAtWall[i]!, to: step.placedAtWall[i]! + ms, runner: step.placedOn[i]! }] : []
  )
  // The union of the stalls within [from, to], milliseconds.
  const inside = (stalls: ReadonlyArray<Stalls.Stall>, { from, to }: (typeof slow)[number]) => {
    const cut = stalls.map((s) => [Math.max(s.startMs, from), Math.min(s.startMs + s.durationMs, to)] as const)
      .filter(([a, b]) => b > a)
      .sort((x, y) => x[0] - y[0])
    let total = 0
    let end = -Infinity
    for (const [a, b] of cut) {
      if (b <= end) continue
      total += b - Math.max(a, end)
      end = b
    }
    return total
  }
  const mean = (f: (w: (typeof slow)[number]) => number) => slow.reduce((sum, w) => sum + f(w), 0) / slow.length
  return `${Harness.formatMs(mean((w) => inside(controller, w)))} / ${
    Harness.formatMs(mean((w) => inside(runnersOf(w.runner), w)))
  } of ${Harness.formatMs(mean((w) => w.to - w.from))}`
}

const percentileMs = (values: ReadonlyArray<number>, p: number) => Harness.formatMs(Harness.percentile(values, p))

/** `effect` under the CPU profiler when `file` is set (the profile written there), else as it is. */
const profiled = <A, E, R>(file: string | undefined, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  file === undefined ? effect : Effect.flatMap(
    Effect.context<R>(),
    (context) =>
      Effect.promise(() => Profiles.cpuProfile(file, () => Effect.runPromise(Effect.provideContext(effect, context))))
  )

/** `effect` under the sampling heap profiler when `file` is set (the allocation profile written there). */
const allocationProfiled = <A, E, R>(
  file: string | undefined,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  file === undefined ? effect : Effect.flatMap(
    Effect.context<R>(),
    (context) =>
      Effect.map(
        Effect.promise(() =>
          Profiles.allocationProfile(file, () => Effect.runPromise(Effect.provideContext(effect, context)))
        ),
        ({ result }) => result
      )
  )

const measure = (sizes: Sizes, thinkMs: number) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* EmbeddedPg.start
    const runners = yield* startRunners(db.url, sizes, thinkMs)
    const sql = PgClient.layer({ url: Redacted.make(db.url) })
    const member = ClusterJoin.member({ clientOnly: true, shardingConfig: Runners.sharding(sizes.shards) })
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
      // CONTROLLER_IDLE_CPUPROF=<file>: a CPU profile of the controller over the idle window.
      const runnersIdleBefore = yield* ask({ cmd: "cpu" })
      const idle = yield* window(profiled(process.env["CONTROLLER_IDLE_CPUPROF"], Effect.sleep("5 seconds")))
      const runnersIdleCpuMs = (yield* ask({ cmd: "cpu" })).cpuMs - runnersIdleBefore.cpuMs
      // CONTROLLER_HEAPSNAPSHOT=<dir>: heap snapshots of each runners' process without and with the held Sessions.
      const snapshots = process.env["CONTROLLER_HEAPSNAPSHOT"]
      const snapshot = (name: string) =>
        snapshots === undefined ? undefined : Path.join(snapshots, `${name}.heapsnapshot`)
      const emptyHeap = yield* Effect.promise(() => runners.heap(snapshot, "runners-empty"))

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
      const heldHeap = yield* Effect.promise(() => runners.heap(snapshot, "runners-held"))
      const holding = yield* window(Effect.sleep("5 seconds"))
      yield* Deferred.succeed(release, undefined)
      const heldStep = yield* Fiber.join(held)
      if (heldStep.failures.length > 0) {
        return yield* Effect.die(
          new Error(
            `held: ${heldStep.failures.length} failed, the first: ${heldStep.failures[0]}; the runners logged ${
              JSON.stringify((yield* ask({ cmd: "load" })).logged)
            }`
          )
        )
      }
      // The same Sessions held the single-process way, in the first runners' process.
      const first = (command: Runners.Command) => Effect.promise(() => runners.first(command))
      const singleEmpty = yield* first({ cmd: "heap" })
      const singleHeld = yield* first({ cmd: "hold", count: sizes.hold, size })
      yield* first({ cmd: "release" })

      const groups = Math.ceil(sizes.sessions / size)
      const stepRun = runGroups(runner, { from: 2_000_000, groups, size, concurrency: sizes.concurrency })
      const runnersBefore = yield* ask({ cmd: "load" })
      const paused = Runners.pauses()
      // CONTROLLER_CPUPROF=<file>: a CPU profile of the controller over the step.
      // CONTROLLER_HEAPPROF=<file>: an allocation profile of the controller over the step.
      const step = yield* window(
        allocationProfiled(process.env["CONTROLLER_HEAPPROF"], profiled(process.env["CONTROLLER_CPUPROF"], stepRun))
      )
      const controllerPauses = paused.read()
      paused.stop()
      // CONTROLLER_STALL_LOG=<file>: the controller's stalls over the step on the clock of its CPU profile
      // (CONTROLLER_CPUPROF), for test/bench/profile/stalls.mjs.
      const stallLog = process.env["CONTROLLER_STALL_LOG"]
      if (stallLog !== undefined) {
        writeFileSync(stallLog, JSON.stringify(Stalls.onProfileClock(controllerPauses.stalls, "step")))
      }
      const afterEach = yield* Effect.promise(() => runners.each({ cmd: "load" }))
      const runnersAfter = combined(afterEach)
      // A placement's latency: until its runner started the Group's first Session (as that runner recorded it).
      const started = new Map(runnersAfter.started)
      const answered = [...step.result.placements]
      step.result.placedAs.forEach((group, i) => {
        const at = started.get(group)
        if (at !== undefined) step.result.placements[i] = at - step.result.placedAtWall[i]!
      })
      const stallsOf = (runner: string) => afterEach[runners.processOf(runner) ?? -1]?.stalls ?? []
      return {
        idle,
        runnersIdleCpuMs,
        holding,
        step,
        startMs: runners.startMs,
        slowestProcessMs: runners.slowestProcessMs,
        runnersCpuMs: runnersAfter.cpuMs - runnersBefore.cpuMs,
        answered,
        runnersPauses: runnersAfter,
        stallsOf,
        worstRunnersStalls: afterEach.map((a) => a.stalls).sort((a, b) =>
          (b[0]?.durationMs ?? 0) - (a[0]?.durationMs ?? 0)
        )[0] ?? [],
        controllerPauses,
        runnersLogged: runnersAfter.logged.map(([line, n]) => `${n} × "${line}"`),
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
        {
          measure:
            `${sizes.runners} runners joined in (${sizes.runnerProcesses} processes side by side / the slowest's own)`,
          value: `${Harness.formatMs(m.startMs)} / ${Harness.formatMs(m.slowestProcessMs)}`
        },
        { measure: "controller CPU per Session (target ≤ 200 µs)", value: `${cpuPerSession.toFixed(0)} µs` },
        {
          measure: "placement latency p50 / p99 (target p99 ≤ 1 s)",
          value: `${percentileMs(step.result.placements, 50)} / ${percentileMs(step.result.placements, 99)}`
        },
        {
          measure: "until the runner's first answer p50 / p99 (its agents' first requests)",
          value: `${percentileMs(m.answered, 50)} / ${percentileMs(m.answered, 99)}`
        },
        { measure: "placements refused at a Group's first poll and made again", value: `${step.result.replaced}` },
        {
          measure: "slowest 1% of placements started at (s into the step)",
          value: slowestStarts(step.result)
        },
        {
          measure:
            `slowest 1% of placements: mean time inside event-loop stalls > ${Runners.stallMs} ms, controller / runners`,
          value: slowestInStalls(step.result, m.controllerPauses.stalls, m.stallsOf)
        },
        {
          measure: `controller's event-loop stalls > ${Runners.stallMs} ms during the step`,
          value: Stalls.describeStalls(m.controllerPauses.stalls, Runners.stallMs)
        },
        {
          measure: `runners' event-loop stalls > ${Runners.stallMs} ms during the step (the process with the longest)`,
          value: Stalls.describeStalls(m.worstRunnersStalls, Runners.stallMs)
        },
        {
          measure: "CPU during the step: controller / runners' processes together",
          value: `${(step.cpuMs / step.wallMs * 100).toFixed(0)}% / ${
            (m.runnersCpuMs / step.wallMs * 100).toFixed(0)
          }% of a core`
        },
        {
          measure: "longest event-loop delay during the step: controller / runners (the worst process)",
          value: `${Harness.formatMs(m.controllerPauses.maxDelayMs)} / ${Harness.formatMs(m.runnersPauses.maxDelayMs)}`
        },
        {
          measure: "GC during the step, all / longest: controller; runners (every process)",
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
        {
          measure: "runners' processes' CPU idle (per second, together)",
          value: `${(m.runnersIdleCpuMs / (m.idle.wallMs / 1000)).toFixed(1)} ms`
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
        `${sizes.runners} runners in ${sizes.runnerProcesses} child process(es) at nice ${sizes.runnersNice} (real Group entity and Host, simulated agents, think ${thinkMs} ms), ${sizes.shards} shards, Groups of ${sizes.groupSize}, ${sizes.concurrency} Groups in flight; the controller (this process) runs Remote + Fleet as a client-only member. Transactions: pg_stat_database commits + rollbacks over the window (every member's membership polls and lock renewals; no message storage).`,
        "Heap per held Session: the runners' processes' heapUsed with the held Sessions less without (full collections in each; summed over the processes), per Session; single process: the same simulated Sessions held on a barrier's tickets in the first runners' process, no cluster — the agent here holds nothing, so the ratio is the cluster's own per-Session state over an empty Session's.",
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
