/**
 * The Supervisor: runs one agent per Session and reports how it ended.
 *
 * **Details**
 * Two executors share one interface: `LocalProcess` (LocalProcess.ts) runs `--agent-command` as a process group per
 * Session in its IO directory (SessionDirectory.ts, which also keeps the logs), and `InProcess` (InProcess.ts) calls
 * an Effect function standing for the agent. Shutdown is fiber interruption: interrupting `run` stops the agent (a
 * process's whole group) before the interruption completes. The active-time budget (ActiveBudget.ts) is raced
 * against the agent; when it expires the agent is stopped with a timeout `AgentExecutionError`.
 */
import { Context, Layer } from "effect"
import type { Effect, Scope } from "effect"
import type * as AgentSpec from "../../src/session/AgentSpec.ts"
import type * as SessionError from "../../src/session/SessionError.ts"
import type * as SessionInput from "../../src/session/SessionInput.ts"
import type * as SessionOutput from "../../src/session/SessionOutput.ts"
import type * as ActiveBudget from "./ActiveBudget.ts"
import * as InProcess from "./InProcess.ts"
import * as LocalProcess from "./LocalProcess.ts"

export { type InProcessAgent, type InProcessAgentInput, type InProcessOptions } from "./InProcess.ts"
export { type LocalProcessOptions, resolveAgentSpec } from "./LocalProcess.ts"

/** One Session to run. */
export interface SessionLaunch {
  readonly sessionId: string
  readonly groupId: string
  readonly rolloutMode: AgentSpec.RolloutMode
  /** The prepared dataset row (`SessionInput.fromRow`); images are converted to `image_url` before the agent starts. */
  readonly input: SessionInput.Prepared
  /**
   * The Session's active-time budget, driven by the Group pool (`start` on lease, `pause` when parked, `resume`).
   * Make it with `Supervisor.makeBudget` in the Session's scope. When absent, a budget of `--agent-timeout` starts
   * with the agent.
   */
  readonly budget?: ActiveBudget.ActiveBudget | undefined
  /**
   * Completes once the Session sent its first model request (the first-request barrier's ticket). When given, an agent that sends
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
  ) => Effect.Effect<SessionOutput.AgentOutcome, SessionError.AgentExecutionError | SessionError.SessionInputError>
}

/** The agent executor for a rollout (one per process). */
export class Supervisor extends Context.Service<Supervisor, SupervisorShape>()("relax-agentic/Supervisor") {
  /** Run `--agent-command` per Session as a supervised local process group. */
  static readonly layerLocalProcess = (options: LocalProcess.LocalProcessOptions): Layer.Layer<Supervisor> =>
    Layer.succeed(Supervisor, LocalProcess.make(options))

  /** Run an Effect function per Session (simulations and TS-native harnesses). */
  static readonly layerInProcess = (
    agent: InProcess.InProcessAgent,
    options: InProcess.InProcessOptions = {}
  ): Layer.Layer<Supervisor> => Layer.succeed(Supervisor, InProcess.make(agent, options))

  /** The `LocalProcess` executor as a value (for callers that hold several executors). */
  static readonly localProcess = LocalProcess.make
  /** The `InProcess` executor as a value. */
  static readonly inProcess = InProcess.make
}
