/**
 * `npm run bench -- failover`: how long a runner's death costs (docs/scale-out.md "Failure"). A throwaway PostgreSQL,
 * two runners and a controller; once every Session of the step is placed and an agent of one runner is mid-step, that
 * runner is killed with SIGKILL, and the bench times how long until the controller drops its Groups and until every
 * refilled Session's agent runs on the survivor, with the default failover settings and with fast ones.
 *
 * **Details**
 * The agents are the fault test's (test/fixtures/cluster/slow.mjs: a request, a 4-second tool, a request), so the
 * killed runner's agents are mid-step. Every Group starts at once (`--agentic-concurrency` = the batch), so a Session
 * the survivor hosts after the kill is a refill; a refill "runs" once its agent has written its pid. The output is
 * polled every 50 ms, so the times are that coarse.
 */
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { performance } from "node:perf_hooks"
import * as Processes from "../cluster/processes.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import type * as Harness from "./harness.ts"

const fixtures = Path.join(Processes.root, "test", "fixtures")

/** A set of failover flags under test, as given on every member's command line. */
interface Settings {
  readonly name: string
  readonly flags: ReadonlyArray<string>
}

/** The defaults (no flag) and the fast settings docs/scale-out.md documents for a quiet network and database. */
const settings: ReadonlyArray<Settings> = [
  { name: "defaults (expiration 8 s, refresh 2 s, health check 4 s)", flags: [] },
  {
    name: "fast (expiration 4 s, refresh 1 s, health check 2 s)",
    flags: ["--cluster-lock-expiration", "4", "--cluster-lock-refresh", "1", "--cluster-health-check", "2"]
  }
]

// Agents run under `bash -lc`: an empty HOME keeps the machine's login profile (pyenv init and its rehash lock, which a
// SIGKILLed agent can leave behind) out of their shells, as the tests do (vitest.config.ts).
const env = { HOME: Processes.emptyHome() }

const hostedBy = (output: string): Array<string> => [...output.matchAll(/hosts Session (\S+)/g)].map((m) => m[1]!)

/** Polls `done` every 50 ms until it holds (at most `limit` ms); the milliseconds since `since`, or NaN on time-out. */
const until = (since: number, limit: number, done: () => boolean) =>
  Effect.gen(function*() {
    while (!done()) {
      if (performance.now() - since > limit) return Number.NaN
      yield* Effect.sleep("50 millis")
    }
    return performance.now() - since
  })

const measure = (groups: number, chosen: Settings) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* EmbeddedPg.start
    const ports = yield* EmbeddedPg.freePorts(2)
    const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "relax-bench-failover-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(work, { recursive: true, force: true })))
    const pids = Path.join(work, "pids")
    Fs.mkdirSync(pids)
    const flags = (outputDir: string) => [
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
      Path.join(fixtures, "cluster"),
      "--agent-command",
      `"${process.execPath}" slow.mjs`,
      "--agent-env",
      `PID_DIR=${pids}`,
      "--embedded-policy",
      Path.join(fixtures, "rollout", "policy.mjs"),
      "--rollout-max-response-len",
      "16",
      "--output-dir",
      outputDir,
      "--cluster-database-url",
      db.url,
      ...chosen.flags
    ]
    const runners = yield* Effect.forEach(
      [1, 2],
      (i) =>
        Processes.runner(
          [...flags(Path.join(work, `runner${i}`)), "--runner-address", `127.0.0.1:${ports[i - 1]!}`],
          env
        ),
      { concurrency: "unbounded" }
    )
    const controller = yield* Processes.start(["rollout", ...flags(Path.join(work, "out"))], env)
    // Every Session placed, and one runner holds a Session whose agent already runs: that runner is the victim.
    const victim = yield* Effect.gen(function*() {
      while (true) {
        const started = new Set(Fs.readdirSync(pids))
        const placed = runners.reduce((n, r) => n + hostedBy(r.output()).length, 0)
        const found = runners.find((r) => hostedBy(r.output()).some((s) => started.has(s)))
        if (placed === groups * 2 && found !== undefined) return found
        yield* Effect.sleep("100 millis")
      }
    }).pipe(Effect.timeout("240 seconds"))
    const survivor = runners.find((r) => r !== victim)!
    const lost = hostedBy(victim.output()).length
    const mark = survivor.output().length
    const controllerMark = controller.output().length
    const killed = performance.now()
    victim.child.kill("SIGKILL")
    const refills = () => hostedBy(survivor.output().slice(mark))
    const dropped = yield* until(killed, 120_000, () => /error_type=/.test(controller.output().slice(controllerMark)))
    const hosted = yield* until(killed, 120_000, () => refills().length >= lost)
    const running = yield* until(killed, 120_000, () => {
      const started = new Set(Fs.readdirSync(pids))
      return refills().length >= lost && refills().every((s) => started.has(s))
    })
    const code = yield* controller.exited
    if (code !== 0) {
      return yield* Effect.fail(new Error(`the controller exited ${code}:\n${controller.output().slice(-3000)}`))
    }
    const seconds = (ms: number) => Number.isNaN(ms) ? "not within 120 s" : `${(ms / 1000).toFixed(1)} s`
    return {
      settings: chosen.name,
      "Sessions lost (of all)": `${lost} (of ${groups * 2})`,
      "kill → first drop": seconds(dropped),
      "kill → refills placed": seconds(hosted),
      "kill → refilled agents running": seconds(running)
    }
  }))

export const bench: Harness.Bench = {
  name: "failover",
  run: async ({ full }): Promise<Harness.BenchResult> => {
    const rows = []
    for (const chosen of settings) rows.push(await Effect.runPromise(measure(full ? 8 : 2, chosen)))
    return {
      title: "Cluster failover: SIGKILL of a runner mid-step until its Groups run again on the survivor",
      rows,
      notes: [
        "Two runners and a controller over an embedded PostgreSQL; every Group starts at once, one runner is SIGKILLed while its agents are mid-step.",
        "first drop: the controller's drop line of a lost Group; refills placed: the survivor hosts as many new Sessions as were lost; running: their agents started.",
        "Times are polled every 50 ms."
      ]
    }
  }
}
