/**
 * What a rollout tells its operator: `AGENTIC ROLLOUT event=...` lines (docs/outputs.md "Event lines"), status lines
 * such as `Dropped 1 group`, a progress bar per step, and debug dumps.
 *
 * **Details**
 * ANSI badges and the progress bar appear only on a TTY; a log file or pipe gets plain lines that `grep` can find
 * (`AGENTIC ROLLOUT event=accounting_end rollout=0 ...`). Field values print as the reference prints them (Python's
 * `str`): `True` / `False`, and a dict as `{'key': value}`; a field whose value is `undefined` or `null` is left out.
 * The lines themselves are pure text (src/observability/EventLine.ts); the files are written by `Outputs` (through
 * `Files.writeFileAtomic`).
 */
import { Context, Data, Duration, Effect, Layer, type Scope } from "effect"
import * as EventLine from "../../src/observability/EventLine.ts"

/** How often a step's progress is printed as a status line without a TTY. */
export const STATUS_INTERVAL = Duration.seconds(30)

/** Where lines go. `progress` receives the bar's current text (only called on a TTY). */
export interface Sink {
  readonly isTTY: boolean
  readonly line: (text: string) => void
  readonly progress: (text: string | undefined) => void
}

export interface ProgressOptions {
  /** e.g. `Rollout 3 generation` or `Eval gsm8k`. */
  readonly description: string
  readonly total: number
  readonly unit: "session" | "sample"
  /** Show `prepared=M` next to `scored=N` (with `--agentic-prelaunch`). */
  readonly showPrepared: boolean
}

/** A step's progress: completed sessions count as scored. */
export interface Progress {
  readonly advance: (sessions: number) => Effect.Effect<void>
  readonly setPrepared: (groups: number) => Effect.Effect<void>
  readonly grow: (sessions: number) => Effect.Effect<void>
  readonly snapshot: Effect.Effect<{ readonly scored: number; readonly total: number; readonly prepared: number }>
}

/**
 * A file under `--output-dir` or `--save-debug-rollout-data` could not be written (after a retry). `fallback` is where
 * its content was saved instead, when that worked.
 */
export class OutputWriteError extends Data.TaggedError("OutputWriteError")<{
  readonly path: string
  readonly detail: string
  readonly fallback?: string | undefined
}> {
  override get message(): string {
    const kept = this.fallback === undefined
      ? "It could not be saved anywhere else either."
      : `Its content was saved to ${this.fallback} instead (move it there once the directory is fixed).`
    return `cannot write ${this.path}: ${this.detail}. ${kept} The rollout stopped; free space or fix the directory's ` +
      "permissions (or choose another --output-dir / --save-debug-rollout-data), then run again."
  }
}

export interface TelemetryShape {
  readonly isTTY: boolean
  /** `AGENTIC ROLLOUT event=<event> key=value ...` */
  readonly event: (event: string, fields: Readonly<Record<string, EventLine.FieldValue>>) => Effect.Effect<void>
  /** `AGENTIC <message>` (e.g. `Dropped 1 group`, `Filtered 1 group`). */
  readonly status: (message: string) => Effect.Effect<void>
  readonly info: (message: string) => Effect.Effect<void>
  readonly warn: (message: string) => Effect.Effect<void>
  readonly error: (message: string) => Effect.Effect<void>
  /**
   * A progress bar for the scope's lifetime, drawn on a TTY; without one (CI, cluster logs) a one-line status
   * (`AGENTIC Rollout 3 generation: 5/16 session [scored=5]`) is printed every {@link STATUS_INTERVAL} instead.
   */
  readonly progress: (options: ProgressOptions) => Effect.Effect<Progress, never, Scope.Scope>
}

const postfixOf = (options: ProgressOptions, scored: number, prepared: number): string =>
  options.showPrepared ? `scored=${scored}, prepared=${prepared}` : `scored=${scored}`

const renderBar = (options: ProgressOptions, scored: number, total: number, prepared: number): string => {
  const width = 24
  const filled = total === 0 ? width : Math.min(width, Math.round((scored / total) * width))
  return `${options.description}: ${"#".repeat(filled)}${
    ".".repeat(width - filled)
  } ${scored}/${total} ${options.unit} [${postfixOf(options, scored, prepared)}]`
}

/** The periodic status line that stands for the bar without a TTY (no `AGENTIC` badge). */
export const formatProgressStatus = (
  options: ProgressOptions,
  scored: number,
  total: number,
  prepared: number
): string => `${options.description}: ${scored}/${total} ${options.unit} [${postfixOf(options, scored, prepared)}]`

/** Build the service over a sink. */
export const make = (sink: Sink): TelemetryShape => {
  return {
    isTTY: sink.isTTY,
    event: Effect.fn("Telemetry.event")(
      function*(event: string, fields: Readonly<Record<string, EventLine.FieldValue>>) {
        sink.line(EventLine.formatEvent(event, fields, sink.isTTY))
      }
    ),
    status: Effect.fn("Telemetry.status")(function*(message: string) {
      sink.line(EventLine.formatStatus(message, sink.isTTY))
    }),
    info: Effect.fn("Telemetry.info")(function*(message: string) {
      sink.line(message)
    }),
    warn: Effect.fn("Telemetry.warn")(function*(message: string) {
      sink.line(`WARNING ${message}`)
    }),
    error: Effect.fn("Telemetry.error")(function*(message: string) {
      sink.line(`ERROR ${message}`)
    }),
    progress: Effect.fn("Telemetry.progress")(function*(options: ProgressOptions) {
      const progress = yield* Effect.acquireRelease(
        Effect.sync((): Progress => {
          let scored = 0
          let total = options.total
          let prepared = 0
          const draw = () => {
            if (sink.isTTY) sink.progress(renderBar(options, scored, total, prepared))
          }
          draw()
          return {
            advance: (sessions) =>
              Effect.sync(() => {
                scored = Math.min(total, scored + sessions)
                draw()
              }),
            setPrepared: (groups) =>
              Effect.sync(() => {
                prepared = groups
                draw()
              }),
            grow: (sessions) =>
              Effect.sync(() => {
                total += sessions
                draw()
              }),
            snapshot: Effect.sync(() => ({ scored, total, prepared }))
          }
        }),
        () => Effect.sync(() => sink.progress(undefined))
      )
      if (!sink.isTTY) {
        yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
          yield* Effect.sleep(STATUS_INTERVAL)
          const { scored, total, prepared } = yield* progress.snapshot
          sink.line(EventLine.formatStatus(formatProgressStatus(options, scored, total, prepared), false))
        })))
      }
      return progress
    })
  }
}

/** A sink over the process's stdout; the bar is drawn on stderr's last line when stderr is a TTY. */
export const processSink = (): Sink => {
  const tty = process.stdout.isTTY === true && process.stderr.isTTY === true
  let bar: string | undefined
  return {
    isTTY: tty,
    line: (text) => {
      if (tty && bar !== undefined) process.stderr.write("\r\u001b[2K")
      process.stdout.write(`${text}\n`)
      if (tty && bar !== undefined) process.stderr.write(bar)
    },
    progress: (text) => {
      if (!tty) return
      // A finished bar stays on screen as a completed line; a live one is redrawn in place.
      if (text === undefined) {
        if (bar !== undefined) process.stderr.write("\n")
      } else {
        process.stderr.write(`\r\u001b[2K${text}`)
      }
      bar = text
    }
  }
}

/** What a memory sink collected (tests). */
export interface Captured {
  readonly lines: Array<string>
  readonly frames: Array<string>
}

/** A sink that keeps every line and progress frame in memory. */
export const memorySink = (isTTY = false): Sink & { readonly captured: Captured } => {
  const captured: Captured = { lines: [], frames: [] }
  return {
    isTTY,
    captured,
    line: (text) => {
      captured.lines.push(text)
    },
    progress: (text) => {
      if (text !== undefined) captured.frames.push(text)
    }
  }
}

export class Telemetry extends Context.Service<Telemetry, TelemetryShape>()("relax-agentic/Telemetry") {
  /** Lines on stdout, the progress bar on a TTY stderr. */
  static readonly layer: Layer.Layer<Telemetry> = Layer.sync(Telemetry, () => make(processSink()))
  /** Over any sink (e.g. `memorySink()` in tests). */
  static readonly layerSink = (sink: Sink): Layer.Layer<Telemetry> => Layer.succeed(Telemetry, make(sink))
}
