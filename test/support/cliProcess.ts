/**
 * The real `relax-agentic` command line as a child process of a test (`node src/cli.ts ...`, as `npm start` runs it): its output
 * as it arrives, a wait for a line, its exit, and signals. The process is SIGKILLed when the test's scope closes.
 */
import { Deferred, Effect, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Path from "node:path"

const root = Path.join(import.meta.dirname, "..", "..")

/** How the command ended and everything it printed. */
export interface Ended {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** A running command line. */
export interface CliProcess {
  readonly child: ChildProcess
  /** stdout and stderr so far. */
  readonly output: () => string
  /** Wait until the output matches `pattern` (or the process ends; then fails with the output). */
  readonly waitFor: (pattern: RegExp) => Effect.Effect<RegExpExecArray, string>
  readonly ended: Effect.Effect<Ended>
}

/** Start `relax-agentic <args>` in the repository root. */
export const startCli = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
): Effect.Effect<CliProcess, never, Scope.Scope> =>
  Effect.gen(function*() {
    const ended = yield* Deferred.make<Ended>()
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [Path.join(root, "src", "cli.ts"), ...args], {
          cwd: root,
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let stdout = ""
    let stderr = ""
    const listeners = new Set<() => void>()
    const changed = () => listeners.forEach((listener) => listener())
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
      changed()
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
      changed()
    })
    child.on("close", (code, signal) => {
      Deferred.doneUnsafe(ended, Effect.succeed({ code, signal, stdout, stderr }))
      changed()
    })
    const output = () => `${stdout}${stderr}`
    const waitFor = (pattern: RegExp) =>
      Effect.callback<RegExpExecArray, string>((resume) => {
        const check = () => {
          const found = pattern.exec(output())
          if (found !== null) resume(Effect.succeed(found))
          else if (child.exitCode !== null || child.signalCode !== null) resume(Effect.fail(output()))
          else return
          listeners.delete(check)
        }
        listeners.add(check)
        check()
        return Effect.sync(() => listeners.delete(check))
      })
    return { child, output, waitFor, ended: Deferred.await(ended) } satisfies CliProcess
  })

/** Poll (every 50 ms, at most `limitMs`) until `pids` have all exited; the ones still running at the end. */
export const awaitGone = (pids: ReadonlyArray<number>, running: (pid: number) => boolean, limitMs: number) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < limitMs; waited += 50) {
      if (!pids.some(running)) return []
      yield* Effect.sleep("50 millis")
    }
    return pids.filter(running)
  })
