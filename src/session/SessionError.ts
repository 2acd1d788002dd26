/**
 * The errors a Session's agent process can raise, with the text a user sees.
 *
 * **Details**
 * `AgentExecutionError` is the "expected agent-level failure that drops its Group": a non-zero exit, a signal, an
 * expired active-time budget, unusable output, a Session directory that could not be prepared, or a process that could
 * not be started. Its message follows the
 * reference wording (`Managed command agent exited with code 3.` + the log tail) so operators recognise it.
 * `SessionClosedError` is a model request of a Session that is closed: finished, or its Group dropped while the request
 * waited for the lease. The other three are startup / data errors raised before any process runs.
 */
import { Data } from "effect"

/** Python's `repr(float)` for whole numbers (`1800.0`), so timeout texts read exactly like the reference. */
export const formatSeconds = (seconds: number): string =>
  Number.isInteger(seconds) ? seconds.toFixed(1) : String(seconds)

/**
 * Why an agent run failed. `signal` is a non-zero exit caused by a signal (its `exitCode` is negative); `prepare` is a
 * Session directory or input file that could not be written (disk full, permissions), before any process started.
 */
export type AgentFailureReason = "exit" | "signal" | "timeout" | "invalid-output" | "spawn" | "prepare"

/** An agent run that ended without a usable outcome; the rollout drops the Session's Group. */
export class AgentExecutionError extends Data.TaggedError("AgentExecutionError")<{
  readonly sessionId: string
  readonly reason: AgentFailureReason
  /** The leader's exit code; negative for a signal (`-9` for SIGKILL), as the reference reports it. */
  readonly exitCode?: number | undefined
  readonly signal?: string | undefined
  /** The configured `--agent-timeout` (the total, not what was left), for `reason: "timeout"`. */
  readonly timeoutSeconds?: number | undefined
  /**
   * What was wrong, for `invalid-output` (names line and field), `spawn` and `prepare`; for a `timeout`, why it is not
   * the active-time budget (an agent that never sent its first model request).
   */
  readonly detail?: string | undefined
  /** The last 8 KiB of the agent's stdout+stderr log. */
  readonly logTail: string
  /** Where the full log is kept, when it outlives the Session (a log dir or a kept IO dir). */
  readonly logPath?: string | undefined
}> {
  override get message(): string {
    const head = (() => {
      switch (this.reason) {
        case "timeout":
          return `Managed command agent timed out after ${formatSeconds(this.timeoutSeconds ?? 0)} seconds` +
            (this.detail === undefined ? "." : ` ${this.detail}.`)
        case "exit":
        case "signal":
          return `Managed command agent exited with code ${this.exitCode ?? -9}` +
            (this.signal === undefined ? "." : ` (${this.signal}).`)
        case "invalid-output":
          return `Managed command agent produced invalid output: ${this.detail ?? "unreadable output"}`
        case "spawn":
          return `Managed command agent could not be started: ${this.detail ?? "unknown error"}`
        case "prepare":
          return `Managed command agent's session directory could not be prepared: ${
            this.detail ?? "unknown error"
          }. ` +
            `Check that the temporary directory (TMPDIR) exists, is writable and has free space.`
      }
    })()
    const where = this.logPath === undefined ? "" : `\n(full log: ${this.logPath})`
    return `${head}${where}\n${this.logTail}`.trimEnd()
  }
}

/**
 * A model request of a closed Session: it finished, or its Group was dropped while the request waited for the
 * Runtime lease. Raised by the Session registry and the first-request barrier, passed through the generation core,
 * rendered by the gateway as 404 `session_discarded`.
 */
export class SessionClosedError extends Data.TaggedError("SessionClosedError")<{ readonly sessionId: string }> {
  override get message() {
    return `Session ${this.sessionId} is closed (finished, or its Group was dropped); it accepts no more model requests.`
  }
}

/**
 * Why an agent option is invalid: `missing` (no command, no cwd), `not-a-directory` (`--agent-cwd`), `not-positive`
 * (`--agent-timeout`), `malformed-env` (an `--agent-env` entry that is not `KEY=VALUE`), `reserved-env` (a `RELAX_` key).
 */
export type AgentSpecErrorReason = "missing" | "not-a-directory" | "not-positive" | "malformed-env" | "reserved-env"

/** An invalid `--agent-command` / `--agent-cwd` / `--agent-env` / `--agent-timeout` (a startup error). */
export class AgentSpecError extends Data.TaggedError("AgentSpecError")<{
  readonly option: "--agent-command" | "--agent-cwd" | "--agent-env" | "--agent-timeout"
  readonly reason: AgentSpecErrorReason
  /** What is wrong and what to do, in words. */
  readonly detail: string
}> {
  override get message(): string {
    return `${this.option}: ${this.detail}`
  }
}

/** A dataset row that cannot become a Session input (names the row and the field). */
export class SessionInputError extends Data.TaggedError("SessionInputError")<{
  /** Row index in the dataset (0-based), or the Session id when raised at the process boundary. */
  readonly row: number | string
  readonly field: string
  readonly detail: string
}> {
  override get message(): string {
    const where = typeof this.row === "number" ? `dataset row ${this.row}` : `session ${this.row}`
    return `${where}, field '${this.field}': ${this.detail}`
  }
}

/** `RELAX_OUTPUT_JSON` content that is not a valid Session output (names the line and field). */
export class SessionOutputError extends Data.TaggedError("SessionOutputError")<{
  /** 1-based line of the JSONL record (or of the single JSON value). */
  readonly line?: number | undefined
  readonly field?: string | undefined
  readonly detail: string
}> {
  override get message(): string {
    const where = [
      this.line === undefined ? undefined : `line ${this.line}`,
      this.field === undefined ? undefined : `field '${this.field}'`
    ].filter((part) => part !== undefined)
    return where.length === 0 ? this.detail : `${where.join(", ")}: ${this.detail}`
  }
}
