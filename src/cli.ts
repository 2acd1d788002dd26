/**
 * The `relax-agentic` command: `rollout` runs a multi-step agentic rollout and writes its samples; `check` runs one
 * Session of the harness and reports the launch checks of "Prepare Your Agent" and the required external-agent
 * capacity; `serve` serves the rollout to a trainer; `inspect` opens a run's files in the browser (`cli/inspect.ts`).
 *
 * **Details**
 * This file defines the commands and runs them as the program; their parts live under `src/cli/`: the flag table,
 * argv normalization and the flags reference (`cli/flags.ts`), flags and `--config` file → `RolloutSettings`
 * (`cli/settings.ts`), and the launch checks of `check` (`cli/check.ts`). Their public names are re-exported here.
 */
import { NodeServices } from "@effect/platform-node"
import { Cause, Console, Effect, Option, Schema } from "effect"
import { CliError, CliOutput, Command } from "effect/cli"
import { randomUUID } from "node:crypto"
import { readFileSync, realpathSync } from "node:fs"
import { join as joinPath, resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import * as Gateway from "../layers/gateway/Gateway.ts"
import * as Rollout from "../layers/rollout/Rollout.ts"
import * as RolloutRpc from "../layers/trainer/RolloutRpc.ts"
import * as CheckCommand from "./cli/CheckCommand.ts"
import * as ClusterCommands from "./cli/ClusterCommands.ts"
import * as ProbeCommand from "./cli/ProbeCommand.ts"
import * as ClusterFlags from "./cluster/Flags.ts"
import * as Settings from "./config/Settings.ts"
import * as ProbeReport from "./engine/sglang/ProbeReport.ts"

/** The cluster flags (docs/scale-out.md): every member's, and `runner`'s own. */
export const clusterFlags = [...ClusterFlags.memberFlags, ...ClusterFlags.runnerFlags]
import * as CommandFlags from "./cli/CommandFlags.ts"
import * as InspectCommand from "./cli/InspectCommand.ts"
import * as ReplayCommand from "./cli/ReplayCommand.ts"
import * as RescoreCommand from "./cli/RescoreCommand.ts"
import * as SettingsFromFlags from "./cli/SettingsFromFlags.ts"
import * as Shutdown from "./cli/Shutdown.ts"
import * as UserError from "./cli/UserError.ts"
import * as Relax from "./index.ts"
import * as RunReport from "./rollout/RunReport.ts"
import * as Thrown from "./Thrown.ts"

// The command's parts live under src/cli/; their public names stay importable from here.
export {
  capacityOf,
  type CheckReport,
  CheckStartupError,
  renderCheck,
  type Requirement,
  runCheck
} from "./cli/CheckCommand.ts"
export {
  describeFlag,
  expandMultiValues,
  type FlagKind,
  type FlagSpec,
  flagsReference,
  type FlagValue,
  type FlagValues,
  lastOccurrenceWins,
  multiValueFlags,
  normalizeArgs,
  probeFlags,
  rolloutFlags,
  serveFlags
} from "./cli/CommandFlags.ts"
export { inspectCommand, inspectFlagNames, type InspectRequest, runInspect } from "./cli/InspectCommand.ts"
export { replayCommand, replayFlagNames } from "./cli/ReplayCommand.ts"
export { rescoreCommand, rescoreFlagNames } from "./cli/RescoreCommand.ts"
export {
  CliInputError,
  configMessage,
  optionsFromFlags,
  readConfigFile,
  type SettingsError,
  settingsFromFlags,
  unusedOptionWarnings
} from "./cli/SettingsFromFlags.ts"

/** A failure as effect/cli shows it: `ERROR` + the message on stderr, exit code 1. */
const settingsError = (error: SettingsFromFlags.SettingsError) =>
  UserError.make(error._tag === "RolloutConfigError" ? SettingsFromFlags.configMessage(error) : error.message)

// ---------------------------------------------------------------------------------------------------------------
// The commands

// The package's root directory: this file runs as <root>/src/cli.ts in a checkout and as <root>/dist/src/cli.js when
// installed from the built package.
const packageRoot = fileURLToPath(new URL(import.meta.url.endsWith(".js") ? "../../" : "../", import.meta.url))

const version = ((): string => {
  const text = readFileSync(joinPath(packageRoot, "package.json"), "utf8")
  const decoded = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Struct({ version: Schema.String })))(text)
  return Option.match(decoded, { onNone: () => "0.0.0", onSome: (pkg) => pkg.version })
})()

const stamp = (): string => new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15)

const booleanFlag = (values: CommandFlags.FlagValues, name: string): boolean => {
  const value = values[name]
  return value !== undefined && Option.isSome(value) && value.value === true
}

/** `check --probe-engine`: the SGLang conformance probe's table (or `--json`); a row that breaks fails the check. */
const probeEngine = (values: CommandFlags.FlagValues, settings: Settings.RolloutSettings) =>
  Effect.gen(function*() {
    const budget = values["probe-budget"]
    const report = yield* ProbeCommand.runProbe(
      settings,
      budget !== undefined && Option.isSome(budget) && typeof budget.value === "number"
        ? budget.value
        : ProbeCommand.defaultBudget
    ).pipe(Effect.mapError((error) => UserError.make(error.message)))
    yield* Console.log(
      booleanFlag(values, "json") ? JSON.stringify(report, null, 2) : ProbeReport.render(report)
    )
    if (ProbeReport.breaks(report)) {
      return yield* UserError.make(
        "check --probe-engine: a row BREAKS a rollout on these servers; see docs/sglang.md " +
          "\"Check your SGLang\""
      )
    }
  })

/** `relax-agentic check [flags]`. */
export const checkCommand = Command.make(
  "check",
  CommandFlags.flagsOf([
    ...CommandFlags.rolloutFlags,
    CommandFlags.rowFlag,
    ...CommandFlags.probeFlags,
    ...ClusterFlags.memberFlags
  ]),
  (values) =>
    Effect.gen(function*() {
      const settings = yield* Effect.mapError(SettingsFromFlags.settingsFromFlags(values), settingsError)
      if (booleanFlag(values, "probe-engine")) return yield* probeEngine(values, settings)
      const row = values["row"]
      const report = yield* CheckCommand.runCheck(settings, {
        row: row !== undefined && Option.isSome(row) && typeof row.value === "number" ? row.value : undefined
      }).pipe(Effect.mapError((error) => UserError.make(error.message)))
      yield* Console.log(CheckCommand.renderCheck(report, settings))
      // With --cluster-database-url: the live runners' --runner-slots count as the external slots.
      const runners = yield* ClusterCommands.runnerCapacity(values, settings)
      if (runners !== undefined) {
        yield* Console.log(runners.lines + (runners.warning === undefined ? "" : `\nWARNING: ${runners.warning}`))
      }
      if (
        report.requirements.some((requirement) => !requirement.passed) || report.capacity.warning !== undefined ||
        runners?.warning !== undefined
      ) {
        return yield* UserError.make("check failed: fix the items marked FAIL / WARNING above")
      }
    })
).pipe(
  Command.withDescription(
    "Run one Session of the harness (on the embedded engine unless --engine sglang), report the launch checks " +
      "of \"Prepare Your Agent\" and the required external-agent capacity. Takes the same flags as `rollout`."
  )
)

/** The text a startup or rollout failure shows: the error's own message, which names the flag or file to fix. */
const failureText = (error: unknown): string => {
  if (error instanceof Settings.RolloutConfigError) return SettingsFromFlags.configMessage(error)
  if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "ServeError") {
    return `--host/--port: the gateway cannot listen${error instanceof Error ? `: ${error.message}` : ""}`
  }
  return Thrown.messageOf(error)
}

/**
 * Run the whole rollout the settings describe (`--num-rollout` steps, Eval, the files under `--output-dir`) and
 * return what it wrote. Every agent is reaped before this completes, also when it is interrupted (Ctrl-C); an
 * interrupted run's last line says which step was interrupted and what was written where (`src/cli/Shutdown.ts`).
 */
export const runRollout = (settings: Settings.RolloutSettings, role: Relax.ClusterRole = {}) =>
  Effect.gen(function*() {
    const rollout = yield* Rollout.Rollout
    yield* Shutdown.onInterrupted((signal) =>
      RunReport.interruptedLine(signal, Effect.runSync(rollout.progress), settings.outputDir)
    )
    return yield* rollout.run
  }).pipe(Effect.provide(Relax.layerFromSettings(settings, {}, role)))

/** The cluster role `rollout` / `serve` take with `--cluster-database-url` (none without it). */
const roleFromFlags = (values: CommandFlags.FlagValues, settings: Settings.RolloutSettings) =>
  Effect.gen(function*() {
    const cluster = yield* ClusterCommands.clusterOptionsFromFlags(values)
    if (cluster === undefined) return {}
    const problem = ClusterCommands.clusterProblem(settings)
    if (problem !== undefined) return yield* UserError.make(problem)
    return ClusterCommands.controllerRole(cluster)
  })

/** `relax-agentic rollout [flags]`. */
export const rolloutCommand = Command.make(
  "rollout",
  CommandFlags.flagsOf([...CommandFlags.rolloutFlags, ...ClusterFlags.memberFlags]),
  (values) =>
    Effect.gen(function*() {
      const settings = yield* Effect.mapError(
        SettingsFromFlags.settingsFromFlags(values, {
          outputDir: `runs/rollout-${stamp()}-${randomUUID().slice(0, 8)}`
        }),
        settingsError
      )
      const role = yield* roleFromFlags(values, settings)
      // --agent-max-slots is the external executor's limit: below the required slots, Sessions would queue there.
      const capacityWarning = CheckCommand.capacityOf(settings).warning
      if (capacityWarning !== undefined) yield* Console.error(`WARNING ${capacityWarning}`)
      for (const warning of SettingsFromFlags.unusedOptionWarnings(settings)) yield* Console.error(`WARNING ${warning}`)
      yield* Shutdown.onInterrupted((signal) => `Interrupted by ${signal} during startup; nothing was written`)
      const summary = yield* runRollout(settings, role).pipe(
        Effect.mapError((error) => UserError.make(failureText(error)))
      )
      const dir = resolvePath(settings.outputDir ?? ".")
      yield* Console.log(
        `Rollout finished: ${summary.steps} step(s), ${summary.evals} Eval run(s). Samples and metrics: ${dir}`
      )
    })
).pipe(Command.withDescription("Run an agentic rollout: Groups of agent Sessions per step, samples to --output-dir."))

const stringFlag = (values: CommandFlags.FlagValues, name: string): string | undefined => {
  const value = values[name]
  return value !== undefined && Option.isSome(value) && typeof value.value === "string" ? value.value : undefined
}

/** `--rpc-host/--rpc-port/--rpc-token` (the token also from RELAX_RPC_TOKEN); a public host needs a token. */
export const rpcOptionsFromFlags = (
  values: CommandFlags.FlagValues,
  env: Readonly<Record<string, string | undefined>> = process.env
): Effect.Effect<RolloutRpc.RpcServerOptions, CliError.UserError> => {
  const host = stringFlag(values, "rpc-host") ?? "127.0.0.1"
  const portValue = values["rpc-port"]
  const port = portValue !== undefined && Option.isSome(portValue) && typeof portValue.value === "number"
    ? portValue.value
    : 8765
  const token = stringFlag(values, "rpc-token") ?? (env["RELAX_RPC_TOKEN"] || undefined)
  if (port < 0 || port > 65535) {
    return Effect.fail(UserError.make(`--rpc-port: ${port} is not a port; use 0-65535 (0: any free port)`))
  }
  if (!Gateway.isLoopback(host) && token === undefined) {
    return Effect.fail(UserError.make(
      `--rpc-host ${host}: serving the trainer RPC beyond loopback needs a bearer token; ` +
        "set --rpc-token or RELAX_RPC_TOKEN (or keep the default --rpc-host 127.0.0.1)"
    ))
  }
  return Effect.succeed({ host, port, token })
}

/** `relax-agentic serve [flags]`: gateway + rollout + trainer RPC until a `Shutdown` call or Ctrl-C. */
export const serveCommand = Command.make(
  "serve",
  CommandFlags.flagsOf([...CommandFlags.rolloutFlags, ...CommandFlags.serveFlags, ...ClusterFlags.memberFlags]),
  (values) =>
    Effect.gen(function*() {
      const settings = yield* Effect.mapError(SettingsFromFlags.settingsFromFlags(values), settingsError)
      const role = yield* roleFromFlags(values, settings)
      const rpc = yield* rpcOptionsFromFlags(values)
      // Eval datasets serve `Evaluate` calls whatever --eval-interval says, so only the capacity check applies here.
      const capacityWarning = CheckCommand.capacityOf(settings).warning
      if (capacityWarning !== undefined) yield* Console.error(`WARNING ${capacityWarning}`)
      yield* Effect.gen(function*() {
        const server = yield* RolloutRpc.RolloutRpcServer
        const gateway = yield* Gateway.Gateway
        yield* Console.log(
          `relax-agentic serve: trainer RPC listening on ${server.url} (POST NDJSON; docs/trainer.md)` +
            `${rpc.token === undefined ? "" : ", bearer token required"}; agents use ${gateway.agentBaseUrl}`
        )
        yield* Shutdown.onInterrupted((signal) =>
          `relax-agentic serve: stopped by ${signal}; every step in progress was abandoned`
        )
        yield* server.shutdownRequested
        yield* Console.log("relax-agentic serve: Shutdown requested; reaping agents and closing the servers")
      }).pipe(
        Effect.provide(Relax.serveFromSettings(settings, rpc, {}, role)),
        Effect.mapError((error) => UserError.make(failureText(error)))
      )
    })
).pipe(Command.withDescription(
  "Serve the rollout to a trainer: gateway, agents and the trainer RPC (Step, Groups, Evaluate, UpdateWeights, " +
    "Status, Shutdown) at --rpc-host/--rpc-port until Shutdown or Ctrl-C. Takes the flags of `rollout`."
))

/** The root command. */
export const command = Command.make("relax-agentic").pipe(
  Command.withDescription(
    "Agentic rollout for RL training: supervise agent harnesses, serve them model APIs, " +
      "record SessionForests, write training samples."
  ),
  Command.withSubcommands([
    rolloutCommand,
    checkCommand,
    serveCommand,
    InspectCommand.inspectCommand,
    ReplayCommand.replayCommand,
    RescoreCommand.rescoreCommand,
    ClusterCommands.runnerCommand
  ])
)

/**
 * Parse a `rollout` / `check` command line into flag values without running anything (multi-value runs expanded
 * first). Fails with effect/cli's parse errors (unknown flag, a value of the wrong type).
 */
export const parseArgs = (
  argv: ReadonlyArray<string>
): Effect.Effect<CommandFlags.FlagValues, CliError.CliError, Command.Environment> =>
  Effect.gen(function*() {
    let captured: CommandFlags.FlagValues = {}
    const probe = Command.make(
      "rollout",
      CommandFlags.flagsOf([...CommandFlags.rolloutFlags, CommandFlags.rowFlag]),
      (values) =>
        Effect.sync(() => {
          captured = values
        })
    )
    yield* Command.runWith(probe, { version, renderErrors: false })(CommandFlags.normalizeArgs(argv))
    return captured
  })

/**
 * Parse errors (an unknown flag, a value of the wrong type) print only the errors and where to find the flags:
 * effect/cli's default prints the whole help (over a hundred lines) first, which buries the one line that matters.
 * `--help` and `--version` keep the default output.
 */
export const presenter: CliOutput.Presenter = {
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Effect.gen(function*() {
        const formatter = yield* CliOutput.Formatter
        yield* Console.error(formatter.formatErrors(event.errors))
        const path = event.commandPath.join(" ")
        yield* Console.error(
          event.commandPath.length > 1
            ? `  Run "${path} --help" to list every flag and its default.`
            : `  Run "${path} --help" to list the commands (rollout, check, serve, inspect, replay, rescore, runner).`
        )
      })
      : CliOutput.defaultPresenter.present(event)
}

/** Run the command line `argv` (without `node` and the script). */
export const run = (argv: ReadonlyArray<string>) =>
  Command.runWith(command, { version })(CommandFlags.normalizeArgs(argv)).pipe(
    Effect.provide(CliOutput.layerPresenter(presenter))
  )

const entryFiles = (): ReadonlyArray<string> =>
  [fileURLToPath(import.meta.url), joinPath(packageRoot, "bin", "relax-agentic.mjs")].map((path) => {
    try {
      return realpathSync(path)
    } catch {
      return path
    }
  })

// Run only as the program (node src/cli.ts, or bin/relax-agentic.mjs importing this file or its build), never when
// imported.
const invokedAs = process.argv[1]
const isMain = invokedAs !== undefined && ((): boolean => {
  try {
    return entryFiles().includes(realpathSync(resolvePath(invokedAs)))
  } catch {
    return false
  }
})()

if (isMain) {
  run(process.argv.slice(2)).pipe(
    // CLI errors were already printed by effect/cli; anything else is a bug and is shown in full.
    Effect.tapCause((cause) => Cause.hasDies(cause) ? Console.error(Cause.pretty(cause)) : Effect.void),
    Effect.provide(NodeServices.layer),
    Effect.provide(Shutdown.loggerLayer),
    Shutdown.runMain({ disableErrorReporting: true })
  )
}
