/**
 * The typed rollout configuration: every flag of `relax-agentic rollout` as a camelCase field, with the reference's
 * defaults, decoded with Schema and checked across fields.
 *
 * **Details**
 * A field is named after its flag in camelCase (`--rollout-batch-size` → `rolloutBatchSize`); the flag table
 * (src/config/FlagTable.ts) ties each field to its flag, so `flagOf(field)` names the flag in every error message.
 * `RolloutOptions` is what a CLI, a JSON config file or a trainer writes (defaults filled in by decoding); `RolloutSettings` is the resolved configuration the services read (derived defaults such
 * as `agenticConcurrency → overSamplingBatchSize → rolloutBatchSize` applied and validated).
 */
import { Context, Data, Effect, Layer, Schema, type SchemaIssue } from "effect"
import { flagNameOfField } from "../../src/config/FlagTable.ts"
import * as CreditOptions from "../../src/credit/CreditOptions.ts"
import * as SchemaMessage from "../../src/json/SchemaMessage.ts"
import * as Capacity from "../../src/schedule/Capacity.ts"
import type * as Retention from "../../src/schedule/Retention.ts"
import type { SamplingParams } from "../engine/Engine.ts"

const withDefault = <S extends Schema.Top>(schema: S, value: S["Encoded"]) =>
  Schema.withDecodingDefault(Effect.succeed(value))(schema)

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))
const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
const PositiveNumber = Schema.Finite.check(Schema.isGreaterThan(0))

/** One `--eval-prompt-data NAME PATH` pair. */
export const EvalDataset = Schema.Struct({
  name: Schema.String.check(Schema.isNonEmpty()),
  path: Schema.String.check(Schema.isNonEmpty()),
  /** Per-dataset `--n-samples-per-eval-prompt` override. */
  nSamplesPerEvalPrompt: Schema.optional(PositiveInt)
})
export type EvalDataset = typeof EvalDataset.Type

export const EngineKind = Schema.Literals(["embedded", "sglang"])
export type EngineKind = typeof EngineKind.Type

/** Every option of a rollout, as flags, a JSON config file or a trainer give it. */
export const RolloutOptions = Schema.Struct({
  // dataset and step shape
  promptData: Schema.optional(Schema.String),
  inputKey: withDefault(Schema.String, "input"),
  labelKey: Schema.optional(Schema.String),
  metadataKey: withDefault(Schema.String, "metadata"),
  /** e.g. `{"image": "images"}`: dataset media fields merged into the first user message. */
  multimodalKeys: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  applyChatTemplateKwargs: withDefault(Schema.Record(Schema.String, Schema.Json), {}),
  nSamplesPerPrompt: withDefault(PositiveInt, 1),
  rolloutBatchSize: Schema.optional(PositiveInt),
  globalBatchSize: Schema.optional(PositiveInt),
  overSamplingBatchSize: Schema.optional(PositiveInt),
  numRollout: withDefault(PositiveInt, 1),
  rolloutShuffle: withDefault(Schema.Boolean, false),
  // agent process
  agentCommand: Schema.optional(Schema.String),
  agentCwd: Schema.optional(Schema.String),
  /** `KEY=VALUE` entries; `RELAX_` keys are reserved. */
  agentEnv: withDefault(Schema.Array(Schema.String), []),
  agentTimeout: withDefault(PositiveNumber, 1800),
  /** The external executor's hard concurrency limit (only checked against the capacity table). */
  agentMaxSlots: Schema.optional(PositiveInt),
  // gateway
  host: withDefault(Schema.String, "127.0.0.1"),
  port: withDefault(NonNegativeInt, 0),
  agenticToolCallParser: Schema.optional(Schema.String),
  agenticReasoningParser: Schema.optional(Schema.String),
  strictMatch: withDefault(Schema.Boolean, false),
  // engine
  engine: withDefault(EngineKind, "embedded"),
  sglangUrls: withDefault(Schema.Array(Schema.String), []),
  /** An SGLang router in front of the workers (instead of `sglangUrls`). */
  sglangRouterUrl: Schema.optional(Schema.String),
  /** Per worker; the engine's default (512) when absent. */
  sglangServerConcurrency: Schema.optional(PositiveInt),
  /** Send `sampling_seed` (the servers run deterministic inference). */
  sglangEnableDeterministicInference: withDefault(Schema.Boolean, false),
  /** `Authorization: Bearer` for SGLang (default: `SGLANG_API_KEY`). */
  sglangApiKey: Schema.optional(Schema.String),
  /** Send `priority` (resumed attempts first; servers with priority scheduling). */
  sglangPriorityScheduling: withDefault(Schema.Boolean, false),
  /** `lora_path` on every request. */
  sglangLoraPath: Schema.optional(Schema.String),
  /** Send `session_id` and close SGLang sessions when a Session ends. */
  agenticSessionLifecycle: withDefault(Schema.Boolean, false),
  /** Directory with `tokenizer.json` (+ chat template); required with SGLang, else the bundled Qwen3 tokenizer. */
  tokenizer: Schema.optional(Schema.String),
  /** `path/to/module.ts#export`: the embedded engine's scripted policy. */
  embeddedPolicy: Schema.optional(Schema.String),
  // sampling (request temperature / top_p are ignored; these apply)
  rolloutTemperature: withDefault(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)), 1),
  rolloutTopP: withDefault(Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(1)), 1),
  rolloutTopK: withDefault(Schema.Int, -1),
  rolloutMaxResponseLen: Schema.optional(PositiveInt),
  rolloutMaxContextLen: Schema.optional(PositiveInt),
  rolloutStop: withDefault(Schema.Array(Schema.String), []),
  rolloutStopTokenIds: withDefault(Schema.Array(NonNegativeInt), []),
  rolloutSkipSpecialTokens: withDefault(Schema.Boolean, false),
  rolloutSeed: withDefault(Schema.Int, 42),
  // eval
  evalPromptData: withDefault(Schema.Array(EvalDataset), []),
  nSamplesPerEvalPrompt: withDefault(PositiveInt, 1),
  evalInterval: Schema.optional(PositiveInt),
  skipEvalBeforeTrain: withDefault(Schema.Boolean, false),
  evalTemperature: Schema.optional(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))),
  evalTopP: Schema.optional(Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(1))),
  evalTopK: Schema.optional(Schema.Int),
  evalMaxResponseLen: Schema.optional(PositiveInt),
  evalMaxContextLen: Schema.optional(PositiveInt),
  // reward and credit
  rewardKey: Schema.optional(Schema.String),
  evalRewardKey: Schema.optional(Schema.String),
  customRmPath: Schema.optional(Schema.String),
  groupRm: withDefault(Schema.Boolean, false),
  agenticCustomAdvantagePath: Schema.optional(Schema.String),
  advantageEstimator: withDefault(Schema.Literals(["grpo"]), "grpo"),
  disableGrpoStdNormalization: withDefault(Schema.Boolean, false),
  disableRewardsNormalization: withDefault(Schema.Boolean, false),
  normalizeAdvantages: withDefault(Schema.Boolean, false),
  dynamicSamplingFilterPath: Schema.optional(Schema.String),
  logPassrate: withDefault(Schema.Boolean, false),
  useDynamicBatchSize: withDefault(Schema.Boolean, false),
  maxTokensPerGpu: Schema.optional(PositiveInt),
  // scheduling
  agenticConcurrency: Schema.optional(PositiveInt),
  agenticEvalConcurrency: Schema.optional(PositiveInt),
  agenticPrelaunch: withDefault(Schema.Boolean, false),
  /** Groups dropped in a row that stop the rollout (0 = unlimited); default `defaultMaxConsecutiveDrops`. */
  agenticMaxConsecutiveDrops: Schema.optional(NonNegativeInt),
  /** Abort and park in-flight generations at a step's close, resume them next step (docs/runtime.md). */
  partialRollout: withDefault(Schema.Boolean, false),
  /** Aborts after which a request is protected (only with `partialRollout`). */
  partialRolloutMaxAbortedCount: Schema.optional(PositiveInt),
  /** Overlap rollout and training: close with interrupted Groups owed, final backfill (§6.5, §6.6). */
  fullyAsync: withDefault(Schema.Boolean, false),
  // transfer and observability
  outputDir: Schema.optional(Schema.String),
  /** Parse special-token literals in agent text as control tokens (the reference behaviour); default: plain text. */
  agenticAllowSpecialTokens: withDefault(Schema.Boolean, false),
  /** Fail (500) a turn whose tool calls the parser dropped and that leaves nothing else, as the reference does. */
  agenticFailUnparsedTurns: withDefault(Schema.Boolean, false),
  /** Keep every Session's log under `<outputDir>/logs/` (failed Sessions' logs are always kept there). */
  agenticKeepSessionLogs: withDefault(Schema.Boolean, false),
  /** A path containing `{rollout_id}`. */
  saveDebugRolloutData: Schema.optional(Schema.String)
})
export type RolloutOptions = typeof RolloutOptions.Type
/** What a caller writes: every field optional except the ones a rollout cannot run without. */
export type RolloutOptionsInput = typeof RolloutOptions.Encoded

/** The resolved configuration: derived defaults applied, cross-field rules checked. */
export interface RolloutSettings extends RolloutOptions {
  readonly promptData: string
  readonly rolloutBatchSize: number
  readonly overSamplingBatchSize: number
  readonly agenticConcurrency: number
  /** Resolved; 0 = unlimited. */
  readonly agenticMaxConsecutiveDrops: number
  /** `--agent-env` as a record. */
  readonly agentEnvVars: Readonly<Record<string, string>>
  /** Eval datasets with their group size resolved. */
  readonly evalDatasets: ReadonlyArray<{ readonly name: string; readonly path: string; readonly nSamplesPerEvalPrompt: number }>
}

/**
 * The default limit of Groups dropped in a row: a few rounds of the whole resident capacity must fail before the
 * rollout gives up, so a handful of unlucky Groups never stops it.
 */
export const defaultMaxConsecutiveDrops = (agenticConcurrency: number): number => Math.max(8, 2 * agenticConcurrency)

/**
 * The flag of a field, from the flag table (`rolloutBatchSize` → `--rollout-batch-size`, `sglangUrls` →
 * `--sglang-url`); a field without a flag gets its mechanical kebab-case name.
 */
export const flagOf = (field: string): string =>
  flagNameOfField.get(field) ?? `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`

/** A Schema path segment as users know it: a settings field as its flag, anything else as Effect writes it. */
export const pathKey = (key: PropertyKey): string =>
  typeof key === "string" && /^[A-Za-z]+$/.test(key) ? flagOf(key) : SchemaMessage.bracketKey(key)

/** A configuration that cannot run, naming the flag and the fix. */
export class RolloutConfigError extends Data.TaggedError("RolloutConfigError")<{
  /** The flag (`--over-sampling-batch-size`), or `configuration` for a shape error. */
  readonly option: string
  readonly reason: string
  /** A shape error's Schema issue, for callers that write it their own way. */
  readonly issue?: SchemaIssue.Issue
}> {
  override get message(): string {
    return `${this.option}: ${this.reason}`
  }
}

const fail = (field: string, reason: string) => new RolloutConfigError({ option: flagOf(field), reason })

/** Flags that only one engine reads, so the other engine would silently ignore them. */
const sglangOnly = [
  "sglangUrls",
  "sglangRouterUrl",
  "sglangServerConcurrency",
  "sglangEnableDeterministicInference",
  "sglangApiKey",
  "sglangPriorityScheduling",
  "sglangLoraPath",
  "agenticSessionLifecycle"
] as const

const given = (value: unknown): boolean =>
  value !== undefined && value !== false && !(Array.isArray(value) && value.length === 0)

/** The engine flags: where the SGLang servers are, which tokenizer matches them, no flag of the other engine. */
const engineOptionsProblem = (options: RolloutOptions): RolloutConfigError | undefined => {
  if (options.engine === "embedded") {
    const stray = sglangOnly.find((field) => given(options[field]))
    return stray === undefined
      ? undefined
      : fail(stray, "is only used with --engine sglang; add --engine sglang or remove it")
  }
  if (options.embeddedPolicy !== undefined) {
    return fail("embeddedPolicy", "scripts the embedded engine and is not used with --engine sglang; remove it")
  }
  const hasWorkers = options.sglangUrls.length > 0
  if (hasWorkers === (options.sglangRouterUrl !== undefined)) {
    return hasWorkers
      ? fail("sglangRouterUrl", "give either --sglang-url (the workers) or --sglang-router-url (a router), not both")
      : fail("sglangUrls", "--engine sglang needs the SGLang workers (--sglang-url http://host:port ...) or a router " +
        "(--sglang-router-url http://host:port)")
  }
  if (options.tokenizer === undefined) {
    return fail(
      "tokenizer",
      "is required with --engine sglang: give the served model's tokenizer directory (tokenizer.json and " +
        "tokenizer_config.json, e.g. the --model-path of sglang.launch_server); the bundled Qwen3 tokenizer would " +
        "send wrong token ids to any other model"
    )
  }
  return undefined
}

/** Check the cross-field rules and fill the derived defaults. */
export const settle = (options: RolloutOptions): Effect.Effect<RolloutSettings, RolloutConfigError> =>
  Effect.gen(function*() {
    if (options.promptData === undefined || options.promptData.length === 0) {
      return yield* fail("promptData", "a training dataset is required: give a JSONL or JSON-array file of rows")
    }
    const rolloutBatchSize = options.rolloutBatchSize ??
      (options.globalBatchSize === undefined ? undefined : Math.floor(options.globalBatchSize / options.nSamplesPerPrompt))
    if (rolloutBatchSize === undefined || rolloutBatchSize < 1) {
      return yield* fail(
        "rolloutBatchSize",
        options.globalBatchSize === undefined
          ? "required: the number of Groups (prompts) per rollout step (or give --global-batch-size)"
          : `--global-batch-size ${options.globalBatchSize} // --n-samples-per-prompt ${options.nSamplesPerPrompt} is 0; set --rollout-batch-size`
      )
    }
    const overSamplingBatchSize = options.overSamplingBatchSize ?? rolloutBatchSize
    if (overSamplingBatchSize < rolloutBatchSize) {
      return yield* fail(
        "overSamplingBatchSize",
        `${overSamplingBatchSize} is below --rollout-batch-size ${rolloutBatchSize}; it must be >= the batch size (or omit it)`
      )
    }
    const agenticConcurrency = options.agenticConcurrency ?? overSamplingBatchSize
    const agentEnvVars: Record<string, string> = {}
    for (const entry of options.agentEnv) {
      const eq = entry.indexOf("=")
      if (eq <= 0) return yield* fail("agentEnv", `entry ${JSON.stringify(entry)} must look like KEY=VALUE`)
      const key = entry.slice(0, eq)
      if (key.startsWith("RELAX_")) {
        return yield* fail("agentEnv", `${key}: the RELAX_ prefix is reserved for variables Relax sets; rename it`)
      }
      agentEnvVars[key] = entry.slice(eq + 1)
    }
    const engineProblem = engineOptionsProblem(options)
    if (engineProblem !== undefined) return yield* engineProblem
    if (options.saveDebugRolloutData !== undefined && !options.saveDebugRolloutData.includes("{rollout_id}")) {
      return yield* fail(
        "saveDebugRolloutData",
        `${JSON.stringify(options.saveDebugRolloutData)} must contain {rollout_id} so every step writes its own file`
      )
    }
    if (options.partialRolloutMaxAbortedCount !== undefined && !options.partialRollout) {
      return yield* fail(
        "partialRolloutMaxAbortedCount",
        "only applies with --partial-rollout (it counts partial-rollout aborts); add --partial-rollout or remove it"
      )
    }
    if (options.fullyAsync && options.normalizeAdvantages) {
      return yield* fail(
        "normalizeAdvantages",
        "cannot be used with --fully-async: global advantage whitening needs the statistics of the whole training " +
          "batch, and in fully async mode a batch's Groups come from several rollout steps while training runs; " +
          "remove --normalize-advantages (GRPO group normalization still applies) or run without --fully-async"
      )
    }
    const names = new Set<string>()
    for (const d of options.evalPromptData) {
      if (names.has(d.name)) return yield* fail("evalPromptData", `the Eval dataset name ${JSON.stringify(d.name)} is used twice`)
      names.add(d.name)
    }
    if (options.evalInterval !== undefined && options.evalPromptData.length === 0) {
      return yield* fail("evalInterval", "is set but no --eval-prompt-data NAME PATH is given")
    }
    const credit = CreditOptions.problem(options)
    if (credit !== undefined) return yield* new RolloutConfigError({ option: credit.flag, reason: credit.reason })
    if (
      options.useDynamicBatchSize && options.maxTokensPerGpu !== undefined && options.rolloutMaxContextLen !== undefined &&
      options.maxTokensPerGpu < options.rolloutMaxContextLen
    ) {
      return yield* fail(
        "maxTokensPerGpu",
        `${options.maxTokensPerGpu} is below --rollout-max-context-len ${options.rolloutMaxContextLen}; one sample must fit a micro-batch`
      )
    }
    return {
      ...options,
      promptData: options.promptData,
      rolloutBatchSize,
      overSamplingBatchSize,
      agenticConcurrency,
      agenticMaxConsecutiveDrops: options.agenticMaxConsecutiveDrops ?? defaultMaxConsecutiveDrops(agenticConcurrency),
      agentEnvVars,
      evalDatasets: options.evalPromptData.map((d) => ({
        name: d.name,
        path: d.path,
        nSamplesPerEvalPrompt: d.nSamplesPerEvalPrompt ?? options.nSamplesPerEvalPrompt
      }))
    }
  })

const decodeOptions = Schema.decodeUnknownEffect(RolloutOptions)

/** Decode options (JSON, flags, or a trainer's object) and resolve them; every failure names its flag. */
export const resolve = (input: unknown): Effect.Effect<RolloutSettings, RolloutConfigError> =>
  decodeOptions(input, { onExcessProperty: "error" }).pipe(
    Effect.mapError((error) =>
      new RolloutConfigError({
        option: "configuration",
        // Schema paths name fields (`["rolloutBatchSize"]`); users know flags.
        reason: SchemaMessage.format(error.issue, pathKey),
        issue: error.issue
      })
    ),
    Effect.flatMap(settle),
    Effect.withSpan("Config.resolve")
  )

/** SGLang's own default when `max_new_tokens` is not sent (the reference drops `None` sampling keys). */
const SGLANG_DEFAULT_MAX_NEW_TOKENS = 128

/** Sampling for every training request (docs/agent-contract.md); `position` is the Session's index in its Group. */
export const trainSampling = (settings: RolloutSettings, position: number): SamplingParams => ({
  maxNewTokens: settings.rolloutMaxResponseLen ?? SGLANG_DEFAULT_MAX_NEW_TOKENS,
  temperature: settings.rolloutTemperature,
  topP: settings.rolloutTopP,
  topK: settings.rolloutTopK,
  stop: settings.rolloutStop,
  stopTokenIds: settings.rolloutStopTokenIds,
  seed: settings.rolloutSeed + position
})

/** Eval sampling (docs/runtime.md, "Eval"): eval flags, falling back to the rollout ones. */
export const evalSampling = (settings: RolloutSettings, position: number): SamplingParams => ({
  maxNewTokens: settings.evalMaxResponseLen ?? settings.rolloutMaxResponseLen ?? SGLANG_DEFAULT_MAX_NEW_TOKENS,
  temperature: settings.evalTemperature ?? settings.rolloutTemperature,
  topP: settings.evalTopP ?? settings.rolloutTopP,
  topK: settings.evalTopK ?? settings.rolloutTopK,
  stop: settings.rolloutStop,
  stopTokenIds: settings.rolloutStopTokenIds,
  seed: settings.rolloutSeed + position
})

/** Eval's context limit: `--eval-max-context-len`, else `--rollout-max-context-len`. */
export const evalMaxContextLen = (settings: RolloutSettings): number | undefined =>
  settings.evalMaxContextLen ?? settings.rolloutMaxContextLen

/** Eval concurrency C_d for a dataset with Group size `groupSize` (the guide's formula, or the explicit flag). */
export const evalConcurrency = (settings: RolloutSettings, groupSize: number): number =>
  Capacity.evalConcurrency(settings.agenticConcurrency * settings.nSamplesPerPrompt, groupSize, settings.agenticEvalConcurrency)

/** The flags that keep training Sessions resident during Eval (the guide's "Yes" column). */
export const residentDuringEvalFlags = (settings: RolloutSettings): ReadonlyArray<string> =>
  (["agenticPrelaunch", "partialRollout", "fullyAsync"] as const).filter((field) => settings[field]).map(flagOf)

/** The capacity table for these settings (`relax-agentic check`). */
export const capacity = (settings: RolloutSettings): Capacity.CapacityReport => {
  const residentBecause = residentDuringEvalFlags(settings)
  return Capacity.compute({
    agenticConcurrency: settings.agenticConcurrency,
    nSamplesPerPrompt: settings.nSamplesPerPrompt,
    agenticEvalConcurrency: settings.agenticEvalConcurrency,
    evalDatasets: settings.evalDatasets,
    trainResidentDuringEval: residentBecause.length > 0,
    residentBecause,
    agentMaxSlots: settings.agentMaxSlots
  })
}

/** The cross-step mode of these settings. */
export const retentionMode = (settings: RolloutSettings): Retention.Mode => ({
  partialRollout: settings.partialRollout,
  fullyAsync: settings.fullyAsync,
  maxAbortedCount: settings.partialRolloutMaxAbortedCount
})

/** The resolved rollout configuration as a service. */
export class RolloutConfig extends Context.Service<RolloutConfig, RolloutSettings>()("relax-agentic/RolloutConfig") {
  /** Decode and resolve `input` (see `resolve`). */
  static readonly layer = (input: RolloutOptionsInput | unknown): Layer.Layer<RolloutConfig, RolloutConfigError> =>
    Layer.effect(RolloutConfig, resolve(input))
  /** An already resolved configuration. */
  static readonly layerSettings = (settings: RolloutSettings): Layer.Layer<RolloutConfig> =>
    Layer.succeed(RolloutConfig, settings)
}
