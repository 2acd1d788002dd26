/**
 * Runners of the `controller` benchmark (test/bench/controller.ts): a cluster runner on each port of `PORTS` in this
 * process (the bench deals its runners among several such processes: `CONTROLLER_RUNNER_PROCESSES`), each its own
 * Effect Cluster member (its own `Sharding`, TCP server on 127.0.0.1, shard locks in the bench's PostgreSQL) hosting the
 * real Group entity and `Host`, with simulated agents: a Session sends its first model request at once, waits for its
 * lease, "thinks" `THINK_MS` and ends with an empty result. No agent process, forest or engine work: what a runner
 * keeps per Session here is the cluster's and the Host's, which is what the bench compares.
 *
 * **Details**
 * The process's runners share one PostgreSQL pool (each runner's storage reserves one connection for its advisory
 * locks) and one set of rollout services (settings, the embedded engine they never call, the generation gate).
 * Commands come over the IPC channel: `heap` (a full collection, then the used heap and the hosted Sessions;
 * optionally a heap snapshot), `load` (CPU so far, and the pauses and stalls since the last answer), `hold` (`count`
 * Sessions held the single-process way: the same simulated agent on a first-request barrier's ticket, no cluster),
 * `release`. Once its runners joined it sends `ready` with their incarnation ids. The runners log their hosted Sessions,
 * as a runner does; this process counts the lines of {@link watchedLogs} itself (every answer carries the counts so
 * far), and its stdout goes nowhere, so reading and scanning 100,000 lines is not charged to the controller's process.
 * `CONTROLLER_RUNNERS_CPUPROF=<dir>` (`CONTROLLER_RUNNERS_HEAPPROF=<dir>`) profiles each runners' process over the step
 * (CPU; allocations with what the collector freed), from the bench's `load` before the step until the one after it;
 * `CONTROLLER_RUNNERS_IDLE_CPUPROF=<dir>` over the idle window (the 100 runners' cluster upkeep: membership polls,
 * lock renewals); with `CONTROLLER_RUNNERS_CPUPROF`, every `load` also writes the stalls since the last one on the
 * profile's clock (`<dir>/runners-<first port>-stalls-<n>.json`, for test/bench/profile/stalls.mjs).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Duration, Effect, Layer, Option, Redacted } from "effect"
import { RunnerAddress } from "effect/cluster"
import { writeFileSync } from "node:fs"
import { monitorEventLoopDelay, performance, PerformanceObserver } from "node:perf_hooks"
import { writeHeapSnapshot } from "node:v8"
import * as ClusterJoin from "../../layers/cluster/ClusterJoin.ts"
import * as Host from "../../layers/cluster/Host.ts"
import * as HostEntity from "../../layers/cluster/HostEntity.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as FirstRequestBarrier from "../../layers/schedule/FirstRequestBarrier.ts"
import * as GenerationGate from "../../layers/schedule/GenerationGate.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Retention from "../../src/schedule/Retention.ts"
import * as ClusterRollout from "../support/clusterRollout.ts"
import * as Harness from "./harness.ts"
import * as Profiles from "./profiles.ts"
import * as Stalls from "./stalls.ts"

/** The settings of the controller and every runner (the same, so their fingerprints agree). */
export const settings = RolloutConfig.RolloutConfig.layer({
  promptData: "unused.jsonl",
  agentCommand: "true",
  rolloutBatchSize: 1
})

/** The cluster's timings in the bench (the cluster tests' on a loaded 2-core machine: 20 s / 5 s). */
export const sharding = (shards: number) => ({
  shardsPerGroup: shards,
  shardLockExpiration: Duration.seconds(20),
  shardLockRefreshInterval: Duration.seconds(5),
  runnerHealthCheckInterval: Duration.seconds(10),
  refreshAssignmentsInterval: Duration.seconds(1),
  entityMessagePollInterval: Duration.seconds(1),
  entityTerminationTimeout: Duration.seconds(15)
})

/**
 * A simulated agent: first request at once, then its lease, `think` of work, and an empty result. `started` is told of
 * each Session as it starts.
 */
export const simulatedAgents = (think: Duration.Duration, started?: (sessionId: string) => void) =>
  ClusterRollout.hostedSessions((_group, ticket) =>
    Effect.sync(() => started?.(ticket.sessionId)).pipe(
      Effect.andThen(ticket.awaitLease),
      Effect.orDie,
      Effect.andThen(Duration.isZero(think) ? Effect.void : Effect.sleep(think)),
      Effect.as({ sessionId: ticket.sessionId, samples: [], debug: [] })
    )
  )

/** What the bench asks of this process, and what it answers. */
export type Command =
  | { readonly cmd: "heap"; readonly snapshot?: string | undefined }
  | { readonly cmd: "load" }
  /** The process's CPU around the idle window (`load` less the step's profile). */
  | { readonly cmd: "cpu" }
  | { readonly cmd: "hold"; readonly count: number; readonly size: number }
  | { readonly cmd: "release" }
export interface Answer {
  readonly heap: number
  readonly hosted: number
  /** This process's CPU so far (user + system), milliseconds. */
  readonly cpuMs: number
  /** The longest event-loop delay since the last answer, milliseconds. */
  readonly maxDelayMs: number
  /** Garbage collection since the last answer: all pauses and the longest, milliseconds. */
  readonly gcMs: number
  readonly maxGcMs: number
  /**
   * The event loop's stalls longer than {@link stallMs} since the last answer, longest first; `startMs` on the wall
   * clock (`performance.timeOrigin` added), so the bench compares them across processes.
   */
  readonly stalls: ReadonlyArray<Stalls.Stall>
  /**
   * Since the last answer: when each Group's first Session started here (its Session ids' `<group key>.<holder>`, on
   * the wall clock), for the placement latency.
   */
  readonly started: ReadonlyArray<readonly [string, number]>
  /** How many of this process's log lines matched each of {@link watchedLogs} so far. */
  readonly logged: ReadonlyArray<readonly [string, number]>
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

/**
 * Counts this process's output lines that match {@link watchedLogs}, on stdout and stderr (Effect's loggers write a line
 * at a time), passing every write on; the counts so far.
 */
const watchLogs = () => {
  const logged = new Map<string, number>()
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write
    stream.write = function(this: typeof stream, chunk: unknown, ...rest: Array<unknown>) {
      const text = typeof chunk === "string" ? chunk : chunk instanceof Uint8Array ? Buffer.from(chunk).toString() : ""
      for (const watched of watchedLogs) {
        if (text.includes(watched)) logged.set(watched, (logged.get(watched) ?? 0) + 1)
      }
      return Reflect.apply(write, this, [chunk, ...rest])
    } as typeof stream.write
  }
  return (): ReadonlyArray<readonly [string, number]> => [...logged]
}

/** The shortest event-loop stall {@link pauses} lists. */
export const stallMs = 100

/**
 * What stopped a process's event loop since the last `read`: the longest delay, garbage collection, and its stalls
 * (test/bench/stalls.ts: each with its GC and off-CPU part).
 */
export const pauses = () => {
  const delays = monitorEventLoopDelay({ resolution: 10 })
  delays.enable()
  const stalls = Stalls.watchStalls(stallMs)
  let gcMs = 0
  let maxGcMs = 0
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcMs += entry.duration
      maxGcMs = Math.max(maxGcMs, entry.duration)
    }
  }).observe({ entryTypes: ["gc"] })
  return {
    read: () => {
      const read = {
        maxDelayMs: delays.max / 1e6,
        gcMs,
        maxGcMs,
        stalls: stalls.stalls().map((stall) => ({ ...stall, startMs: performance.timeOrigin + stall.startMs }))
      }
      delays.reset()
      stalls.reset()
      gcMs = 0
      maxGcMs = 0
      return read
    },
    /** Stop watching (its timer would keep the process alive). */
    stop: () => stalls.stop()
  }
}

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`controllerRunners.ts needs ${name}`)
  return value
}

const main = Effect.gen(function*() {
  const logged = watchLogs()
  // The bench takes every runner's port at once (EmbeddedPg.freePorts), so the processes' ports differ.
  const ports = env("PORTS").split(",").map(Number)
  const runners = ports.length
  const shards = Number(env("SHARDS"))
  const think = Duration.millis(Number(env("THINK_MS")))
  const gc = Harness.garbageCollector()
  const sql = yield* Layer.build(
    PgClient.layer({ url: Redacted.make(env("DATABASE_URL")), maxConnections: runners + 10 })
  )
  const engine = EmbeddedEngine.EmbeddedEngine.layer(EmbeddedEngine.instant).pipe(
    Layer.provide(Tokenizer.Tokenizer.layer)
  )
  // When each Group's first Session started here (its ids up to the random part), wall clock.
  let started = new Map<string, number>()
  const start = (sessionId: string) => {
    const group = sessionId.slice(0, sessionId.lastIndexOf("."))
    if (!started.has(group)) started.set(group, performance.timeOrigin + performance.now())
  }
  const services = yield* Layer.build(Layer.mergeAll(
    settings,
    engine,
    simulatedAgents(think, start),
    GenerationGate.GenerationGate.layer(Retention.synchronous).pipe(Layer.provide(engine))
  ))
  const hosts: Array<Host.HostShape> = []
  const starting = performance.now()
  for (const port of ports) {
    const runner = HostEntity.layer.pipe(
      Layer.provideMerge(Host.Host.layer(`127.0.0.1:${port}`, () => Effect.die("the bench forwards nothing"))),
      Layer.provideMerge(ClusterJoin.member({
        shardingConfig: {
          ...sharding(shards),
          runnerAddress: Option.some(RunnerAddress.make("127.0.0.1", port))
        }
      })),
      Layer.provide(Layer.succeedContext(sql)),
      Layer.provide(Layer.succeedContext(services)),
      // Every runner its own Sharding, Host and entity registration (the layers are shared constants).
      Layer.fresh
    )
    const context = yield* Layer.build(runner)
    hosts.push(Context.get(context, Host.Host))
  }
  const startMs = performance.now() - starting
  const paused = pauses()

  // Sessions held the single-process way: the simulated agent on a barrier's ticket, waiting for its lease.
  const single = Context.get(services, SessionRunner.SessionRunner)
  let leases: Array<Deferred.Deferred<boolean>> = []
  const hold = (count: number, size: number) =>
    Effect.gen(function*() {
      for (let g = 0; g < count / size; g++) {
        const lease = yield* Deferred.make<boolean>()
        leases.push(lease)
        const sessionIds = Array.from({ length: size }, (_, i) => `single-${leases.length}-${i}`)
        const barrier = yield* FirstRequestBarrier.make({
          groupId: `single-${g}`,
          sessionIds,
          lease,
          rolloutId: () => 0,
          onReady: Effect.void
        })
        for (let i = 0; i < size; i++) {
          yield* Effect.forkDetach(single.session({
            groupId: `single-${g}`,
            size,
            seq: g,
            mode: "train",
            row: 0,
            data: { prompt: "1+1" },
            promptIndex: 0,
            firstIndex: 0
          }, barrier.ticket(i)))
        }
      }
      // Every fiber has reached its ticket's lease wait.
      yield* Effect.yieldNow
      yield* Effect.sleep("100 millis")
    })

  /**
   * A profile of one window, from the bench's command before it until the one after it has it written, as
   * `<dir>/runners-<first port>-<name>.cpuprofile` (CPU) or `.heapprofile` (allocation); each call after the first ends it.
   */
  const windowProfile = (name: string, cpuDir: string | undefined, heapDir?: string | undefined) => {
    let stopProfile: (() => void) | undefined
    let profiled: Promise<unknown> | undefined
    return (): Promise<unknown> => {
      if (profiled !== undefined) {
        stopProfile?.()
        return profiled
      }
      const window = () => new Promise<void>((resolve) => void (stopProfile = resolve))
      const file = `runners-${ports[0]}${name}`
      if (cpuDir !== undefined) profiled = Profiles.cpuProfile(`${cpuDir}/${file}.cpuprofile`, window)
      else if (heapDir !== undefined) profiled = Profiles.allocationProfile(`${heapDir}/${file}.heapprofile`, window)
      return Promise.resolve()
    }
  }
  // CONTROLLER_RUNNERS_CPUPROF=<dir> (CONTROLLER_RUNNERS_HEAPPROF=<dir>): a CPU (allocation) profile of each runners'
  // process over the step; CONTROLLER_RUNNERS_IDLE_CPUPROF=<dir>: a CPU profile over the idle window.
  const profileStep = windowProfile(
    "",
    process.env["CONTROLLER_RUNNERS_CPUPROF"],
    process.env["CONTROLLER_RUNNERS_HEAPPROF"]
  )
  const profileIdle = windowProfile("-idle", process.env["CONTROLLER_RUNNERS_IDLE_CPUPROF"])

  const stallDir = process.env["CONTROLLER_RUNNERS_CPUPROF"]
  let loads = 0
  const load = (): Answer => {
    const cpu = process.cpuUsage()
    const startedNow = [...started]
    started = new Map()
    const read = paused.read()
    if (stallDir !== undefined) {
      const stalls = Stalls.onProfileClock(read.stalls, `since load ${loads}`)
      writeFileSync(`${stallDir}/runners-${ports[0]}-stalls-${loads++}.json`, JSON.stringify(stalls))
    }
    return {
      heap: Number.NaN,
      hosted: Number.NaN,
      cpuMs: (cpu.user + cpu.system) / 1000,
      ...read,
      started: startedNow,
      logged: logged()
    }
  }
  const answer = (snapshot?: string): Effect.Effect<Answer> =>
    Effect.gen(function*() {
      for (let i = 0; i < 3; i++) gc?.()
      if (snapshot !== undefined) writeHeapSnapshot(snapshot)
      let hosted = 0
      for (const host of hosts) hosted += yield* host.hosted
      return { ...load(), heap: process.memoryUsage().heapUsed, hosted }
    })

  const send = (message: unknown) => Effect.sync(() => process.send?.(message))
  yield* Effect.callback<never>((resume) => {
    process.on("message", (message: Command) => {
      const run = message.cmd === "load"
        ? Effect.andThen(Effect.promise(profileStep), Effect.sync(load))
        : message.cmd === "cpu"
        ? Effect.andThen(Effect.promise(profileIdle), Effect.sync(load))
        : message.cmd === "heap"
        ? answer(message.snapshot)
        : message.cmd === "hold"
        ? Effect.andThen(hold(message.count, message.size), answer())
        : Effect.gen(function*() {
          for (const lease of leases) yield* Deferred.succeed(lease, true)
          leases = []
          yield* Effect.sleep("200 millis")
          return yield* answer()
        })
      Effect.runFork(Effect.flatMap(run, send))
    })
    process.on("disconnect", () => resume(Effect.die("the bench went away")))
    process.send?.({ ready: runners, startMs, incarnations: hosts.map((host) => host.incarnation) })
  })
})

if (import.meta.main) {
  Effect.runPromise(Effect.scoped(main)).then(() => process.exit(0), (error: unknown) => {
    console.error(error)
    process.exit(1)
  })
}
