/**
 * The Supervisor: runs one agent per Session and reports how it ended.
 *
 * **Details**
 * Two executors share one interface:
 * - `LocalProcess` runs `/bin/bash -lc <--agent-command>` in `--agent-cwd` as the leader of its own process group,
 *   with the parent's environment + `--agent-env` + the seven `RELAX_*` variables, a per-session IO directory
 *   (`RELAX_SESSION_IO_DIR`, holding `session_input.json`, `session_output.json` and `run.log`), and stdout +
 *   stderr appended to the log file. With `logDir`, the log of a failed Session (of every Session with
 *   `keepLogs: "all"`) is moved to `<logDir>/<sessionId>.log` when the Session ends. A directory or file that cannot
 *   be prepared is an `AgentExecutionError` (reason `prepare`), not a defect. The process-group mechanics live in
 *   `ProcessGroup.ts` (why `node:child_process` and not `effect/process`: docs/architecture.md).
 * - `InProcess` calls an Effect function standing for the agent (simulations under TestClock, TS-native harnesses).
 *
 * Shutdown is fiber interruption: interrupting `run` sends SIGTERM to the whole process group, SIGKILL after the
 * grace period (5 s), and waits until no member is left, so a backgrounded grandchild (`sleep 1000 &`) is reaped
 * too. The same group cleanup runs after a normal exit. The active-time budget (`ActiveBudget`) is raced against
 * the agent; when it expires the agent is stopped with a timeout `AgentExecutionError`.
 */
import { Cause, Context, Duration, Effect, Exit, Layer, Option, Result } from "effect"
import type { Schema, Scope } from "effect"
import * as FsPromises from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import sharp from "sharp"
import * as AgentSpec from "../../src/session/AgentSpec.ts"
import { AgentExecutionError, AgentSpecError, SessionInputError } from "../../src/session/errors.ts"
import * as SessionInput from "../../src/session/SessionInput.ts"
import * as SessionOutput from "../../src/session/SessionOutput.ts"
import * as ActiveBudget from "./ActiveBudget.ts"
import * as ProcessGroup from "./ProcessGroup.ts"

/** File names inside a Session's IO directory. */
export const InputFileName = "session_input.json"
export const OutputFileName = "session_output.json"
export const LogFileName = "run.log"
/** Prefix of the per-session IO directories (as in the reference launcher). */
export const IoDirPrefix = "relax-agentic-command-"
/** How much of the log end is attached to an `AgentExecutionError`. */
export const LogTailBytes = 8192

/** One Session to run. */
export interface SessionLaunch {
  readonly sessionId: string
  readonly groupId: string
  readonly rolloutMode: AgentSpec.RolloutMode
  /** The prepared dataset row (`SessionInput.fromRow`); images are converted to `image_url` before the agent starts. */
  readonly input: SessionInput.Prepared
  /**
   * The Session's active-time budget, driven by the scheduler (`start` on lease, `pause` when parked, `resume`).
   * Make it with `Supervisor.makeBudget` in the Session's scope. When absent, a budget of `--agent-timeout` starts
   * with the agent.
   */
  readonly budget?: ActiveBudget.ActiveBudget | undefined
  /**
   * Completes once the Session sent its first model request (the Scheduler's ticket). When given, an agent that sends
   * none within `--agent-timeout` of its start is stopped with a timeout: the active-time budget only runs in Runtime,
   * which such an agent never reaches, so it would otherwise hold its Group's slot (and its step) forever.
   */
  readonly firstRequest?: Effect.Effect<void> | undefined
}

export interface SupervisorShape {
  /** `--agent-timeout` in seconds. */
  readonly timeoutSeconds: number
  /** A fresh, not yet started budget of `--agent-timeout` for one Session, living in the caller's scope. */
  readonly makeBudget: Effect.Effect<ActiveBudget.ActiveBudget, never, Scope.Scope>
  /**
   * Run the agent of one Session until it exits, and read its output.
   *
   * **Details**
   * Fails with `AgentExecutionError` on a non-zero exit, a signal, an expired budget, invalid output or a failed
   * start; with `SessionInputError` when a dataset image cannot be loaded. Interrupting the fiber stops the agent
   * (its whole process group) and removes the IO directory before the interruption completes.
   */
  readonly run: (
    launch: SessionLaunch
  ) => Effect.Effect<SessionOutput.AgentOutcome, AgentExecutionError | SessionInputError>
}

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

/** What an in-process agent is given: the same facts a process gets through its environment and input file. */
export interface InProcessAgentInput {
  readonly sessionId: string
  readonly groupId: string
  readonly rolloutMode: AgentSpec.RolloutMode
  readonly baseUrl: string
  readonly input: SessionInput.SessionInputFile
  /** `--agent-env`. */
  readonly env: Readonly<Record<string, string>>
}

/**
 * An agent as an Effect function. Its result is read like `RELAX_OUTPUT_JSON`: a string is parsed as the file,
 * an array is a list of explicit records, an object is one JSON value, `undefined` is no output. A failure is
 * reported like a non-zero exit (code 1).
 */
export type InProcessAgent = (
  input: InProcessAgentInput
) => Effect.Effect<Schema.Json | undefined | void, unknown>

export interface InProcessOptions {
  readonly baseUrl?: string | undefined
  /** `--agent-timeout`; default 1800. */
  readonly timeoutSeconds?: number | undefined
  readonly env?: Readonly<Record<string, string>> | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Agent spec (startup)

const expandHome = (path: string): string =>
  path === "~" ? Os.homedir() : path.startsWith("~/") ? Path.join(Os.homedir(), path.slice(2)) : path

/**
 * Validate the agent options at startup: `AgentSpec.make` plus `--agent-cwd` resolved (with `~` expanded) to an
 * existing directory.
 */
export const resolveAgentSpec = (input: AgentSpec.AgentSpecInput): Effect.Effect<AgentSpec.AgentSpec, AgentSpecError> =>
  Effect.gen(function*() {
    const spec = yield* Effect.fromResult(AgentSpec.make(input))
    const cwd = Path.resolve(expandHome(spec.cwd))
    const isDirectory = yield* Effect.promise(() =>
      FsPromises.stat(cwd).then((stat) => stat.isDirectory(), () => false)
    )
    if (!isDirectory) {
      return yield* new AgentSpecError({
        option: "--agent-cwd",
        reason: "not-a-directory",
        detail: `managed agent cwd must be an existing directory: ${cwd}`
      })
    }
    return { ...spec, cwd }
  })

// ---------------------------------------------------------------------------------------------------------------
// Images at the process boundary

const imageError = (sessionId: string, index: number, reason: string) =>
  new SessionInputError({ row: sessionId, field: `images[${index}]`, reason })

/**
 * One image as an `image_url` URL: a `data:` / `http(s)://` URL is kept; a path or bytes are loaded, converted to
 * RGB PNG and encoded as a `data:image/png;base64,` URI.
 */
export const imageUrl = (source: SessionInput.ImageSource): Effect.Effect<string, string> => {
  if (source._tag === "Url") return Effect.succeed(source.url)
  return Effect.tryPromise({
    try: () =>
      sharp(source._tag === "Path" ? source.path : source.bytes)
        .removeAlpha()
        .toColourspace("srgb")
        .png()
        .toBuffer(),
    catch: (error) =>
      source._tag === "Path"
        ? `cannot load image ${source.path}: ${errorText(error)}`
        : `cannot decode image bytes: ${errorText(error)}`
  }).pipe(Effect.map((png) => `data:image/png;base64,${png.toString("base64")}`))
}

const errorText = ProcessGroup.errorText

/** Build `session_input.json` content, loading images once per prepared row (a Group shares one row). */
const makeMaterializer = () => {
  const cache = new WeakMap<SessionInput.Prepared, SessionInput.SessionInputFile>()
  return (prepared: SessionInput.Prepared, sessionId: string) =>
    Effect.gen(function*() {
      const cached = cache.get(prepared)
      if (cached !== undefined) return cached
      const urls = yield* Effect.forEach(
        prepared.images,
        (source, index) => imageUrl(source).pipe(Effect.mapError((reason) => imageError(sessionId, index, reason))),
        { concurrency: 4 }
      )
      const file = SessionInput.toInputFile(prepared, urls)
      cache.set(prepared, file)
      return file
    })
}

/** The last `LogTailBytes` of the log, decoded as UTF-8 with replacement characters. */
const readTail = (logPath: string): Effect.Effect<string> =>
  Effect.promise(async () => {
    let handle: FsPromises.FileHandle | undefined
    try {
      handle = await FsPromises.open(logPath, "r")
      const { size } = await handle.stat()
      const length = Math.min(size, LogTailBytes)
      const buffer = Buffer.alloc(length)
      await handle.read(buffer, 0, length, size - length)
      return new TextDecoder("utf-8").decode(buffer)
    } catch {
      return ""
    } finally {
      await handle?.close()
    }
  })

const readOutput = (path: string): Effect.Effect<string | undefined> =>
  Effect.promise(() => FsPromises.readFile(path, "utf8").then((text) => text, () => undefined))

const safeFileName = (name: string): string => name.replace(/[^0-9A-Za-z_.-]/g, "-") || "unknown"

const signalNumber = (signal: NodeJS.Signals): number => Os.constants.signals[signal] ?? 9

const parseOutputOrFail = (
  sessionId: string,
  text: string | undefined,
  exitCode: number,
  logTail: string,
  logPath: string | undefined
): Effect.Effect<SessionOutput.AgentOutcome, AgentExecutionError> => {
  const parsed = SessionOutput.parse(text)
  if (Result.isFailure(parsed)) {
    return Effect.fail(
      new AgentExecutionError({ sessionId, reason: "invalid-output", detail: parsed.failure.message, logTail, logPath })
    )
  }
  return Effect.succeed({ sessionId, exitCode, ...parsed.success, logTail })
}

/** A failure to prepare the Session's directory or files, before any process starts. */
const prepareError = (sessionId: string, what: string, error: unknown) =>
  new AgentExecutionError({
    sessionId,
    reason: "prepare",
    detail: `cannot ${what}: ${errorText(error)}`,
    logTail: ""
  })

/** Run a file-system step of the Session's preparation, failing with a typed `prepare` error (never a defect). */
const prepareStep = <A>(sessionId: string, what: string, run: () => Promise<A>) =>
  Effect.tryPromise({ try: run, catch: (error) => prepareError(sessionId, what, error) })

/** Where a kept log ends up: `<logDir>/<sessionId>.log` (absolute, so error messages name it exactly). */
const keptLogFile = (logDir: string, sessionId: string) => Path.resolve(logDir, `${safeFileName(sessionId)}.log`)

/**
 * Move the Session's log to where it is kept (rename; copy + remove across file systems). A failure is logged, not
 * raised: losing a log must not fail a Session that is already ending.
 */
const keepLog = (from: string, to: string): Effect.Effect<void> =>
  Effect.tryPromise(async () => {
    await FsPromises.mkdir(Path.dirname(to), { recursive: true })
    try {
      await FsPromises.rename(from, to)
    } catch {
      await FsPromises.copyFile(from, to)
      await FsPromises.rm(from, { force: true })
    }
  }).pipe(
    Effect.catch((error) => Effect.logWarning(`could not keep the agent log ${from} as ${to}: ${errorText(error.cause)}`))
  )

const removeDir = (dir: string): Effect.Effect<void> =>
  Effect.tryPromise(() => FsPromises.rm(dir, { recursive: true, force: true })).pipe(
    Effect.catch((error) => Effect.logWarning(`could not remove the session directory ${dir}: ${errorText(error.cause)}`))
  )

/** The `detail` of a timeout for an agent that never sent its first model request. */
export const NoFirstRequest = "without sending its first model request"

/**
 * Completes when the Session must be stopped for time: its active-time budget ran out, or (with `firstRequest`) it
 * sent no model request within the budget's total of its start.
 */
const timeUp = (
  launch: SessionLaunch,
  budget: ActiveBudget.ActiveBudget
): Effect.Effect<{ readonly _tag: "Expired"; readonly detail?: string }> => {
  const expired = budget.expired.pipe(Effect.as({ _tag: "Expired" as const }))
  if (launch.firstRequest === undefined) return expired
  const silent = launch.firstRequest.pipe(
    Effect.timeoutOption(Duration.seconds(budget.totalSeconds)),
    Effect.flatMap((sent) =>
      Option.isSome(sent) ? Effect.never : Effect.succeed({ _tag: "Expired" as const, detail: NoFirstRequest })
    )
  )
  return Effect.raceFirst(expired, silent)
}

const localProcess = (options: LocalProcessOptions): SupervisorShape => {
  const spec = options.spec
  const grace = Duration.fromInputUnsafe(options.killGrace ?? Duration.seconds(5))
  const materialize = makeMaterializer()
  const makeBudget = ActiveBudget.make(spec.timeoutSeconds)
  const keepLogs = options.keepLogs ?? "failed"

  const run = (launch: SessionLaunch) =>
    Effect.scoped(Effect.gen(function*() {
      const { sessionId } = launch
      const budget = launch.budget ?? (yield* makeBudget.pipe(Effect.tap((b) => b.start)))
      const inputFile = yield* materialize(launch.input, sessionId)
      const keep = options.keepSessionIo === true
      const ioRoot = options.ioRoot ?? Os.tmpdir()

      const ioDir = yield* Effect.acquireRelease(
        prepareStep(sessionId, `create the session directory in ${ioRoot}`, () =>
          FsPromises.mkdtemp(Path.join(ioRoot, IoDirPrefix))),
        (dir) => keep ? Effect.void : removeDir(dir)
      )
      const inputPath = Path.join(ioDir, InputFileName)
      const outputPath = Path.join(ioDir, OutputFileName)
      const logPath = Path.join(ioDir, LogFileName)
      // The log is written in the IO directory (the agent contract) and moved to `logDir` when it is kept. This
      // finalizer runs before the IO directory's (scopes close in reverse order), so the move always finds it.
      const keptLogPath = options.logDir === undefined ? (keep ? logPath : undefined) : keptLogFile(options.logDir, sessionId)
      if (options.logDir !== undefined) {
        const target = keptLogFile(options.logDir, sessionId)
        yield* Effect.addFinalizer((exit) => {
          const failed = Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)
          return failed || keepLogs === "all" ? keepLog(logPath, target) : Effect.void
        })
      }
      yield* prepareStep(sessionId, `write ${inputPath}`, () =>
        FsPromises.writeFile(inputPath, JSON.stringify(inputFile), "utf8"))

      const env = AgentSpec.environment(options.parentEnv ?? process.env, spec, {
        RELAX_INPUT_JSON: inputPath,
        RELAX_OUTPUT_JSON: outputPath,
        RELAX_SESSION_IO_DIR: ioDir,
        RELAX_BASE_URL: options.baseUrl,
        RELAX_SESSION_ID: sessionId,
        RELAX_ROLLOUT_MODE: launch.rolloutMode,
        RELAX_GROUP_ID: launch.groupId
      })

      const agent = yield* Effect.acquireRelease(
        ProcessGroup.start({ command: spec.command, cwd: spec.cwd, env, logPath }).pipe(
          Effect.mapError((detail) =>
            new AgentExecutionError({ sessionId, reason: "spawn", detail, logTail: "", logPath: keptLogPath })
          )
        ),
        (agent) => ProcessGroup.terminate(agent, grace)
      )

      const ended = yield* Effect.raceFirst(
        Effect.promise(() => agent.exited).pipe(Effect.map((exit) => ({ _tag: "Exited" as const, exit }))),
        timeUp(launch, budget)
      )
      // Leftover members (a backgrounded child of a finished agent) are stopped before the output is read.
      yield* ProcessGroup.terminate(agent, grace)
      const logTail = yield* readTail(logPath)

      if (ended._tag === "Expired") {
        return yield* new AgentExecutionError({
          sessionId,
          reason: "timeout",
          timeoutSeconds: budget.totalSeconds,
          detail: ended.detail,
          logTail,
          logPath: keptLogPath
        })
      }
      const { code, signal } = ended.exit
      if (signal !== null) {
        return yield* new AgentExecutionError({
          sessionId,
          reason: "signal",
          exitCode: -signalNumber(signal),
          signal,
          logTail,
          logPath: keptLogPath
        })
      }
      const exitCode = code ?? -9
      if (exitCode !== 0) {
        return yield* new AgentExecutionError({ sessionId, reason: "exit", exitCode, logTail, logPath: keptLogPath })
      }
      return yield* parseOutputOrFail(sessionId, yield* readOutput(outputPath), exitCode, logTail, keptLogPath)
    }))

  return {
    timeoutSeconds: spec.timeoutSeconds,
    makeBudget: makeBudget.pipe(Effect.withSpan("Supervisor.makeBudget")),
    run: (launch) => run(launch).pipe(Effect.withSpan("Supervisor.run", { attributes: { sessionId: launch.sessionId } }))
  }
}

const inProcess = (agentFn: InProcessAgent, options: InProcessOptions = {}): SupervisorShape => {
  const timeoutSeconds = options.timeoutSeconds ?? AgentSpec.DefaultTimeoutSeconds
  const materialize = makeMaterializer()
  const makeBudget = ActiveBudget.make(timeoutSeconds)

  const run = (launch: SessionLaunch) =>
    Effect.scoped(Effect.gen(function*() {
      const { sessionId } = launch
      const budget = launch.budget ?? (yield* makeBudget.pipe(Effect.tap((b) => b.start)))
      const input = yield* materialize(launch.input, sessionId)
      const ended = yield* Effect.raceFirst(
        Effect.suspend(() =>
          agentFn({
            sessionId,
            groupId: launch.groupId,
            rolloutMode: launch.rolloutMode,
            baseUrl: options.baseUrl ?? "",
            input,
            env: options.env ?? {}
          })
        ).pipe(Effect.exit, Effect.map((exit) => ({ _tag: "Exited" as const, exit }))),
        timeUp(launch, budget)
      )
      if (ended._tag === "Expired") {
        return yield* new AgentExecutionError({
          sessionId,
          reason: "timeout",
          timeoutSeconds: budget.totalSeconds,
          detail: ended.detail,
          logTail: ""
        })
      }
      if (Exit.isFailure(ended.exit)) {
        return yield* new AgentExecutionError({
          sessionId,
          reason: "exit",
          exitCode: 1,
          logTail: Cause.pretty(ended.exit.cause).slice(-LogTailBytes)
        })
      }
      const parsed = SessionOutput.fromValue(ended.exit.value)
      if (Result.isFailure(parsed)) {
        return yield* new AgentExecutionError({
          sessionId,
          reason: "invalid-output",
          detail: parsed.failure.message,
          logTail: ""
        })
      }
      return { sessionId, exitCode: 0, ...parsed.success, logTail: "" }
    }))

  return {
    timeoutSeconds,
    makeBudget: makeBudget.pipe(Effect.withSpan("Supervisor.makeBudget")),
    run: (launch) => run(launch).pipe(Effect.withSpan("Supervisor.run", { attributes: { sessionId: launch.sessionId } }))
  }
}

/** The agent executor for a rollout (one per process). */
export class Supervisor extends Context.Service<Supervisor, SupervisorShape>()("relax-agentic/Supervisor") {
  /** Run `--agent-command` per Session as a supervised local process group. */
  static readonly layerLocalProcess = (options: LocalProcessOptions): Layer.Layer<Supervisor> =>
    Layer.succeed(Supervisor, localProcess(options))

  /** Run an Effect function per Session (simulations and TS-native harnesses). */
  static readonly layerInProcess = (agent: InProcessAgent, options: InProcessOptions = {}): Layer.Layer<Supervisor> =>
    Layer.succeed(Supervisor, inProcess(agent, options))

  /** The `LocalProcess` executor as a value (for callers that hold several executors). */
  static readonly localProcess = localProcess
  /** The `InProcess` executor as a value. */
  static readonly inProcess = inProcess
}
