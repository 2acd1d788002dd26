/**
 * Real `relax-agentic` processes for the cluster tests: runners and controllers started as the command line, their
 * output collected, waited for by a line they print, and killed (SIGKILL, as the OOM killer does, or SIGTERM) by pid.
 */
import { Effect, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Path from "node:path"

export const root = Path.join(import.meta.dirname, "..", "..")

/** A started command: its child process and everything it printed so far. */
export interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  /** Completes with the exit code once the process has ended. */
  readonly exited: Effect.Effect<number | null>
}

/** Start `relax-agentic <args>`; it is SIGKILLed when the scope closes if it still runs. */
export const start = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.acquireRelease(
    Effect.sync((): Started => {
      const child = spawn(process.execPath, ["--import", "tsx", Path.join(root, "src", "cli.ts"), ...args], {
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
      const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
      return { child, output: () => output, exited: Effect.promise(() => exit) }
    }),
    (started) =>
      Effect.sync(() => {
        if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill("SIGKILL")
      }).pipe(Effect.andThen(started.exited), Effect.asVoid)
  )

/** Wait until the process printed a line matching `pattern` (fails if it exits first); returns the match. */
export const waitFor = (started: Started, pattern: RegExp): Effect.Effect<RegExpMatchArray, Error> =>
  Effect.callback<RegExpMatchArray, Error>((resume) => {
    const check = () => {
      const match = started.output().match(pattern)
      if (match !== null) {
        cleanup()
        resume(Effect.succeed(match))
      }
    }
    const onExit = () => {
      cleanup()
      resume(Effect.fail(new Error(`process exited before printing ${pattern}:\n${started.output().slice(-3000)}`)))
    }
    const cleanup = () => {
      started.child.stdout?.off("data", check)
      started.child.stderr?.off("data", check)
      started.child.off("exit", onExit)
    }
    started.child.stdout?.on("data", check)
    started.child.stderr?.on("data", check)
    started.child.once("exit", onExit)
    check()
    return Effect.sync(cleanup)
  })

/** Start a runner and wait until it joined; returns it with its incarnation id and gateway URL. */
export const runner = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.gen(function*() {
    const started = yield* start(["runner", ...args], env)
    const joined = yield* waitFor(started, /relax-agentic runner (\w+) joined the cluster at \S+; gateway (\S+);/)
    return { ...started, incarnation: joined[1]!, gatewayUrl: joined[2]! }
  })

export type Runner = Effect.Success<ReturnType<typeof runner>>

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
