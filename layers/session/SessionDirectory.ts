/**
 * Kept logs (`<output-dir>/logs/<session_id>.log`) and the per-Session IO directory of a process agent: its
 * `session_input.json` (dataset images converted), `session_output.json` and `run.log`.
 *
 * **Details**
 * The directory is `RELAX_SESSION_IO_DIR`, made under the OS temp directory (or `ioRoot`) as
 * `relax-agentic-command-XXXXXX` and removed when the Session ends (unless kept for debugging). The agent's stdout and
 * stderr go to its `run.log`; with a log directory, the log of a failed Session (of every Session with
 * `keepLogs: "all"`) is moved to `<logDir>/<sessionId>.log` when the Session ends (docs/outputs.md, "logs/"). A
 * dataset image becomes an `image_url` before the agent starts: a path or bytes are converted to an RGB PNG
 * `data:` URI, once per prepared row (a Group shares one). A directory or file that cannot be prepared is an
 * `AgentExecutionError` (reason `prepare`), not a defect.
 */
import { Cause, Effect, Exit } from "effect"
import type { Scope } from "effect"
import * as FsPromises from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as SessionError from "../../src/session/SessionError.ts"
import * as SessionInput from "../../src/session/SessionInput.ts"
import * as Thrown from "../../src/Thrown.ts"
import * as ImageCodec from "../platform/ImageCodec.ts"

/** File names inside a Session's IO directory. */
export const InputFileName = "session_input.json"
export const OutputFileName = "session_output.json"
export const LogFileName = "run.log"
/** Prefix of the per-session IO directories (as in the reference launcher). */
export const IoDirPrefix = "relax-agentic-command-"
/** How much of the log end is attached to an `AgentExecutionError`. */
export const LogTailBytes = 8192

// ---------------------------------------------------------------------------------------------------------------
// The input file, with images converted

/**
 * One image as an `image_url` URL: a `data:` / `http(s)://` URL is kept; a path or bytes are loaded, converted to
 * RGB PNG and encoded as a `data:image/png;base64,` URI.
 */
export const imageUrl = (source: SessionInput.ImageSource): Effect.Effect<string, string> => {
  if (source._tag === "Url") return Effect.succeed(source.url)
  return ImageCodec.toRgbPng(source._tag === "Path" ? source.path : source.bytes).pipe(
    Effect.mapError((reason) =>
      source._tag === "Path" ? `cannot load image ${source.path}: ${reason}` : `cannot decode image bytes: ${reason}`
    ),
    Effect.map((png) => `data:image/png;base64,${png.toString("base64")}`)
  )
}

const imageError = (sessionId: string, index: number, reason: string) =>
  new SessionError.SessionInputError({ row: sessionId, field: `images[${index}]`, detail: reason })

/**
 * The content of `session_input.json` for a prepared row, its images loaded once per row (a Group shares one row):
 * one cache per executor.
 */
export const inputFiles = () => {
  const cache = new WeakMap<SessionInput.Prepared, SessionInput.SessionInputFile>()
  return (
    prepared: SessionInput.Prepared,
    sessionId: string
  ): Effect.Effect<SessionInput.SessionInputFile, SessionError.SessionInputError> =>
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
// The directory and the kept log

/** Where a Session's IO directory goes and whether its log is kept. */
export interface Options {
  /** Parent of the IO directories. Default: the OS temp directory. */
  readonly ioRoot?: string | undefined
  /** Keep the IO directory after the run (debugging). Default false. */
  readonly keepSessionIo?: boolean | undefined
  /** Where logs are kept, as `<logDir>/<sessionId>.log`. Default: no log is kept. */
  readonly logDir?: string | undefined
  /** With `logDir`: keep the logs of `"failed"` Sessions only (default), or of `"all"`. */
  readonly keepLogs?: "failed" | "all" | undefined
}

/** A prepared IO directory: the paths the agent's environment names, and where its log will be. */
export interface SessionDirectory {
  readonly ioDir: string
  readonly inputPath: string
  readonly outputPath: string
  readonly logPath: string
  /** Where the log can be read after the Session (kept, or left in a kept IO directory); undefined when it is not. */
  readonly keptLogPath: string | undefined
}

/**
 * Make the Session's IO directory and write its input file, in the caller's scope: closing the scope keeps the log
 * (a failed Session's, or every one's with `keepLogs: "all"`) and then removes the directory.
 */
export const make = (
  options: Options,
  sessionId: string,
  inputFile: SessionInput.SessionInputFile
): Effect.Effect<SessionDirectory, SessionError.AgentExecutionError, Scope.Scope> =>
  Effect.gen(function*() {
    const keep = options.keepSessionIo === true
    const ioRoot = options.ioRoot ?? Os.tmpdir()
    const ioDir = yield* Effect.acquireRelease(
      prepareStep(sessionId, `create the session directory in ${ioRoot}`, () =>
        FsPromises.mkdtemp(Path.join(ioRoot, IoDirPrefix))),
      (dir) =>
        keep ? Effect.void : removeDir(dir)
    )
    const inputPath = Path.join(ioDir, InputFileName)
    const logPath = Path.join(ioDir, LogFileName)
    // The log is written in the IO directory (the agent contract) and moved to `logDir` when it is kept. This
    // finalizer runs before the IO directory's (scopes close in reverse order), so the move always finds it.
    const keptLogPath = options.logDir === undefined
      ? (keep ? logPath : undefined)
      : keptLogFile(options.logDir, sessionId)
    if (options.logDir !== undefined) {
      const target = keptLogFile(options.logDir, sessionId)
      const keepLogs = options.keepLogs ?? "failed"
      yield* Effect.addFinalizer((exit) => {
        const failed = Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)
        return failed || keepLogs === "all" ? keepLog(logPath, target) : Effect.void
      })
    }
    yield* prepareStep(sessionId, `write ${inputPath}`, () =>
      FsPromises.writeFile(inputPath, JSON.stringify(inputFile), "utf8"))
    return { ioDir, inputPath, outputPath: Path.join(ioDir, OutputFileName), logPath, keptLogPath }
  })

/** The last `LogTailBytes` of the log, decoded as UTF-8 with replacement characters. */
export const readTail = (logPath: string): Effect.Effect<string> =>
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

/** The output file's text, or undefined when the agent wrote none. */
export const readOutput = (path: string): Effect.Effect<string | undefined> =>
  Effect.promise(() => FsPromises.readFile(path, "utf8").then((text) => text, () => undefined))

const safeFileName = (name: string): string => name.replace(/[^0-9A-Za-z_.-]/g, "-") || "unknown"

/** A failure to prepare the Session's directory or files, before any process starts. */
const prepareError = (sessionId: string, what: string, error: unknown) =>
  new SessionError.AgentExecutionError({
    sessionId,
    reason: "prepare",
    detail: `cannot ${what}: ${Thrown.messageOf(error)}`,
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
    Effect.catch((error) =>
      Effect.logWarning(`could not keep the agent log ${from} as ${to}: ${Thrown.messageOf(error.cause)}`)
    )
  )

const removeDir = (dir: string): Effect.Effect<void> =>
  Effect.tryPromise(() => FsPromises.rm(dir, { recursive: true, force: true })).pipe(
    Effect.catch((error) =>
      Effect.logWarning(`could not remove the session directory ${dir}: ${Thrown.messageOf(error.cause)}`)
    )
  )
