/**
 * One line when agents are slow to start (docs/troubleshooting.md "Agents are slow to start"): wraps a
 * `SupervisorShape`, times each Session's launch → first model request on the Clock, and, once the median is above a
 * second, reports the line of `StartupDiagnosis.slowStartLine` with the login shell's time, measured once at startup.
 *
 * **Details**
 * The login shell (`bash -lc true`, with the agents' environment) is started when the watch is made, in the caller's
 * scope, beside the first agents; its time is read only when the line is due. The line is reported once per watch;
 * after {@link maxSessions} Sessions that were not slow, timing stops. Sessions without a first-request ticket
 * (`relax-agentic check`) are not timed.
 */
import { Clock, Effect, Fiber, type Scope } from "effect"
import { spawn } from "node:child_process"
import * as StartupDiagnosis from "../../src/session/StartupDiagnosis.ts"
import type * as Supervisor from "./Supervisor.ts"

/** Sessions timed at most: the start of a run is where a slow login profile shows. */
export const maxSessions = 64

/** Seconds a login shell (`bash -lc true`) takes with `env`, or undefined when it cannot run or fails. */
export const loginShellSeconds = (env: NodeJS.ProcessEnv): Effect.Effect<number | undefined> =>
  Effect.callback<number | undefined>((resume) => {
    const started = performance.now()
    try {
      const shell = spawn("/bin/bash", ["-lc", "true"], { env, stdio: "ignore" })
      shell.once("error", () => resume(Effect.succeed(undefined)))
      shell.once(
        "exit",
        (code) => resume(Effect.succeed(code === 0 ? (performance.now() - started) / 1000 : undefined))
      )
      return Effect.sync(() => {
        shell.kill("SIGKILL")
      })
    } catch {
      resume(Effect.succeed(undefined))
      return undefined
    }
  })

export interface WatchOptions {
  /** The login shell's time in seconds (undefined when unknown), started once when the watch is made. */
  readonly loginShell: Effect.Effect<number | undefined>
  /** Where the line goes (the rollout's `Telemetry.warn`). */
  readonly report: (line: string) => Effect.Effect<void>
}

/** `supervisor`, timing its Sessions' launch → first request and reporting once when agents are slow to start. */
export const watch = (
  supervisor: Supervisor.SupervisorShape,
  options: WatchOptions
): Effect.Effect<Supervisor.SupervisorShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const shell = yield* Effect.forkScoped(options.loginShell)
    const seen: Array<number> = []
    let settled = false
    const record = (secondsTaken: number): Effect.Effect<void> => {
      if (settled) return Effect.void
      seen.push(secondsTaken)
      if (!StartupDiagnosis.isSlow(seen)) {
        settled = seen.length >= maxSessions
        return Effect.void
      }
      settled = true
      const times = [...seen]
      // In the watch's scope: the line is not lost when the Session that completed the count ends first.
      return Effect.asVoid(Effect.forkIn(
        Effect.flatMap(Fiber.join(shell), (shellSeconds) => {
          const line = StartupDiagnosis.slowStartLine(times, shellSeconds)
          return line === undefined ? Effect.void : options.report(line)
        }),
        scope
      ))
    }
    return {
      ...supervisor,
      run: (launch) => {
        const firstRequest = launch.firstRequest
        if (firstRequest === undefined || settled) return supervisor.run(launch)
        return Effect.scoped(Effect.gen(function*() {
          const launched = yield* Clock.currentTimeMillis
          yield* Effect.forkScoped(
            Effect.andThen(
              firstRequest,
              Effect.flatMap(Clock.currentTimeMillis, (now) => record((now - launched) / 1000))
            )
          )
          return yield* supervisor.run(launch)
        }))
      }
    }
  })
