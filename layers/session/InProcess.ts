/**
 * The `InProcess` executor: the agent of each Session is an Effect function (simulations under TestClock,
 * TS-native harnesses), given the same facts a process gets through its environment and input file.
 *
 * **Details**
 * Its result is read like `RELAX_OUTPUT_JSON`; a failure is reported like a non-zero exit (code 1, the failure's
 * cause as the log tail). The active-time budget is raced against it as for a process, and interrupting `run`
 * interrupts the function.
 */
import { Cause, Effect, Exit, Result } from "effect"
import type { Schema } from "effect"
import * as AgentSpec from "../../src/session/AgentSpec.ts"
import * as SessionError from "../../src/session/SessionError.ts"
import type * as SessionInput from "../../src/session/SessionInput.ts"
import * as SessionOutput from "../../src/session/SessionOutput.ts"
import * as ActiveBudget from "./ActiveBudget.ts"
import * as SessionDirectory from "./SessionDirectory.ts"
import type * as Supervisor from "./Supervisor.ts"

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

/** The `InProcess` executor. */
export const make = (agentFn: InProcessAgent, options: InProcessOptions = {}): Supervisor.SupervisorShape => {
  const timeoutSeconds = options.timeoutSeconds ?? AgentSpec.DefaultTimeoutSeconds
  const inputFile = SessionDirectory.inputFiles()
  const makeBudget = ActiveBudget.make(timeoutSeconds)

  const run = (launch: Supervisor.SessionLaunch) =>
    Effect.scoped(Effect.gen(function*() {
      const { sessionId } = launch
      const budget = launch.budget ?? (yield* makeBudget.pipe(Effect.tap((b) => b.start)))
      const input = yield* inputFile(launch.input, sessionId)
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
        ActiveBudget.timeUp(budget, launch.firstRequest).pipe(Effect.map((up) => ({ _tag: "Expired" as const, up })))
      )
      if (ended._tag === "Expired") {
        return yield* ActiveBudget.timeoutError(sessionId, budget, ended.up, { logTail: "" })
      }
      if (Exit.isFailure(ended.exit)) {
        return yield* new SessionError.AgentExecutionError({
          sessionId,
          reason: "exit",
          exitCode: 1,
          logTail: Cause.pretty(ended.exit.cause).slice(-SessionDirectory.LogTailBytes)
        })
      }
      const parsed = SessionOutput.fromValue(ended.exit.value)
      if (Result.isFailure(parsed)) {
        return yield* new SessionError.AgentExecutionError({
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
    run: (launch) =>
      run(launch).pipe(Effect.withSpan("Supervisor.run", { attributes: { sessionId: launch.sessionId } }))
  }
}
