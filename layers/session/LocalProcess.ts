/**
 * The `LocalProcess` executor: one agent process group per Session, running `--agent-command` (the guide's managed
 * command agent).
 *
 * **Details**
 * It runs `/bin/bash -lc <--agent-command>` in `--agent-cwd` as the leader of its own process group, with the
 * parent's environment + `--agent-env` + the seven `RELAX_*` variables, in the Session's IO directory
 * (SessionDirectory.ts), stdout + stderr appended to its `run.log`. Interrupting `run` sends SIGTERM to the whole
 * process group, SIGKILL after the grace period (5 s), and waits until no member is left, so a backgrounded
 * grandchild (`sleep 1000 &`) is reaped too; the same cleanup runs after a normal exit (ProcessGroup.ts; why
 * `node:child_process` and not `effect/process`: docs/architecture.md). {@link resolveAgentSpec} checks the agent
 * options at startup.
 */
import { Duration, Effect, Result } from "effect"
import * as FsPromises from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as AgentSpec from "../../src/session/AgentSpec.ts"
import * as SessionError from "../../src/session/SessionError.ts"
import * as SessionOutput from "../../src/session/SessionOutput.ts"
import * as ActiveBudget from "./ActiveBudget.ts"
import * as ProcessGroup from "./ProcessGroup.ts"
import * as SessionDirectory from "./SessionDirectory.ts"
import type * as Supervisor from "./Supervisor.ts"

/** Options of the `LocalProcess` executor. */
export interface LocalProcessOptions {
  readonly spec: AgentSpec.AgentSpec
  /** `RELAX_BASE_URL`: the gateway's `/agentic_api/` URL (with the trailing slash). */
  readonly baseUrl: string
  /** Keep each Session's IO directory after the run (debugging). Default false. */
  readonly keepSessionIo?: boolean | undefined
  /** Parent of the IO directories. Default: the OS temp directory. */
  readonly ioRoot?: string | undefined
  /**
   * Where Session logs are kept, as `<logDir>/<sessionId>.log`: the log (`run.log` in the IO directory while the agent
   * runs) is moved there when the Session ends, for the Sessions `keepLogs` says. Default: no log is kept.
   */
  readonly logDir?: string | undefined
  /** With `logDir`: keep the logs of `"failed"` Sessions only (default), or of `"all"`. */
  readonly keepLogs?: "failed" | "all" | undefined
  /** Between SIGTERM and SIGKILL to the process group. Default 5 seconds. */
  readonly killGrace?: Duration.Input | undefined
  /** The parent environment the agent inherits. Default: `process.env`. */
  readonly parentEnv?: Readonly<Record<string, string | undefined>> | undefined
}

const expandHome = (path: string): string =>
  path === "~" ? Os.homedir() : path.startsWith("~/") ? Path.join(Os.homedir(), path.slice(2)) : path

/**
 * Validate the agent options at startup: `AgentSpec.make` plus `--agent-cwd` resolved (with `~` expanded) to an
 * existing directory.
 */
export const resolveAgentSpec = (
  input: AgentSpec.AgentSpecInput
): Effect.Effect<AgentSpec.AgentSpec, SessionError.AgentSpecError> =>
  Effect.gen(function*() {
    const spec = yield* Effect.fromResult(AgentSpec.make(input))
    const cwd = Path.resolve(expandHome(spec.cwd))
    const isDirectory = yield* Effect.promise(() =>
      FsPromises.stat(cwd).then((stat) => stat.isDirectory(), () => false)
    )
    if (!isDirectory) {
      return yield* new SessionError.AgentSpecError({
        option: "--agent-cwd",
        reason: "not-a-directory",
        detail: `managed agent cwd must be an existing directory: ${cwd}`
      })
    }
    return { ...spec, cwd }
  })

const signalNumber = (signal: NodeJS.Signals): number => Os.constants.signals[signal] ?? 9

const parseOutputOrFail = (
  sessionId: string,
  text: string | undefined,
  exitCode: number,
  logTail: string,
  logPath: string | undefined
): Effect.Effect<SessionOutput.AgentOutcome, SessionError.AgentExecutionError> => {
  const parsed = SessionOutput.parse(text)
  if (Result.isFailure(parsed)) {
    return Effect.fail(
      new SessionError.AgentExecutionError({
        sessionId,
        reason: "invalid-output",
        detail: parsed.failure.message,
        logTail,
        logPath
      })
    )
  }
  return Effect.succeed({ sessionId, exitCode, ...parsed.success, logTail })
}

/** The `LocalProcess` executor. */
export const make = (options: LocalProcessOptions): Supervisor.SupervisorShape => {
  const spec = options.spec
  const grace = Duration.fromInputUnsafe(options.killGrace ?? Duration.seconds(5))
  const inputFile = SessionDirectory.inputFiles()
  const makeBudget = ActiveBudget.make(spec.timeoutSeconds)

  const run = (launch: Supervisor.SessionLaunch) =>
    Effect.scoped(Effect.gen(function*() {
      const { sessionId } = launch
      const budget = launch.budget ?? (yield* makeBudget.pipe(Effect.tap((b) => b.start)))
      const input = yield* inputFile(launch.input, sessionId)
      const dir = yield* SessionDirectory.make(options, sessionId, input)
      const logPath = dir.keptLogPath

      const env = AgentSpec.environment(options.parentEnv ?? process.env, spec, {
        RELAX_INPUT_JSON: dir.inputPath,
        RELAX_OUTPUT_JSON: dir.outputPath,
        RELAX_SESSION_IO_DIR: dir.ioDir,
        RELAX_BASE_URL: options.baseUrl,
        RELAX_SESSION_ID: sessionId,
        RELAX_ROLLOUT_MODE: launch.rolloutMode,
        RELAX_GROUP_ID: launch.groupId
      })

      const agent = yield* Effect.acquireRelease(
        ProcessGroup.start({ command: spec.command, cwd: spec.cwd, env, logPath: dir.logPath }).pipe(
          Effect.mapError((detail) =>
            new SessionError.AgentExecutionError({ sessionId, reason: "spawn", detail, logTail: "", logPath })
          )
        ),
        (agent) => ProcessGroup.terminate(agent, grace)
      )

      const ended = yield* Effect.raceFirst(
        Effect.promise(() => agent.exited).pipe(Effect.map((exit) => ({ _tag: "Exited" as const, exit }))),
        ActiveBudget.timeUp(budget, launch.firstRequest).pipe(Effect.map((up) => ({ _tag: "Expired" as const, up })))
      )
      // Leftover members (a backgrounded child of a finished agent) are stopped before the output is read.
      yield* ProcessGroup.terminate(agent, grace)
      const logTail = yield* SessionDirectory.readTail(dir.logPath)

      if (ended._tag === "Expired") {
        return yield* ActiveBudget.timeoutError(sessionId, budget, ended.up, { logTail, logPath })
      }
      const { code, signal } = ended.exit
      if (signal !== null) {
        return yield* new SessionError.AgentExecutionError({
          sessionId,
          reason: "signal",
          exitCode: -signalNumber(signal),
          signal,
          logTail,
          logPath
        })
      }
      const exitCode = code ?? -9
      if (exitCode !== 0) {
        return yield* new SessionError.AgentExecutionError({ sessionId, reason: "exit", exitCode, logTail, logPath })
      }
      return yield* parseOutputOrFail(
        sessionId,
        yield* SessionDirectory.readOutput(dir.outputPath),
        exitCode,
        logTail,
        logPath
      )
    }))

  return {
    timeoutSeconds: spec.timeoutSeconds,
    makeBudget: makeBudget.pipe(Effect.withSpan("Supervisor.makeBudget")),
    run: (launch) =>
      run(launch).pipe(Effect.withSpan("Supervisor.run", { attributes: { sessionId: launch.sessionId } }))
  }
}
