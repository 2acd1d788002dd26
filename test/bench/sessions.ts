/**
 * Many concurrent Sessions in one gateway process: 10,000 (`full`; 2,000 quick) Sessions each with a committed
 * first turn, then one held streaming request each (waiting for its lease, heartbeats running every second), while
 * one more agent sends a 1 MB message. Reports heap per Session, bytes per stored token and event-loop stalls.
 *
 * **Details**
 * First turns go through the generation core directly (a ~2 KB, 6-message history each, with its body's raw-history
 * mark as the gateway keeps it); held requests come over HTTP from the load generator in its own process and repeat
 * that history byte for byte, as an agent does. Heap numbers are `heapUsed + external` after full collections.
 * Stalls are the event-loop delay histogram's maximum (perf_hooks, 10 ms resolution), per phase. The load generator
 * runs at the lowest CPU priority (`nice -n 19`; `SESSIONS_LOAD_NICE=0` runs it at the gateway's): it is not the
 * system under test, and on the 2 cores shared with the gateway its ~0.7 core while 10,000 requests arrive and their
 * heartbeats come in otherwise takes the gateway's main thread off the CPU for tens of milliseconds (the "CPU while
 * requests arrive" row, docs/performance.md "Issue 41, sixth pass").
 *
 * To see what a held request keeps: `HEAP_SNAPSHOTS=<dir>` writes `before.heapsnapshot` (every Session's first turn
 * committed, nothing held) and `after.heapsnapshot` (every request held) there, for `test/bench/profile/heapDiff.mjs`
 * and `test/bench/profile/heldRequest.mjs` (writing them pauses the process: not a run for the stall rows).
 * `SESSIONS_PHASES=1` prints a line where each phase starts and ends, to read `--trace-gc` output per phase.
 */
import { Context, Deferred, Effect, Result } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { monitorEventLoopDelay, performance } from "node:perf_hooks"
import { writeHeapSnapshot } from "node:v8"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import * as Child from "./child.ts"
import * as Conversation from "./conversation.ts"
import * as CpuShare from "./cpuShare.ts"
import * as Harness from "./harness.ts"
import type * as LoadClient from "./loadClient.ts"
import * as Servers from "./servers.ts"
import * as Stalls from "./stalls.ts"

const HISTORY = Conversation.conversation(6, 300)
const BIG_MESSAGE_BYTES = 1024 * 1024
/** The load generator's `nice` value (19: the lowest priority). */
const LOAD_NICE = Number(process.env["SESSIONS_LOAD_NICE"] ?? 19)
// 1 s, 15 times the gateway's default rate (10,000 heartbeats a second); SESSIONS_HEARTBEAT_MS=15000 runs the default.
const HEARTBEAT_MS = Number(process.env["SESSIONS_HEARTBEAT_MS"] ?? 1000)

const run = (options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const count = options.full ? 10_000 : 2_000
  const collect = Harness.garbageCollector() ?? (() => {})
  // On a later turn of the event loop: a WeakRef target made or read in this job stays alive until the job ends.
  const measuredBytes = () =>
    Effect.promise(async () => {
      await new Promise((resolve) => setImmediate(resolve))
      collect()
      collect()
      return Harness.usedBytes()
    })
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => Child.start("./loadClient.ts", [], { nice: LOAD_NICE })),
      (c) => Effect.promise(() => c.close())
    )
    const context = yield* Servers.embeddedGateway(undefined, { heartbeatInterval: HEARTBEAT_MS })
    const generation = Context.get(context, Generation.Generation)
    const sessions = Context.get(context, Sessions.Sessions)
    const forests = Context.get(context, Forests.Forests)
    const gate = yield* Deferred.make<void>()
    let open = true
    let waiting = 0
    const awaitLease = Effect.suspend(() => {
      if (open) return Effect.void
      waiting++
      return Deferred.await(gate)
    })

    const before = yield* measuredBytes()
    const ids = yield* Effect.promise(() =>
      Servers.registerSessions(context, count, { awaitLease, leaseHeld: () => open })
    )
    const registered = yield* measuredBytes()
    // Each first turn goes through the generation core as the gateway hands a Chat body to it: with the body's
    // raw-history mark (src/protocol/RawEcho.ts), so the held request, which repeats that history byte for byte as an
    // agent does, is matched from it. One decoded request serves every Session: the message strings are shared, so
    // bytes per token leave the history's text out (section 3 of docs/performance.md).
    const firstBody = { model: "bench", messages: HISTORY, max_tokens: 16 }
    const firstBytes = new TextEncoder().encode(JSON.stringify(firstBody))
    const first = Chat.adapter.decode(firstBody)
    if (Result.isFailure(first)) throw new Error(`bench request does not decode: ${first.failure.message}`)
    const populateStart = performance.now()
    yield* Effect.forEach(ids, (id) =>
      Effect.gen(function*() {
        const session = yield* sessions.lookup(id)
        const mark = generation.echo?.(session, firstBytes).mark
        yield* generation.generate(
          session,
          mark === undefined ? first.success : { ...first.success, echo: { mark, known: undefined } }
        )
      }), { discard: true })
    const populateMs = performance.now() - populateStart
    let storedTokens = 0
    for (const id of ids) {
      const forest = yield* forests.get(id)
      for (const leaf of Forest.leaves(forest)) storedTokens += Forest.trainTokenCount(forest, leaf)
    }
    const populated = yield* measuredBytes()
    // The embedded engine's per-Session prefix cache (the stand-in for SGLang's radix cache, which lives in the
    // engine's process): its share, dropped as a Session's close drops it, so the held requests start without it.
    const engine = Context.get(context, Engine.Engine)
    yield* Effect.forEach(ids, (id) => engine.closeSession(id), { discard: true })
    const forestOnly = yield* measuredBytes()

    // Hold one streaming request per Session; watch the event loop while they arrive and while they wait.
    open = false
    const target = Servers.gatewayTarget("gateway", context, ids)
    const held = [...HISTORY, { role: "assistant", content: "ok" }, {
      role: "user",
      content: Conversation.text(7, 300)
    }]
    const delay = monitorEventLoopDelay({ resolution: 10 })
    // STALL_MS lowers the threshold of the listed stalls, to read shorter busy periods in a profile (the rows keep 50 ms).
    const stallMs = Number(process.env["STALL_MS"] ?? 50)
    const watch = Stalls.watchStalls(stallMs)
    const marks = process.env["SESSIONS_PHASES"] === "1"
    const snapshots = process.env["HEAP_SNAPSHOTS"]
    const phase = async <A>(
      name: string,
      work: () => Promise<A>
    ): Promise<
      {
        readonly value: A
        readonly maxStallMs: number
        readonly stalls: ReadonlyArray<Stalls.Stall>
        readonly cpu: CpuShare.CpuShare
      }
    > => {
      const cpu = CpuShare.start(client.pid)
      delay.reset()
      delay.enable()
      watch.reset()
      if (marks) console.log(`## sessions phase ${name} starts`)
      const value = await work()
      const share = cpu()
      if (marks) console.log(`## sessions phase ${name} ends`)
      delay.disable()
      // GC entries arrive on a later turn of the loop.
      await new Promise((resolve) => setTimeout(resolve, 20))
      return { value, maxStallMs: delay.max / 1e6, stalls: watch.stalls(), cpu: share }
    }
    if (snapshots !== undefined) writeHeapSnapshot(join(snapshots, "before.heapsnapshot"))
    const opening = yield* Effect.promise(() =>
      phase("arrival", () => client.call<LoadClient.HoldResult>({ kind: "hold", target, messages: held }))
    )
    while (waiting < count) yield* Effect.sleep("10 millis")
    if (snapshots !== undefined) writeHeapSnapshot(join(snapshots, "after.heapsnapshot"))
    const holding = yield* Effect.promise(() =>
      phase("held", () => new Promise((resolve) => setTimeout(resolve, 3000)))
    )
    const heldBytes = yield* measuredBytes()

    const [big] = yield* Effect.promise(() => Servers.registerSessions(context, 1))
    const bigPhase = yield* Effect.promise(() =>
      phase("1 MB message", () =>
        client.call<number>(
          {
            kind: "send",
            target: Servers.gatewayTarget("big", context, [big ?? ""]),
            messages: HISTORY,
            appendText: { seed: 11, bytes: BIG_MESSAGE_BYTES }
          } satisfies LoadClient.SendJob
        ))
    )

    open = true
    yield* Deferred.succeed(gate, undefined)
    const release = yield* Effect.promise(() =>
      phase("release", () => client.call<LoadClient.HoldResult>({ kind: "finish" }))
    )
    const finished = release.value
    watch.stop()
    const log = process.env["STALL_LOG"]
    if (log !== undefined) {
      // Stall windows on the clock of a `--cpu-prof` profile (µs of the monotonic clock), to read the profile's samples
      // inside each one (docs/performance.md, section 3).
      const offsetUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000
      const windows = (name: string, p: { readonly stalls: ReadonlyArray<Stalls.Stall> }) =>
        p.stalls.map((s) => ({ phase: name, ...s, startUs: s.startMs * 1000 + offsetUs }))
      writeFileSync(
        log,
        JSON.stringify([
          ...windows("arrive", opening),
          ...windows("held", holding),
          ...windows("1MB", bigPhase),
          ...windows("release", release)
        ])
      )
    }

    const stall = (p: { readonly maxStallMs: number }) => Harness.formatMs(p.maxStallMs)
    const perSession = (heldBytes - before + (populated - forestOnly)) / count
    return {
      title: `${count.toLocaleString("en")} concurrent Sessions in one process (held streaming requests, ${
        HEARTBEAT_MS / 1000
      } s heartbeats)`,
      rows: [
        {
          measure: "heap per Session (registry + forest + held request)",
          value: Harness.formatBytes(perSession)
        },
        { measure: "  of which registry entry", value: Harness.formatBytes((registered - before) / count) },
        {
          measure: "  of which first turn (forest, engine prefix cache)",
          value: Harness.formatBytes((populated - registered) / count)
        },
        { measure: "  of which held request", value: Harness.formatBytes((heldBytes - forestOnly) / count) },
        {
          measure: "bytes per stored token (target ≤ 12)",
          value: ((populated - registered) / storedTokens).toFixed(1)
        },
        {
          measure: "  of which the forest",
          value: ((forestOnly - registered) / storedTokens).toFixed(1)
        },
        {
          measure: "  of which the embedded engine's prefix cache",
          value: ((populated - forestOnly) / storedTokens).toFixed(1)
        },
        {
          measure: "first turns through the generation core",
          value: `${Harness.formatMs(populateMs)} (${Harness.formatMs(populateMs / count)} each)`
        },
        { measure: "longest stall while requests arrive", value: stall(opening) },
        { measure: "longest stall while held (3 s)", value: stall(holding) },
        { measure: "longest stall during one 1 MB message", value: stall(bigPhase) },
        { measure: "the 1 MB message's latency", value: Harness.formatMs(bigPhase.value) },
        { measure: "longest stall while released and answered", value: stall(release) },
        {
          measure: "stalls while requests arrive (count, GC share)",
          value: Stalls.describeStalls(opening.stalls, stallMs)
        },
        { measure: "  CPU while requests arrive", value: CpuShare.describe(opening.cpu) },
        { measure: "stalls while held", value: Stalls.describeStalls(holding.stalls, stallMs) },
        { measure: "stalls during the 1 MB message", value: Stalls.describeStalls(bigPhase.stalls, stallMs) },
        { measure: "  CPU during the 1 MB message", value: CpuShare.describe(bigPhase.cpu) },
        { measure: "stalls while released", value: Stalls.describeStalls(release.stalls, stallMs) },
        { measure: "  CPU while released", value: CpuShare.describe(release.cpu) },
        {
          measure: "held requests completed after release",
          value: `${finished.completed} / ${opening.value.opened} (${finished.heartbeats} heartbeats)`
        },
        ...(finished.failed === 0 ? [] : [{
          measure: "held requests that failed",
          value: `${finished.failed}: ${finished.firstFailure ?? ""}`.slice(0, 120)
        }])
      ],
      notes: [
        "targets: bytes per stored token ≤ 12 (the first turn's bytes: the forest and the embedded engine's " +
        "prefix cache); no event-loop stall above 50 ms (stall = max event-loop delay, 10 ms " +
        "resolution; it includes garbage-collection pauses).",
        `stored tokens: ${storedTokens.toLocaleString("en")} (${
          (storedTokens / count).toFixed(0)
        } per Session: a ~2 KB, ` +
        "6-message history and a 2-token answer).",
        options.full ? "" : "quick size; `npm run bench full sessions` runs 10,000 Sessions."
      ].filter((note) => note.length > 0)
    }
  })))
}

export const bench: Harness.Bench = { name: "sessions", run }
