/**
 * Agent spawn: the Supervisor starting real agent processes (plain node, one chat completion each through the gateway),
 * how many start per second, and how long a step waits for its first generations with and without prelaunch.
 *
 * **Details**
 * - Without prelaunch the step starts the agents: time to first request = from the launch until the request reaches
 *   the generation core (process start, node start-up, the HTTP request).
 * - With prelaunch the agents were started ahead and their first request already waits for the lease: time to first
 *   generation = from the moment the lease is granted until that request's generation starts.
 * Both modes run `count` agents at once (32 quick, 256 `full`).
 */
import { Context, Deferred, Effect, Fiber } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as Harness from "./harness.ts"
import * as Servers from "./servers.ts"

const agentPath = fileURLToPath(new URL("./agent.mjs", import.meta.url))

interface Timings {
  /** Per agent: ms from the mode's start (launch, or lease grant) until its generation could start. */
  readonly toFirst: ReadonlyArray<number>
  /** ms until every agent had exited. */
  readonly allDoneMs: number
}

const run = (options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const count = options.full ? 256 : 32
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Servers.embeddedGateway()
    const ioRoot = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "relax-bench-spawn-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const supervisor = Supervisor.Supervisor.localProcess({
      spec: { command: `"${process.execPath}" "${agentPath}"`, cwd: ioRoot, env: {}, timeoutSeconds: 600 },
      baseUrl: Context.get(context, Gateway.Gateway).agentBaseUrl,
      ioRoot
    })

    const mode = (prelaunch: boolean) =>
      Effect.gen(function*() {
        let granted: number | undefined = prelaunch ? undefined : performance.now()
        const grant = yield* Deferred.make<void>()
        let arrived = 0
        const firsts: Array<number> = []
        const lease = Effect.suspend(() => {
          arrived++
          return granted !== undefined ? Effect.void : Deferred.await(grant)
        }).pipe(Effect.andThen(Effect.sync(() => void firsts.push(performance.now() - (granted ?? 0)))))
        const ids = yield* Effect.promise(() =>
          Servers.registerSessions(context, count, { awaitLease: lease, leaseHeld: () => false })
        )
        const start = performance.now()
        const agents = yield* Effect.forEach(ids, (sessionId) =>
          supervisor.run({
            sessionId,
            groupId: "bench",
            rolloutMode: "train",
            input: { messages: [{ role: "user", content: "What is 2 + 2?" }], metadata: {}, images: [] }
          }).pipe(Effect.forkChild))
        if (prelaunch) {
          while (arrived < count) yield* Effect.sleep("5 millis")
          granted = performance.now()
          yield* Deferred.succeed(grant, undefined)
        }
        const spawnedMs = performance.now() - start
        yield* Fiber.awaitAll(agents)
        const timings: Timings = { toFirst: firsts, allDoneMs: performance.now() - (granted ?? start) }
        return { timings, spawnedMs }
      })

    const cold = yield* mode(false)
    const warm = yield* mode(true)
    const row = (name: string, t: Timings, rate: string): Record<string, string> => ({
      mode: name,
      "agents/s started": rate,
      "p50 to first": Harness.formatMs(Harness.percentile(t.toFirst, 50)),
      "p99 to first": Harness.formatMs(Harness.percentile(t.toFirst, 99)),
      "max to first": Harness.formatMs(Harness.percentile(t.toFirst, 100)),
      "until all exited": Harness.formatMs(t.allDoneMs)
    })
    return {
      title: `Agent spawn: ${count} agent processes at once (node, one chat completion each)`,
      rows: [
        row(
          "without prelaunch (from launch to first request)",
          cold.timings,
          (count / (Math.max(...cold.timings.toFirst) / 1000)).toFixed(0)
        ),
        row(
          "with prelaunch (from lease grant to first generation)",
          warm.timings,
          `(${(count / (warm.spawnedMs / 1000)).toFixed(0)} ahead)`
        )
      ],
      notes: [
        "agents/s started: agents whose first request reached the generation core per second of wall time; with prelaunch " +
        "that happened before the step (the figure in parentheses is the launch rate of the prelaunch phase).",
        "time to first: without prelaunch it is process start-up plus the request; with prelaunch only the wait between " +
        "the lease grant and the generation start remains."
      ]
    }
  })))
}

export const bench: Harness.Bench = { name: "spawn", run }
