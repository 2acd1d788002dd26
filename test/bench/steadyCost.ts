/**
 * CPU and allocated bytes per request of the gateway alone in steady state, with an allocation profile (a script,
 * not one of `npm run bench`'s tables; docs/performance.md section 1 quotes it):
 *
 *   npm run bench:cost -- [rounds] [out.heapprofile]   (node test/bench/steadyCost.ts)
 *
 * **Details**
 * The SGLang path as the `floor` benchmark runs it (64 conversations of 8 turns per round from 30-message ~14 KB
 * histories; the load client and the SGLang stand-in in their own processes), after `WARM` requests (default 4,096).
 * Prints the gateway process's CPU per request (`process.cpuUsage`) of each round and its main thread's
 * (`process.threadCpuUsage`; the rest is the collector's and libuv's helper threads), the Effect fibers started and the
 * fiber suspensions per request (one round, counted by fiber id and by an async hook), then samples 2 rounds with V8's
 * sampling heap profiler (every 1 KiB, objects collected by minor and major GCs included): bytes allocated per
 * request, by file (allocations of natives counted to their caller), by function and by the nearest 5 frames (`TOPF`,
 * `TOPS` say how many lines), at the TypeScript sources' lines (Node's type stripping keeps them); the profile
 * written to `out.heapprofile` carries them too. `CPUPROF=file.cpuprofile` also takes
 * a CPU profile of 2 rounds (`CPUPROF_ROUNDS`; 200 µs sampling) before the allocation profile. `ENGINE=embedded` measures the embedded
 * path instead (the embedded engine at zero latency with the `floor` benchmark's reading policy; no `/generate` hop).
 * `CLIENTS=1` runs one conversation at a time (default 64), `TURNS` sets the turns of each (default 8; with one client,
 * more turns keep a round's setup out of the figure: `CLIENTS=1 TURNS=128`). `SURVIVORS=1` keeps only the objects that
 * outlived a young-generation collection in the allocation profile (what the scavenger copied: the collector's cost
 * grows with it, not with the bytes allocated).
 */
import { Context, Effect, Fiber, Layer } from "effect"
import { createHook } from "node:async_hooks"
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Child from "./child.ts"
import * as Conversation from "./conversation.ts"
import type * as LoadClient from "./loadClient.ts"
import * as Profiler from "./profiles.ts"
import * as Servers from "./servers.ts"

const rounds = Number(process.argv[2] ?? 6)
const profileFile = process.argv[3]
const warm = Number(process.env["WARM"] ?? 4096)
const embedded = process.env["ENGINE"] === "embedded"
const profileRounds = Number(process.env["CPUPROF_ROUNDS"] ?? 2)
const clients = Number(process.env["CLIENTS"] ?? 64)
const turns = Number(process.env["TURNS"] ?? 8)
/** `SURVIVORS=1`: the allocation profile keeps only the objects that outlived a scavenge (see the header). */
const survivors = process.env["SURVIVORS"] === "1"
const HISTORY = Conversation.conversation(30, 470)

interface Node {
  readonly callFrame: {
    readonly functionName: string
    readonly url: string
    readonly lineNumber: number
    readonly columnNumber: number
  }
  readonly selfSize: number
  readonly children: ReadonlyArray<Node>
}

const main = Effect.scoped(Effect.gen(function*() {
  const standIn = yield* Effect.acquireRelease(
    Effect.sync(() => Child.start("./sglangStandIn.ts")),
    (c) => Effect.promise(() => c.close())
  )
  const client = yield* Effect.acquireRelease(
    Effect.sync(() => Child.start("./loadClient.ts")),
    (c) => Effect.promise(() => c.close())
  )
  const tokenizer = Context.get(yield* Layer.build(Tokenizer.Tokenizer.layer), Tokenizer.Tokenizer)
  const outputIds = [...tokenizer.encode("ok"), tokenizer.tokenToId("<|im_end|>") ?? tokenizer.eosTokenId]
  const { url } = yield* Effect.promise(() => standIn.call<{ readonly url: string }>({ outputIds }))
  const gw = yield* (embedded ? Servers.embeddedGateway() : Servers.sglangGateway(url))
  const round = async () => {
    const ids = await Servers.registerSessions(gw, clients)
    const job: LoadClient.ConversationsJob = {
      kind: "conversations",
      targets: [Servers.gatewayTarget("gateway", gw, ids)],
      clients,
      turns,
      history: HISTORY,
      turnBytes: 300,
      interleave: false
    }
    const result = await client.call<ReadonlyArray<LoadClient.TargetResult>>(job)
    await Servers.forgetSessions(gw, ids)
    return result[0]!
  }
  yield* Effect.promise(async () => {
    for (let done = 0; done < warm; done += clients * turns) await round()
    const cpu: Array<number> = []
    const mainThread: Array<number> = []
    for (let r = 0; r < rounds; r++) {
      const before = process.cpuUsage()
      const beforeThread = process.threadCpuUsage()
      await round()
      const used = process.cpuUsage(before)
      const usedThread = process.threadCpuUsage(beforeThread)
      cpu.push((used.user + used.system) / (clients * turns))
      mainThread.push((usedThread.user + usedThread.system) / (clients * turns))
    }
    const line = (figures: ReadonlyArray<number>) =>
      `${figures.map((c) => c.toFixed(0)).join(" ")} median ${
        [...figures].sort((a, b) => a - b)[Math.floor(figures.length / 2)]!.toFixed(0)
      }`
    console.log(`cpu µs/request: ${line(cpu)}`)
    console.log(`of which the main thread: ${line(mainThread)}`)
    // Fibers and suspensions per request: one round with the fiber ids before and after, and an async hook counting
    // the AsyncResource Effect creates at every fiber suspension (the hook costs CPU, so only in this round).
    const fiberId = () => Effect.runSync(Effect.sync(() => Fiber.getCurrent()?.id ?? 0))
    let suspensions = 0
    const hook = createHook({
      init: (_id, type) => {
        if (type === "effect/Fiber") suspensions++
      }
    })
    const firstId = fiberId()
    hook.enable()
    await round()
    hook.disable()
    const fibers = fiberId() - firstId - 1
    console.log(
      `fibers started per request: ${(fibers / (clients * turns)).toFixed(2)}; fiber suspensions per request: ${
        (suspensions / (clients * turns)).toFixed(2)
      }`
    )
    // CPU profile first, so that the heap sampler's own work is not in it.
    const cpuFile = process.env["CPUPROF"]
    if (cpuFile !== undefined) {
      await Profiler.cpuProfile(cpuFile, async () => {
        for (let r = 0; r < profileRounds; r++) await round()
      })
    }
    const session = new Session()
    session.connect()
    const post = (method: string, params?: object) => Profiler.post(session, method, params)
    // Allocation: 2 rounds under the sampling heap profiler, collected objects included.
    await post("HeapProfiler.enable")
    await post("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: !survivors
    })
    const aRounds = 2
    for (let r = 0; r < aRounds; r++) await round()
    const { profile } = (await post("HeapProfiler.stopSampling")) as { readonly profile: { readonly head: Node } }
    session.disconnect()
    if (profileFile !== undefined) writeFileSync(profileFile, JSON.stringify(profile))
    const requests = aRounds * clients * turns
    let total = 0
    const byFn = new Map<string, number>()
    const byStack = new Map<string, number>()
    const short = (url: string) => url.replace(/^.*node_modules\//, "").replace(/^.*\/(src|layers|test)\//, "$1/")
    const byCat = new Map<string, number>()
    const catOf = (url: string): string | undefined => {
      if (url === "") return undefined
      const m = /node_modules\/(@[^/]+\/[^/]+|[^/]+)\//.exec(url)
      if (m !== null) return m[1]
      const r = /\/(src|layers|test)\/(.*?)(\.ts)?$/.exec(url)
      if (r !== null) return `${r[1]}/${r[2]}`
      return url.startsWith("node:") ? "node" : url
    }
    const walkCat = (node: Node, cat: string) => {
      const here = catOf(node.callFrame.url) ?? cat
      if (node.selfSize > 0) byCat.set(here, (byCat.get(here) ?? 0) + node.selfSize)
      for (const child of node.children) walkCat(child, here)
    }
    walkCat(profile.head, "(root)")
    const walk = (node: Node, path: ReadonlyArray<string>) => {
      const cf = node.callFrame
      const where = cf.url.endsWith(".ts")
        ? `${short(cf.url)}:${cf.lineNumber + 1}`
        : `${short(cf.url)}:${cf.lineNumber + 1}:${cf.columnNumber + 1}`
      const name = `${cf.functionName || "(anon)"} ${where}`
      const here = [...path, name]
      total += node.selfSize
      if (node.selfSize > 0) {
        byFn.set(name, (byFn.get(name) ?? 0) + node.selfSize)
        // the nearest 4 frames
        const key = here.slice(-5).reverse().join("  <  ")
        byStack.set(key, (byStack.get(key) ?? 0) + node.selfSize)
      }
      for (const child of node.children) walk(child, here)
    }
    walk(profile.head, [])
    console.log(`allocated per request: ${(total / requests / 1024).toFixed(1)} KiB`)
    const top = (m: Map<string, number>, n: number) =>
      [...m].sort((a, b) => b[1] - a[1]).slice(0, n).forEach(([k, v]) =>
        console.log(
          `${(v / requests / 1024).toFixed(2).padStart(7)} KiB ${(100 * v / total).toFixed(1).padStart(5)}%  ${k}`
        )
      )
    console.log("== by file (natives to their caller)")
    top(byCat, 40)
    console.log("== by function (self)")
    top(byFn, Number(process.env["TOPF"] ?? 50))
    console.log("== by stack")
    top(byStack, Number(process.env["TOPS"] ?? 40))
  })
}))

Effect.runPromise(main).then(() => process.exit(0), (e: unknown) => {
  console.error(e)
  process.exit(1)
})
