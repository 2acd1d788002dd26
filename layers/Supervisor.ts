/**
 * The Supervisor: runs one agent per Session and reports how it ended.
 *
 * **Details**
 * Two executors share one interface:
 * - `LocalProcess` runs `/bin/bash -lc <--agent-command>` in `--agent-cwd` as the leader of its own process group,
 *   with the parent's environment + `--agent-env` + the seven `RELAX_*` variables, a per-session IO directory
 *   (`RELAX_SESSION_IO_DIR`, holding `session_input.json`, `session_output.json` and `run.log`), and stdout +
 *   stderr appended to the log file.
 * - `InProcess` calls an Effect function standing for the agent (simulations under TestClock, TS-native harnesses).
 *
 * Shutdown is fiber interruption: interrupting `run` sends SIGTERM to the whole process group, SIGKILL after the
 * grace period (5 s), and waits until no member is left, so a backgrounded grandchild (`sleep 1000 &`) is reaped
 * too. The same group cleanup runs after a normal exit. The active-time budget (`ActiveBudget`) is raced against
 * the agent; when it expires the agent is stopped with a timeout `AgentExecutionError`.
 */
import { Cause, Context, Duration, Effect, Exit, Layer, Result } from "effect"
import type { Schema, Scope } from "effect"
import { spawn, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import sharp from "sharp"
import * as AgentSpec from "../src/session/AgentSpec.ts"
import { AgentExecutionError, AgentSpecError, SessionInputError } from "../src/session/errors.ts"
import * as SessionInput from "../src/session/SessionInput.ts"
import * as SessionOutput from "../src/session/SessionOutput.ts"
import * as ActiveBudget from "./ActiveBudget.ts"

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
  /** Write each log to `<logDir>/<sessionId>.log` (kept) instead of the IO directory. */
  readonly logDir?: string | undefined
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
        reason: `managed agent cwd must be an existing directory: ${cwd}`
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

const errorText = (error: unknown): string => error instanceof Error ? error.message : String(error)

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

// ---------------------------------------------------------------------------------------------------------------
// Process group

interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

interface Agent {
  readonly pid: number
  readonly exited: Promise<Exited>
  readonly hasExited: () => boolean
}

/**
 * Members of process group `pgid` that are still running, read from `/proc` (Linux).
 *
 * **Details**
 * `kill(-pgid, 0)` also succeeds for zombies: a killed grandchild re-parented to a PID 1 that does not reap would
 * keep the group "alive" forever. Zombies (`Z`) and dead (`X`) entries are therefore not counted. Returns
 * `undefined` where `/proc` is not available.
 */
export const liveGroupMembers = (pgid: number): ReadonlyArray<number> | undefined => {
  let entries: Array<string>
  try {
    entries = Fs.readdirSync("/proc")
  } catch {
    return undefined
  }
  const members: Array<number> = []
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const state = processState(Number(entry))
    if (state !== undefined && state.pgrp === pgid && state.state !== "Z" && state.state !== "X") {
      members.push(Number(entry))
    }
  }
  return members
}

/** State letter and process group of `pid` from `/proc/<pid>/stat`, or `undefined` when it is gone. */
export const processState = (pid: number): { readonly state: string; readonly pgrp: number } | undefined => {
  let stat: string
  try {
    stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return undefined
  }
  // The command name may contain spaces and parentheses: the fields start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const state = fields[0]
  const pgrp = Number(fields[2])
  return state === undefined ? undefined : { state, pgrp }
}

const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch {
    return false
  }
  // The cheap check says "some member exists"; only then pay for the /proc scan that discounts zombies.
  const members = liveGroupMembers(pgid)
  return members === undefined || members.length > 0
}

const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: the group is already gone.
  }
}

const pollInterval = Duration.millis(25)

/** Wait (polling) until the group is empty and the leader reaped, for at most `limit`; true when it happened. */
const awaitGroupGone = (agent: Agent, limit: Duration.Duration): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const isGone = () => agent.hasExited() && !groupAlive(agent.pid)
    const polls = Math.max(1, Math.ceil(Duration.toMillis(limit) / Duration.toMillis(pollInterval)))
    for (let i = 0; i < polls; i++) {
      if (isGone()) return true
      yield* Effect.sleep(pollInterval)
    }
    return isGone()
  })

/** SIGTERM to the whole group, SIGKILL after `grace`, then wait for the leader and every member. */
const terminateGroup = (agent: Agent, grace: Duration.Duration): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (agent.hasExited() && !groupAlive(agent.pid)) return
    signalGroup(agent.pid, "SIGTERM")
    if (yield* awaitGroupGone(agent, grace)) return
    signalGroup(agent.pid, "SIGKILL")
    if (!(yield* awaitGroupGone(agent, Duration.seconds(5)))) {
      yield* Effect.logWarning(`agent process group ${agent.pid} still has members 5 s after SIGKILL`)
    }
  })

const spawnAgent = (
  spec: AgentSpec.AgentSpec,
  env: Record<string, string>,
  logPath: string
): Effect.Effect<Agent, string> =>
  Effect.callback<Agent, string>((resume) => {
    let fd: number
    try {
      fd = Fs.openSync(logPath, "a")
    } catch (error) {
      resume(Effect.fail(`cannot open the log ${logPath}: ${errorText(error)}`))
      return
    }
    let child: ChildProcess
    try {
      // stdout and stderr go straight to the log file: no pipe that a backgrounded grandchild could hold open.
      child = spawn("/bin/bash", ["-lc", spec.command], {
        cwd: spec.cwd,
        env,
        detached: true,
        stdio: ["ignore", fd, fd]
      })
    } catch (error) {
      Fs.closeSync(fd)
      resume(Effect.fail(errorText(error)))
      return
    }
    Fs.closeSync(fd)
    let exit: Exited | undefined
    const exited = new Promise<Exited>((resolve) => {
      child.once("exit", (code, signal) => {
        exit = { code, signal }
        resolve(exit)
      })
    })
    child.once("error", (error) => {
      if (child.pid === undefined) resume(Effect.fail(errorText(error)))
    })
    child.once("spawn", () => {
      const pid = child.pid
      if (pid === undefined) resume(Effect.fail("the process has no pid"))
      else resume(Effect.succeed({ pid, exited, hasExited: () => exit !== undefined }))
    })
  })

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

const localProcess = (options: LocalProcessOptions): SupervisorShape => {
  const spec = options.spec
  const grace = Duration.fromInputUnsafe(options.killGrace ?? Duration.seconds(5))
  const materialize = makeMaterializer()
  const makeBudget = ActiveBudget.make(spec.timeoutSeconds)

  const run = (launch: SessionLaunch) =>
    Effect.scoped(Effect.gen(function*() {
      const { sessionId } = launch
      const budget = launch.budget ?? (yield* makeBudget.pipe(Effect.tap((b) => b.start)))
      const inputFile = yield* materialize(launch.input, sessionId)
      const keep = options.keepSessionIo === true

      const ioDir = yield* Effect.acquireRelease(
        Effect.promise(() => FsPromises.mkdtemp(Path.join(options.ioRoot ?? Os.tmpdir(), IoDirPrefix))),
        (dir) => keep ? Effect.void : Effect.promise(() => FsPromises.rm(dir, { recursive: true, force: true }))
      )
      const inputPath = Path.join(ioDir, InputFileName)
      const outputPath = Path.join(ioDir, OutputFileName)
      let logPath = Path.join(ioDir, LogFileName)
      if (options.logDir !== undefined) {
        const logDir = options.logDir
        yield* Effect.promise(() => FsPromises.mkdir(logDir, { recursive: true }))
        logPath = Path.join(logDir, `${safeFileName(sessionId)}.log`)
      }
      const keptLogPath = options.logDir !== undefined || keep ? logPath : undefined
      yield* Effect.promise(() => FsPromises.writeFile(inputPath, JSON.stringify(inputFile), "utf8"))

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
        spawnAgent(spec, env, logPath).pipe(
          Effect.mapError((detail) =>
            new AgentExecutionError({ sessionId, reason: "spawn", detail, logTail: "", logPath: keptLogPath })
          )
        ),
        (agent) => terminateGroup(agent, grace)
      )

      const ended = yield* Effect.raceFirst(
        Effect.promise(() => agent.exited).pipe(Effect.map((exit) => ({ _tag: "Exited" as const, exit }))),
        budget.expired.pipe(Effect.as({ _tag: "Expired" as const }))
      )
      // Leftover members (a backgrounded child of a finished agent) are stopped before the output is read.
      yield* terminateGroup(agent, grace)
      const logTail = yield* readTail(logPath)

      if (ended._tag === "Expired") {
        return yield* new AgentExecutionError({
          sessionId,
          reason: "timeout",
          timeoutSeconds: budget.totalSeconds,
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

  return { timeoutSeconds: spec.timeoutSeconds, makeBudget, run }
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
        budget.expired.pipe(Effect.as({ _tag: "Expired" as const }))
      )
      if (ended._tag === "Expired") {
        return yield* new AgentExecutionError({
          sessionId,
          reason: "timeout",
          timeoutSeconds: budget.totalSeconds,
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

  return { timeoutSeconds, makeBudget, run }
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
