/**
 * The agent spec: what `--agent-command`, `--agent-cwd`, `--agent-env` and `--agent-timeout` describe, validated
 * once at startup.
 *
 * **Details**
 * Pure validation lives here; whether `--agent-cwd` exists is checked where the file system is (the Supervisor
 * layer's `resolveAgentSpec`). Every failure is an {@link AgentSpecError} that names the option and the fix.
 */
import { Result, Schema } from "effect"
import * as SessionError from "./SessionError.ts"

/** The prefix of the variables Relax sets for every agent process; `--agent-env` may not use it. */
export const ReservedPrefix = "RELAX_"

/** Default `--agent-timeout`: the active-time budget of one Session, in seconds. */
export const DefaultTimeoutSeconds = 1800

/** A validated agent spec. */
export const AgentSpec = Schema.Struct({
  /** Run as `/bin/bash -lc <command>`. */
  command: Schema.NonEmptyString,
  /** Working directory of the agent process (absolute once resolved). */
  cwd: Schema.String,
  /** Extra environment from `--agent-env`, applied over the parent's environment. */
  env: Schema.Record(Schema.String, Schema.String),
  /** Active-time budget in seconds (> 0). */
  timeoutSeconds: Schema.Number
})
export type AgentSpec = typeof AgentSpec.Type

/** The options as given on the command line, before validation. */
export interface AgentSpecInput {
  readonly command: string | undefined
  readonly cwd: string | undefined
  readonly env?: ReadonlyArray<string> | undefined
  readonly timeoutSeconds?: number | undefined
}

/**
 * Parse `--agent-env KEY=VALUE ...`: split on the first `=`, key trimmed, value kept verbatim.
 *
 * **Details**
 * An entry without `=`, an empty key, or a key starting with `RELAX_` is rejected (those are set by Relax).
 */
export const parseEnv = (
  items: ReadonlyArray<string>
): Result.Result<Record<string, string>, SessionError.AgentSpecError> => {
  const env: Record<string, string> = {}
  for (const item of items) {
    const eq = item.indexOf("=")
    if (eq < 0) {
      return Result.fail(
        new SessionError.AgentSpecError({
          option: "--agent-env",
          reason: "malformed-env",
          detail: `entry '${item}' must have the form KEY=VALUE`
        })
      )
    }
    const key = item.slice(0, eq).trim()
    if (key.length === 0) {
      return Result.fail(
        new SessionError.AgentSpecError({
          option: "--agent-env",
          reason: "malformed-env",
          detail: `entry '${item}' has an empty key`
        })
      )
    }
    if (key.startsWith(ReservedPrefix)) {
      return Result.fail(
        new SessionError.AgentSpecError({
          option: "--agent-env",
          reason: "reserved-env",
          detail: `key '${key}' is reserved: keys starting with ${ReservedPrefix} are set by Relax for every ` +
            `agent process; rename it (the agent can map RELAX_* values to its own names in a launcher script)`
        })
      )
    }
    env[key] = item.slice(eq + 1)
  }
  return Result.succeed(env)
}

/**
 * Validate everything except the existence of `cwd`: the command is trimmed and non-empty, the timeout positive
 * and finite, the env entries well-formed.
 */
export const make = (input: AgentSpecInput): Result.Result<AgentSpec, SessionError.AgentSpecError> => {
  const refuse = (
    option: SessionError.AgentSpecError["option"],
    reason: SessionError.AgentSpecErrorReason,
    detail: string
  ) => Result.fail(new SessionError.AgentSpecError({ option, reason, detail }))
  const command = (input.command ?? "").trim()
  if (command.length === 0) {
    return refuse(
      "--agent-command",
      "missing",
      "managed agent command must be non-empty; give the shell command that starts your agent"
    )
  }
  const cwd = (input.cwd ?? "").trim()
  if (cwd.length === 0) {
    return refuse(
      "--agent-cwd",
      "missing",
      "managed agent cwd must be an existing directory: (not set); give the agent's working directory"
    )
  }
  const timeoutSeconds = input.timeoutSeconds ?? DefaultTimeoutSeconds
  if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) {
    return refuse(
      "--agent-timeout",
      "not-positive",
      `managed agent timeout must be positive (got ${timeoutSeconds}); give the budget in seconds`
    )
  }
  return Result.map(parseEnv(input.env ?? []), (env) => ({ command, cwd, env, timeoutSeconds }))
}

/** Train or eval: the value of `RELAX_ROLLOUT_MODE`. */
export const RolloutMode = Schema.Literals(["train", "eval"])
export type RolloutMode = typeof RolloutMode.Type

/** The seven variables Relax sets for every agent process (the guide's Agent Process Contract). */
export interface RelaxVariables {
  readonly RELAX_INPUT_JSON: string
  readonly RELAX_OUTPUT_JSON: string
  readonly RELAX_SESSION_IO_DIR: string
  readonly RELAX_BASE_URL: string
  readonly RELAX_SESSION_ID: string
  readonly RELAX_ROLLOUT_MODE: RolloutMode
  readonly RELAX_GROUP_ID: string
}

/**
 * The agent process environment: the parent's, then `--agent-env`, then the Relax variables (Relax keys win; a
 * parent's stray `RELAX_*` value is overwritten).
 */
export const environment = (
  parent: Readonly<Record<string, string | undefined>>,
  spec: AgentSpec,
  relax: RelaxVariables
): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(parent)) if (value !== undefined) env[key] = value
  return { ...env, ...spec.env, ...relax }
}
