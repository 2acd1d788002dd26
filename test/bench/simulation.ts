/**
 * A simulation under the TestClock: 1,000 Sessions × 20 turns (`full`; 100 quick; `SIM_COUNT` for any other count,
 * e.g. the 10,000 of issue 24) through the real generation core (Generation + Forests + Sessions + the embedded
 * engine with a policy and its default prefill/decode latency on the TestClock), agents thinking 2 simulated seconds
 * between turns. Reports the wall and CPU time (targets: ≤ 10 s for 1,000 Sessions, ≤ 60 s for 10,000).
 *
 * **Details**
 * Every agent starts from a 6-message ~2 KB history and adds the answer plus a 300-byte user message per turn; the
 * clock is moved in 1-second steps until every agent is done. `SIM_CPUPROF=file.cpuprofile` takes a CPU profile of
 * the simulated part (the Sessions run, not the setup), `SIM_HEAPPROF=file.heapprofile` an allocation profile of it
 * (and prints the bytes allocated per request; with `SIM_SURVIVORS=1` only the objects that outlived a scavenge);
 * `SIM_PROGRESS=10` prints requests, wall and CPU so far to stderr every 10 simulated seconds (a long run under load
 * can then be read before it ends):
 * `SIM_CPUPROF=sim.cpuprofile npm run bench -- simulation` (at the TypeScript sources' lines).
 * Each agent canonicalizes only its new messages per turn (`SIM_CANONICAL=whole`: its whole history, as before issue
 * 24's fourth pass); `SIM_ENGINE_WAITS=token` runs the embedded engine with one wait per token (its earlier timeline).
 * The clock is the simulation clock (`layers/platform/SimulationClock.ts`, Effect's TestClock with its sleeps in a heap);
 * `SIM_CLOCK=effect` runs Effect's own `TestClock.layer()` instead (O(pending sleeps) a sleep). The fibers run on the
 * FairScheduler, the scheduler the rollout's services run on (`layerFromSettings`); `SIM_SCHEDULER=effect` runs them on
 * Effect's default scheduler (a macrotask, and an event-loop turn, for every batch of tasks).
 * The digests printed (every forest node's ids, logprobs and weight versions; its elapsed times and cached tokens)
 * compare two runs or two code paths: the same samples digest means the same committed conversations, token for token.
 */
import { Context, Effect, Fiber, Layer, Result } from "effect"
import { TestClock } from "effect/testing"
import { createHash, type Hash } from "node:crypto"
import { constants, performance, type PerformanceEntry, PerformanceObserver } from "node:perf_hooks"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"
import * as SimulationClock from "../../layers/platform/SimulationClock.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import type * as Forest from "../../src/forest/Forest.ts"
import * as PackedIds from "../../src/ids/PackedIds.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as Conversation from "./conversation.ts"
import * as Harness from "./harness.ts"
import * as Profiler from "./profiles.ts"
import * as Servers from "./servers.ts"

const TURNS = 20

/**
 * Feed a forest node into the run's digests: `samples` its state hash, ids and (responses) logprobs and weight
 * versions; `timings` its elapsed times and cached tokens. Two runs (or two code paths) that print the same digests
 * committed the same conversations token for token.
 */
const digestNode = (digest: { readonly samples: Hash; readonly timings: Hash }, node: Forest.Node): void => {
  digest.samples.update(node.hash).update(PackedIds.unpack(node.ids))
  if (node.kind === "resp") {
    digest.samples.update(new Float64Array(node.logprobs)).update(node.weightVersions.join(","))
    digest.timings.update(`${node.wallElapsedS} ${node.generationElapsedS} ${node.cachedTokens ?? -1};`)
  }
}
const THINK = "2 seconds"

const run = (options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const count = Number(process.env["SIM_COUNT"] ?? (options.full ? 1000 : 100))
  const profileFile = process.env["SIM_CPUPROF"]
  const heapFile = process.env["SIM_HEAPPROF"]
  let allocated: number | undefined
  const progress = Number(process.env["SIM_PROGRESS"] ?? 0)
  const wholeHistory = process.env["SIM_CANONICAL"] === "whole"
  const effectClock = process.env["SIM_CLOCK"] === "effect"
  const effectScheduler = process.env["SIM_SCHEDULER"] === "effect"
  const stack = Generation.Generation.layer().pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(Sessions.Sessions.layer),
    Layer.provideMerge(EmbeddedEngine.EmbeddedEngine.layer({
      policy: Servers.readingPolicy,
      perTokenWaits: process.env["SIM_ENGINE_WAITS"] === "token"
    })),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(stack)
    const generation = Context.get(context, Generation.Generation)
    const sessions = Context.get(context, Sessions.Sessions)
    const ids = yield* Effect.promise(() => Servers.registerSessions(context, count))
    const history = Conversation.conversation(6, 300)
    let requests = 0
    const agent = (id: string) =>
      Effect.gen(function*() {
        const session = yield* sessions.lookup(id)
        const messages: Array<unknown> = [...history]
        // What the messages sent so far canonicalize to: each turn canonicalizes only its new messages, as the
        // gateway does for a history repeated byte for byte (SIM_CANONICAL=whole: the whole history every turn).
        let known: Canonical.KnownPrefix | undefined
        for (let turn = 0; turn < TURNS; turn++) {
          const state = Canonical.canonicalize({ messages, tools: [], chat_template_kwargs: {} }, known)
          if (Result.isFailure(state)) return yield* Effect.die(state.failure)
          if (!wholeHistory) known = { count: messages.length, messages: state.success.messages }
          const completion = yield* generation.generate(
            session,
            {
              state: state.success,
              model: "bench",
              stream: false,
              stop: [],
              logprobs: false,
              toolCallIdPrefix: "call_"
            }
          )
          requests++
          messages.push({ role: "assistant", content: completion.content }, {
            role: "user",
            content: Conversation.text(turn, 300)
          })
          yield* Effect.sleep(THINK)
        }
      })
    // Time in garbage collection (every collection, and the major ones), from the runtime's gc entries.
    const gc = { ms: 0, majorMs: 0 }
    const gcObserver = new PerformanceObserver((list) => {
      for (
        const entry of list.getEntries() as Array<PerformanceEntry & { readonly detail?: { readonly kind?: number } }>
      ) {
        gc.ms += entry.duration
        if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gc.majorMs += entry.duration
      }
    })
    gcObserver.observe({ entryTypes: ["gc"] })
    const start = performance.now()
    const cpuStart = process.cpuUsage()
    const threadStart = process.threadCpuUsage()
    const simulate = Effect.gen(function*() {
      const fibers = yield* Effect.forEach(ids, (id) => Effect.forkChild(agent(id)))
      let seconds = 0
      while (fibers.some((fiber) => fiber.pollUnsafe() === undefined)) {
        yield* TestClock.adjust("1 second")
        seconds++
        if (progress > 0 && seconds % progress === 0) {
          const cpu = process.cpuUsage(cpuStart)
          console.error(
            `simulation: ${seconds} s simulated, ${requests} requests, ${
              Harness.formatMs(performance.now() - start)
            } wall, ${Harness.formatMs((cpu.user + cpu.system) / 1000 / Math.max(1, requests))} CPU per request, GC ${
              Harness.formatMs(gc.ms)
            } (major ${Harness.formatMs(gc.majorMs)}), heap ${Harness.formatBytes(process.memoryUsage().heapUsed)}`
          )
        }
      }
      yield* Fiber.joinAll(fibers)
      return seconds
    }).pipe(
      Effect.provide(effectClock ? TestClock.layer() : SimulationClock.layer()),
      (effect) => effectScheduler ? effect : FairScheduler.provide(effect)
    )
    const simulated = profileFile !== undefined
      ? yield* Effect.promise(() => Profiler.cpuProfile(profileFile, () => Effect.runPromise(simulate)))
      : heapFile !== undefined
      ? yield* Effect.promise(async () => {
        const profiled = await Profiler.allocationProfile(
          heapFile,
          () => Effect.runPromise(simulate),
          process.env["SIM_SURVIVORS"] === "1"
        )
        allocated = profiled.bytes
        return profiled.result
      })
      : yield* simulate
    const wallMs = performance.now() - start
    const cpu = process.cpuUsage(cpuStart)
    const thread = process.threadCpuUsage(threadStart)
    gcObserver.disconnect()
    const forests = Context.get(context, Forests.Forests)
    const digest = { samples: createHash("sha256"), timings: createHash("sha256") }
    for (const id of ids) {
      const forest = yield* forests.get(id).pipe(Effect.orDie)
      for (const node of forest.nodes.values()) digestNode(digest, node)
    }
    const cpuMs = (cpu.user + cpu.system) / 1000
    const threadMs = (thread.user + thread.system) / 1000
    return {
      title: `Simulation under the TestClock: ${count} Sessions × ${TURNS} turns through the generation core (${
        effectClock ? "Effect's TestClock" : "the simulation clock"
      }, ${effectScheduler ? "Effect's default scheduler" : "the FairScheduler"})`,
      rows: [
        { measure: "wall time", value: Harness.formatMs(wallMs) },
        { measure: "requests", value: String(requests) },
        { measure: "wall time per request", value: Harness.formatMs(wallMs / requests) },
        {
          measure: "CPU time of this process (all threads)",
          value: `${Harness.formatMs(cpuMs)} (${Harness.formatMs(cpuMs / requests)} per request)`
        },
        {
          // The rest of the process's CPU is V8's helper threads (the collector's parallel and concurrent work) and libuv's.
          measure: "CPU time of the main thread",
          value: `${Harness.formatMs(threadMs)} (${Harness.formatMs(threadMs / requests)} per request)`
        },
        { measure: "simulated time", value: `${simulated} s` },
        {
          measure: "digest of every forest node: samples / timings",
          value: `${digest.samples.digest("hex").slice(0, 16)} / ${digest.timings.digest("hex").slice(0, 16)}`
        },
        {
          measure: "garbage collection (all / major)",
          value: `${Harness.formatMs(gc.ms)} / ${Harness.formatMs(gc.majorMs)}`
        },
        ...(allocated === undefined
          ? []
          : [{ measure: "allocated per request (SIM_HEAPPROF)", value: Harness.formatBytes(allocated / requests) }]),
        {
          measure: "projected for 1,000 × 20 (target ≤ 10 s wall)",
          value: `${Harness.formatMs((wallMs / requests) * 1000 * TURNS)} wall, ${
            Harness.formatMs((cpuMs / requests) * 1000 * TURNS)
          } CPU`
        },
        {
          measure: "projected for 10,000 × 20 (target ≤ 60 s wall)",
          value: `${Harness.formatMs((wallMs / requests) * 10_000 * TURNS)} wall, ${
            Harness.formatMs((cpuMs / requests) * 10_000 * TURNS)
          } CPU`
        }
      ],
      notes: [
        "embedded engine with a policy that reads the conversation, default latency (20,000 prompt tokens/s, 200 generated " +
        "tokens/s) on the TestClock; agents think 2 simulated seconds per turn.",
        "CPU time is the better figure on a shared machine: wall time also counts other processes' use of the cores.",
        count >= 1000
          ? ""
          : "quick size; `npm run bench full simulation` runs 1,000 Sessions, `SIM_COUNT=10000` 10,000 (projections are linear)."
      ].filter((note) => note.length > 0)
    }
  })))
}

export const bench: Harness.Bench = { name: "simulation", run }
