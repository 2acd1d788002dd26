/**
 * The agents of a rollout from its settings: the supervisor that starts a Session's agent (in-process or a process),
 * `--agent-env`, `--agent-max-starting`.
 */
import { Effect } from "effect"
import * as Path from "node:path"
import type * as Settings from "../../src/config/Settings.ts"
import type * as SessionError from "../../src/session/SessionError.ts"
import * as StartLimit from "../session/StartLimit.ts"
import * as Supervisor from "../session/Supervisor.ts"
import type * as RolloutExtras from "./RolloutExtras.ts"

/**
 * The agent executor of these settings: `extras.agent` in-process, else `--agent-command` processes. Both get
 * `--agent-env` from the one parser (`AgentSpec.parseEnv`, through `RolloutSettings.agentEnvVars` and `AgentSpec.make`),
 * and `--agent-max-starting` limits how many of their agents start at once (`layers/session/StartLimit.ts`). `watch`
 * wraps the executor inside that limit (a rollout's process agents: `layers/session/SlowStartWatch.ts`).
 */
export const supervisorFromSettings = <R = never>(
  settings: Settings.RolloutSettings,
  baseUrl: string,
  extras: Pick<RolloutExtras.MakeRolloutExtras, "agent"> = {},
  watch?: (executor: Supervisor.SupervisorShape) => Effect.Effect<Supervisor.SupervisorShape, never, R>
): Effect.Effect<Supervisor.SupervisorShape, SessionError.AgentSpecError, R> =>
  executorFromSettings(settings, baseUrl, extras).pipe(
    Effect.flatMap((executor) => watch === undefined ? Effect.succeed(executor) : watch(executor)),
    Effect.flatMap((supervisor) =>
      settings.agentMaxStarting === undefined
        ? Effect.succeed(supervisor)
        : StartLimit.limit(supervisor, settings.agentMaxStarting)
    )
  )

const executorFromSettings = (
  settings: Settings.RolloutSettings,
  baseUrl: string,
  extras: Pick<RolloutExtras.MakeRolloutExtras, "agent">
): Effect.Effect<Supervisor.SupervisorShape, SessionError.AgentSpecError> =>
  extras.agent !== undefined
    ? Effect.succeed(Supervisor.Supervisor.inProcess(extras.agent, {
      baseUrl,
      timeoutSeconds: settings.agentTimeout,
      env: settings.agentEnvVars
    }))
    : Effect.map(
      Supervisor.resolveAgentSpec({
        command: settings.agentCommand,
        cwd: settings.agentCwd,
        env: settings.agentEnv,
        timeoutSeconds: settings.agentTimeout
      }),
      (spec) =>
        Supervisor.Supervisor.localProcess({
          spec,
          baseUrl,
          ...(settings.outputDir === undefined ? {} : { logDir: Path.resolve(settings.outputDir, "logs") }),
          keepLogs: settings.agenticKeepSessionLogs ? "all" : "failed"
        })
    )
