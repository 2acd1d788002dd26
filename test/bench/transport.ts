/**
 * The gateway against the transport floor, with the load generator in its own process (loadClient.ts):
 * - `floor`: 1, 64 and 512 concurrent conversations; requests/s, p50 and p99 of the gateway and of its floor, for the
 *   SGLang path (against a fast SGLang stand-in in a third process) and for the embedded engine with a policy.
 * - `history`: one conversation of 257 requests; the cost at turn 256 over the cost at turn 16, for the gateway and
 *   for the floor, on both paths.
 *
 * **Details**
 * Every conversation starts from a 30-message history of about 14 KB (system, user, then tool-calling assistant
 * turns and tool results) and adds the answer plus a 300-byte user message per turn. The floor is a plain node:http
 * server that parses the same bodies and answers the same completion shape; on the SGLang path it also makes the
 * same single `/generate` call (about one input id per 6 body bytes, close to the real prompt). Candidates alternate within one run (rounds
 * for `floor`, turn by turn for `history`), so machine noise hits both alike. Nothing is asserted.
 */
import { Context, Effect } from "effect"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Child from "./child.ts"
import * as Conversation from "./conversation.ts"
import * as Harness from "./harness.ts"
import type * as LoadClient from "./loadClient.ts"
import * as Servers from "./servers.ts"

const HISTORY = Conversation.conversation(30, 470)
const TURN_BYTES = 300

interface Path {
  readonly name: string
  readonly floor: LoadClient.Target
  readonly gateway: Context.Context<Servers.GatewayServices>
}

/** Both paths, the load client and the SGLang stand-in, for the scope's lifetime. */
const setup = Effect.gen(function*() {
  const standIn = yield* Effect.acquireRelease(
    Effect.sync(() => Child.start("./sglangStandIn.ts")),
    (c) => Effect.promise(() => c.close())
  )
  const client = yield* Effect.acquireRelease(
    Effect.sync(() => Child.start("./loadClient.ts")),
    (c) => Effect.promise(() => c.close())
  )
  const embedded = yield* Servers.embeddedGateway()
  const tokenizer = Context.get(embedded, Tokenizer.Tokenizer)
  const outputIds = [...tokenizer.encode("ok"), tokenizer.tokenToId("<|im_end|>") ?? tokenizer.eosTokenId]
  const { url } = yield* Effect.promise(() => standIn.call<{ readonly url: string }>({ outputIds }))
  const sglang = yield* Servers.sglangGateway(url)
  const paths: ReadonlyArray<Path> = [
    { name: "SGLang path", floor: yield* Servers.floor(url), gateway: sglang },
    { name: "embedded + policy", floor: yield* Servers.floor(), gateway: embedded }
  ]
  return { client, paths }
})

const runJob = (client: Child.Child, job: LoadClient.ConversationsJob) =>
  client.call<ReadonlyArray<LoadClient.TargetResult>>(job)

/**
 * Requests each server (floor and gateway) answers before anything is measured. V8 optimizes a function only after
 * it ran many times: the floor is a few dozen lines and is fast after a few requests, while the gateway's path
 * (Effect runtime, protocol decoding, forest, tokenizer, template, SGLang client) still gets faster after a thousand
 * requests (CPU per request on the SGLang path: ~2.3 ms in the first 512 requests, ~0.8 ms after 4,000). A rollout
 * serves thousands of requests per step, so the steady state is the figure that matters; `npm run bench -- floor`
 * with `FLOOR_WARMUP=0` shows the cold one.
 */
const warmupRequests = Number(process.env["FLOOR_WARMUP"] ?? 4096)

/**
 * Warm both servers of `path` up with `warmupRequests` requests each (64 conversations of 8 turns per round), then,
 * with `longest`, one conversation of that many turns.
 *
 * **Details**
 * Conversations of 8 turns never take some branches a longer one takes (a Session's kept inference prefix outgrowing
 * its first room, the engine comparing past it): V8 then deoptimizes the functions that hold them in the first long
 * conversation (`--trace-deopt`: "Insufficient type feedback", in 048b983 and after it alike) and that conversation
 * pays for it. The timed rows measure the steady state, so the longest timed conversation runs once untimed first
 * (docs/performance.md, "Issue 41, third pass").
 */
const warmUp = async (client: Child.Child, path: Path, longest = 0): Promise<void> => {
  await measure(client, path, 8, 3, false)
  for (let done = 0; done < warmupRequests; done += 64 * 8) await measure(client, path, 64, 8, false)
  if (longest > 0) await measure(client, path, 1, longest, false)
}

/** One target's results, with the CPU time this process (which serves both) spent while it ran (not interleaved). */
interface Measured extends LoadClient.TargetResult {
  readonly cpuMs: number
}

/**
 * Run the floor and the gateway with fresh Sessions for the gateway, forgotten afterwards: turn by turn in one job
 * (`interleave`), or one job after the other, each with the CPU time of this process while it ran.
 */
const measure = async (
  client: Child.Child,
  path: Path,
  clients: number,
  turns: number,
  interleave: boolean
): Promise<{ readonly floor: Measured; readonly gateway: Measured }> => {
  const ids = await Servers.registerSessions(path.gateway, clients)
  const targets: ReadonlyArray<LoadClient.Target> = [
    { ...path.floor, tokens: ids.map(() => "") },
    Servers.gatewayTarget("gateway", path.gateway, ids)
  ]
  const job = (these: ReadonlyArray<LoadClient.Target>): LoadClient.ConversationsJob => ({
    kind: "conversations",
    targets: these,
    clients,
    turns,
    history: HISTORY,
    turnBytes: TURN_BYTES,
    interleave
  })
  const timed = async (target: LoadClient.Target): Promise<Measured | undefined> => {
    const before = process.cpuUsage()
    const [result] = await runJob(client, job([target]))
    const used = process.cpuUsage(before)
    return result === undefined ? undefined : { ...result, cpuMs: (used.user + used.system) / 1000 }
  }
  const [a, b] = interleave
    ? (await runJob(client, job(targets))).map((r) => ({ ...r, cpuMs: Number.NaN }))
    : [await timed(targets[0]!), await timed(targets[1]!)]
  await Servers.forgetSessions(path.gateway, ids)
  if (a === undefined || b === undefined) throw new Error("the load client answered without results")
  return { floor: a, gateway: b }
}

const all = (result: LoadClient.TargetResult): ReadonlyArray<number> => result.latencies.flat()

const floorBench = async (options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const sizes: ReadonlyArray<{ readonly clients: number; readonly turns: number }> = options.full
    ? [{ clients: 1, turns: 60 }, { clients: 64, turns: 20 }, { clients: 512, turns: 5 }]
    : [{ clients: 1, turns: 20 }, { clients: 64, turns: 4 }, { clients: 512, turns: 2 }]
  const rounds = options.full ? 3 : 1
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const { client, paths } = yield* setup
    const rows: Array<Record<string, string>> = []
    for (const path of paths) {
      // Warm-up: JIT, connection pools, tokenizer caches.
      yield* Effect.promise(() => warmUp(client, path, Math.max(...sizes.map((s) => s.turns))))
      for (const { clients, turns } of sizes) {
        const floorRates: Array<number> = []
        const gatewayRates: Array<number> = []
        const floorLatencies: Array<number> = []
        const gatewayLatencies: Array<number> = []
        const floorCpu: Array<number> = []
        const gatewayCpu: Array<number> = []
        for (let round = 0; round < rounds; round++) {
          const result = yield* Effect.promise(() => measure(client, path, clients, turns, false))
          floorRates.push((clients * turns * 1000) / result.floor.wallMs)
          gatewayRates.push((clients * turns * 1000) / result.gateway.wallMs)
          floorCpu.push(result.floor.cpuMs / (clients * turns))
          gatewayCpu.push(result.gateway.cpuMs / (clients * turns))
          floorLatencies.push(...all(result.floor))
          gatewayLatencies.push(...all(result.gateway))
        }
        const floorRate = Harness.median(floorRates)
        const gatewayRate = Harness.median(gatewayRates)
        const p = (values: ReadonlyArray<number>, q: number) => Harness.formatMs(Harness.percentile(values, q))
        rows.push({
          path: path.name,
          clients: String(clients),
          "floor req/s": floorRate.toFixed(0),
          "gateway req/s": gatewayRate.toFixed(0),
          "req/s ratio": Harness.formatRatio(gatewayRate / floorRate),
          "floor p50": p(floorLatencies, 50),
          "gateway p50": p(gatewayLatencies, 50),
          "p50 ratio": Harness.formatRatio(
            Harness.percentile(gatewayLatencies, 50) / Harness.percentile(floorLatencies, 50)
          ),
          "floor p99": p(floorLatencies, 99),
          "gateway p99": p(gatewayLatencies, 99),
          "floor CPU/req": Harness.formatMs(Harness.median(floorCpu)),
          "gateway CPU/req": Harness.formatMs(Harness.median(gatewayCpu)),
          "CPU ratio": Harness.formatRatio(Harness.median(floorCpu) / Harness.median(gatewayCpu))
        })
      }
    }
    return {
      title: "Gateway vs the transport floor (load generator in its own process; 30-message ~14 KB histories)",
      rows,
      notes: [
        "req/s ratio = gateway requests/s ÷ floor requests/s (target ≥ 0.8× at 64 clients); p50 ratio = gateway p50 ÷ " +
        "floor p50 (target ≤ 1.2× at 1 client).",
        "floor: node:http that parses the same bodies and answers the same completion; on the SGLang path it also makes " +
        "the same single /generate call to the same stand-in (a separate process answering 2 tokens at once).",
        `conversations: ${sizes.map((s) => `${s.clients}×${s.turns} turns`).join(", ")}; requests/s is the median of ` +
        `${rounds} alternating rounds, percentiles pool every round's requests.`,
        "CPU/req: CPU time of this process (it serves the floor and the gateway, one after the other) per request while " +
        "each ran, median of the rounds; CPU ratio = floor CPU ÷ gateway CPU, the requests/s ratio a CPU-bound server " +
        "would reach (less sensitive to other load on the machine than the wall-time ratios)."
      ]
    }
  })))
}

const historyBench = async (_options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const last = 256
  const window = 16
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const { client, paths } = yield* setup
    const rows: Array<Record<string, string>> = []
    for (const path of paths) {
      yield* Effect.promise(() => warmUp(client, path))
      const result = yield* Effect.promise(() => measure(client, path, 1, last + 1, true))
      const at = (r: LoadClient.TargetResult, turn: number) =>
        Harness.median(r.latencies.slice(turn - window, turn + window + 1).flat())
      const floorRatio = at(result.floor, last) / at(result.floor, 16)
      const gatewayRatio = at(result.gateway, last) / at(result.gateway, 16)
      rows.push({
        path: path.name,
        "floor t16": Harness.formatMs(at(result.floor, 16)),
        "floor t256": Harness.formatMs(at(result.floor, last)),
        "floor ratio": Harness.formatRatio(floorRatio),
        "gateway t16": Harness.formatMs(at(result.gateway, 16)),
        "gateway t256": Harness.formatMs(at(result.gateway, last)),
        "gateway ratio": Harness.formatRatio(gatewayRatio),
        "ratio of ratios": Harness.formatRatio(gatewayRatio / floorRatio)
      })
    }
    return {
      title: "History scaling: one conversation, cost at turn 256 ÷ cost at turn 16",
      rows,
      notes: [
        `t16, t256: median latency of turns 16±${window} and 256±${window} (0-based request index; the floor and the ` +
        "gateway alternate turn by turn).",
        "ratio of ratios = gateway ratio ÷ floor ratio (target ≤ 1.2×): how much faster than the transport's own cost " +
        "the gateway's per-request cost grows with history."
      ]
    }
  })))
}

export const floorBenchmark: Harness.Bench = { name: "floor", run: floorBench }
export const historyBenchmark: Harness.Bench = { name: "history", run: historyBench }
