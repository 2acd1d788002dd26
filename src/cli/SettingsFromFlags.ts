/**
 * From parsed flags and a `--config` file to `RolloutSettings`: flag values become `RolloutOptions` fields (JSON flags
 * parsed, `NAME PATH` pairs grouped), the config file is read under them, and `Settings.resolve` decodes the result.
 * Why these are parsed here and not by effect/cli's schema flags: docs/architecture.md.
 */
import { Data, Effect, Option, Result, Schema } from "effect"
import { readFileSync } from "node:fs"
import * as FlagTable from "../config/FlagTable.ts"
import * as Settings from "../config/Settings.ts"
import * as SchemaMessage from "../json/SchemaMessage.ts"
import * as Thrown from "../Thrown.ts"
import * as CommandFlags from "./CommandFlags.ts"

/** A command line that cannot become options; the message names the flag and the fix. */
export class CliInputError extends Data.TaggedError("CliInputError")<{
  readonly flag: string
  readonly detail: string
}> {
  override get message(): string {
    return `${this.flag}: ${this.detail}`
  }
}

const parseJsonObject = (flag: string, text: string): Result.Result<Schema.JsonObject, CliInputError> =>
  Result.flatMap(
    Result.try({
      try: (): unknown => JSON.parse(text),
      catch: (error) =>
        new CliInputError({
          flag,
          detail: `${JSON.stringify(text)} is not valid JSON (${Thrown.messageOf(error)}); ` +
            `quote it for the shell, e.g. ${flag} '{"image":"images"}'`
        })
    }),
    (value) =>
      Schema.is(Schema.JsonObject)(value)
        ? Result.succeed(value)
        : Result.fail(new CliInputError({ flag, detail: `expects a JSON object, got ${text}` }))
  )

const toPairs = (flag: string, values: ReadonlyArray<string>) => {
  if (values.length % 2 !== 0) {
    return Result.fail(
      new CliInputError({
        flag,
        detail: `expects NAME PATH pairs, got ${values.length} value(s) (${values.join(" ")}); ` +
          `write ${flag} NAME PATH [NAME PATH ...]`
      })
    )
  }
  const pairs: Array<{ readonly name: string; readonly path: string }> = []
  for (let i = 0; i < values.length; i += 2) pairs.push({ name: values[i]!, path: values[i + 1]! })
  return Result.succeed(pairs)
}

/**
 * The options the user gave on the command line, as `RolloutOptions` fields (flags left out are absent, so
 * decoding fills their defaults). JSON flags are parsed and `NAME PATH` pairs grouped here.
 */
export const optionsFromFlags = (
  values: CommandFlags.FlagValues,
  specs: ReadonlyArray<CommandFlags.FlagSpec> = CommandFlags.rolloutFlags
): Result.Result<Record<string, unknown>, CliInputError> =>
  Result.gen(function*() {
    const options: Record<string, unknown> = {}
    for (const spec of specs) {
      const value = values[spec.name]
      if (spec.field === null || value === undefined || Option.isNone(value)) continue
      const flag = `--${spec.name}`
      const raw = value.value
      if (spec.kind === "json" && typeof raw === "string") {
        options[spec.field] = yield* parseJsonObject(flag, raw)
      } else if (spec.kind === "pairs" && Array.isArray(raw)) {
        options[spec.field] = yield* toPairs(flag, raw.map(String))
      } else {
        options[spec.field] = raw
      }
    }
    return options
  })

const fieldsByKey: ReadonlyMap<string, string> = new Map(
  CommandFlags.rolloutFlags.flatMap((spec) =>
    spec.field === null ? [] : [[spec.name, spec.field], [spec.field, spec.field]]
  )
)

/**
 * Read a `--config` JSON file: an object whose keys are flag names without dashes (`n-samples-per-prompt`) or
 * `RolloutOptions` fields (`nSamplesPerPrompt`), with values in the options' shapes (`evalPromptData` as
 * `[{"name", "path"}]`, `agentEnv` as `["KEY=VALUE"]`).
 */
export const readConfigFile = (path: string): Result.Result<Record<string, unknown>, CliInputError> => {
  const flag = "--config"
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (error) {
    return Result.fail(
      new CliInputError({ flag, detail: `cannot read ${path}: ${Thrown.messageOf(error)}` })
    )
  }
  return Result.flatMap(parseJsonObject(flag, text), (object) => {
    const options: Record<string, unknown> = {}
    for (const [key, value] of Object.entries(object)) {
      const field = fieldsByKey.get(key.replace(/^--/, ""))
      if (field === undefined) {
        return Result.fail(
          new CliInputError({
            flag,
            detail: `${path}: unknown option ${JSON.stringify(key)}; use a flag name (e.g. "n-samples-per-prompt") ` +
              `listed by relax-agentic rollout --help`
          })
        )
      }
      options[field] = value
    }
    return Result.succeed(options)
  })
}

/**
 * A configuration error as one line that starts with the flag: `--rollout-batch-size: Expected ..., got 0`.
 *
 * **Details**
 * A Schema failure whose (last) issue sits at a flag, or at one element of it, leads with that flag; any other
 * error is its message.
 */
export const configMessage = (error: Settings.RolloutConfigError): string => {
  const all = error.issue === undefined ? [] : SchemaMessage.entries(error.issue)
  const last = all[all.length - 1]
  const flag = last === undefined ? undefined : leadingFlag(last.path)
  if (last === undefined || flag === undefined) return error.message
  const what = [...all.slice(0, -1).map((entry) => SchemaMessage.formatEntry(entry, FlagTable.pathKey)), last.message]
  return `${flag}: ${what.join("\n").trim()}`
}

/** The flag of a path that is one settings field, or one element of it (`--eval-prompt-data[0]`). */
const leadingFlag = (path: ReadonlyArray<PropertyKey>): string | undefined => {
  const [field, element, ...deeper] = path
  if (field === undefined || deeper.length > 0 || (element !== undefined && typeof element !== "number")) {
    return undefined
  }
  const flag = FlagTable.pathKey(field)
  return /^--[a-z-]+$/.test(flag) ? flag : undefined
}

/** Everything that turns a command line into resolved settings can fail with this. */
export type SettingsError = CliInputError | Settings.RolloutConfigError

/**
 * Resolve a command's parsed flags: `--config` file first, command-line flags over it, then `Settings.resolve`.
 */
export const settingsFromFlags = (
  values: CommandFlags.FlagValues,
  extra: Readonly<Record<string, unknown>> = {}
): Effect.Effect<Settings.RolloutSettings, SettingsError> =>
  Effect.gen(function*() {
    const fromFlags = yield* Effect.fromResult(optionsFromFlags(values))
    const configPath = values["config"]
    const fromFile = configPath !== undefined && Option.isSome(configPath) && typeof configPath.value === "string"
      ? yield* Effect.fromResult(readConfigFile(configPath.value))
      : {}
    return yield* Settings.resolve({ ...extra, ...fromFile, ...fromFlags })
  })

/** Eval-only options: without `--eval-interval`, `relax-agentic rollout` runs no Eval and never reads them. */
const evalOnly = [
  "evalTemperature",
  "evalTopP",
  "evalTopK",
  "evalMaxResponseLen",
  "evalMaxContextLen",
  "evalRewardKey",
  "agenticEvalConcurrency"
] as const

/**
 * The warnings `relax-agentic rollout` prints at startup for options it accepts but would not use with these
 * settings (the programmatic API may still use them: `runEval` runs Eval without `--eval-interval`).
 */
export const unusedOptionWarnings = (settings: Settings.RolloutSettings): ReadonlyArray<string> => {
  const warnings: Array<string> = []
  if (settings.evalInterval === undefined) {
    const unused = [
      ...(settings.evalDatasets.length > 0 ? ["--eval-prompt-data"] : []),
      ...evalOnly.filter((field) => settings[field] !== undefined).map(FlagTable.flagOf),
      ...(settings.skipEvalBeforeTrain ? ["--skip-eval-before-train"] : [])
    ]
    if (unused.length > 0) {
      warnings.push(
        `${unused.join(", ")}: no --eval-interval is given, so this rollout runs no Eval; add --eval-interval N (or ` +
          "remove them)"
      )
    }
  }
  const derived = settings.globalBatchSize === undefined
    ? undefined
    : Math.floor(settings.globalBatchSize / settings.nSamplesPerPrompt)
  if (derived !== undefined && settings.rolloutBatchSize !== derived) {
    warnings.push(
      `--global-batch-size ${settings.globalBatchSize} is only used to derive --rollout-batch-size, which is given ` +
        `(${settings.rolloutBatchSize}); remove one of the two`
    )
  }
  if (settings.maxTokensPerGpu !== undefined && !settings.useDynamicBatchSize) {
    warnings.push("--max-tokens-per-gpu is only used with --use-dynamic-batch-size; add it (or remove the budget)")
  }
  return warnings
}
