/**
 * The resolved rollout configuration: `RolloutOptions` checked across fields, derived defaults filled in, and what
 * the services derive from it (request sampling, Eval limits, the capacity table, the cross-step mode).
 *
 * **Details**
 * `resolve` decodes options (flags, a JSON config file, a trainer's object) and `resolveSettings` applies the
 * cross-field rules (`agenticConcurrency → overSamplingBatchSize → rolloutBatchSize`, one engine's flags, Eval names,
 * credit rules); every failure is a `RolloutConfigError` naming its flag. The service that hands the result to the
 * layers is layers/rollout/RolloutConfig.ts.
 */
import { Data, Effect, Result, Schema, type SchemaIssue } from "effect"
import * as AdmissionOptions from "../admission/AdmissionOptions.ts"
import * as CreditOptions from "../credit/CreditOptions.ts"
import type * as Sampling from "../engine/Sampling.ts"
import * as SchemaMessage from "../json/SchemaMessage.ts"
import * as LoraOptions from "../lora/LoraOptions.ts"
import * as Capacity from "../schedule/Capacity.ts"
import type * as Retention from "../schedule/Retention.ts"
import * as AgentSpec from "../session/AgentSpec.ts"

import * as FlagTable from "./FlagTable.ts"
import * as RolloutOptions from "./RolloutOptions.ts"

/** The resolved configuration: derived defaults applied, cross-field rules checked. */
export interface RolloutSettings extends RolloutOptions.RolloutOptions {
  readonly promptData: string
  readonly rolloutBatchSize: number
  readonly overSamplingBatchSize: number
  readonly agenticConcurrency: number
  /** Resolved; 0 = unlimited. */
  readonly agenticMaxConsecutiveDrops: number
  /** `--agent-env` as a record. */
  readonly agentEnvVars: Readonly<Record<string, string>>
  /** Eval datasets with their group size resolved. */
  readonly evalDatasets: ReadonlyArray<EvalDataset>
}

/** An Eval dataset with its group size resolved. */
export interface EvalDataset {
  readonly name: string
  readonly path: string
  readonly nSamplesPerEvalPrompt: number
}

/**
 * The default limit of Groups dropped in a row: a few rounds of the whole resident capacity must fail before the
 * rollout gives up, so a handful of unlucky Groups never stops it.
 */
export const defaultMaxConsecutiveDrops = (agenticConcurrency: number): number => Math.max(8, 2 * agenticConcurrency)

/**
 * Why a configuration cannot run: `shape` (a value of the wrong type or range, from decoding), `missing` (a required
 * flag is absent), `conflict` (flags that do not go together), `invalid` (a value that breaks a cross-field rule).
 */
export type RolloutConfigErrorReason = "shape" | "missing" | "conflict" | "invalid"

/** A configuration that cannot run, naming the flag and the fix. */
export class RolloutConfigError extends Data.TaggedError("RolloutConfigError")<{
  /** The flag (`--over-sampling-batch-size`), or `configuration` for a shape error. */
  readonly option: string
  readonly reason: RolloutConfigErrorReason
  /** What is wrong and what to do, in words. */
  readonly detail: string
  /** A shape error's Schema issue, for callers that write it their own way. */
  readonly issue?: SchemaIssue.Issue
}> {
  override get message(): string {
    return `${this.option}: ${this.detail}`
  }
}

const fail = (field: string, reason: RolloutConfigErrorReason, detail: string) =>
  new RolloutConfigError({ option: FlagTable.flagOf(field), reason, detail })

/** Flags that only one engine reads, so the other engine would silently ignore them. */
const sglangOnly = [
  "sglangUrls",
  "sglangRouterUrl",
  "sglangServerConcurrency",
  "sglangStartupTimeout",
  "sglangEnableDeterministicInference",
  "sglangApiKey",
  "sglangPriorityScheduling",
  "sglangLoraPath",
  "useRolloutRoutingReplay",
  "agenticSessionLifecycle"
] as const

const given = (value: unknown): boolean =>
  value !== undefined && value !== false && !(Array.isArray(value) && value.length === 0)

/** The engine flags: where the SGLang servers are, which tokenizer matches them, no flag of the other engine. */
const engineOptionsProblem = (options: RolloutOptions.RolloutOptions): RolloutConfigError | undefined => {
  if (options.engine === "embedded") {
    const stray = sglangOnly.find((field) => given(options[field]))
    return stray === undefined
      ? undefined
      : fail(stray, "conflict", "is only used with --engine sglang; add --engine sglang or remove it")
  }
  if (options.embeddedKvTokens !== undefined) {
    return fail(
      "embeddedKvTokens",
      "conflict",
      "sizes the embedded engine's KV pool and is not used with --engine sglang; remove it"
    )
  }
  if (options.embeddedPolicy !== undefined) {
    return fail(
      "embeddedPolicy",
      "conflict",
      "scripts the embedded engine and is not used with --engine sglang; remove it"
    )
  }
  const hasWorkers = options.sglangUrls.length > 0
  if (hasWorkers === (options.sglangRouterUrl !== undefined)) {
    return hasWorkers
      ? fail(
        "sglangRouterUrl",
        "conflict",
        "give either --sglang-url (the workers) or --sglang-router-url (a router), not both"
      )
      : fail(
        "sglangUrls",
        "missing",
        "--engine sglang needs the SGLang workers (--sglang-url http://host:port ...) or a router " +
          "(--sglang-router-url http://host:port)"
      )
  }
  if (options.tokenizer === undefined) {
    return fail(
      "tokenizer",
      "missing",
      "is required with --engine sglang: give the served model's tokenizer directory (tokenizer.json and " +
        "tokenizer_config.json, e.g. the --model-path of sglang.launch_server); the bundled Qwen3 tokenizer would " +
        "send wrong token ids to any other model"
    )
  }
  return undefined
}

/** Check the cross-field rules and fill the derived defaults. */
export const resolveSettings = (
  options: RolloutOptions.RolloutOptions
): Effect.Effect<RolloutSettings, RolloutConfigError> =>
  Effect.gen(function*() {
    if (options.promptData === undefined || options.promptData.length === 0) {
      return yield* fail(
        "promptData",
        "missing",
        "a training dataset is required: give a JSONL or JSON-array file of rows"
      )
    }
    const rolloutBatchSize = options.rolloutBatchSize ??
      (options.globalBatchSize === undefined
        ? undefined
        : Math.floor(options.globalBatchSize / options.nSamplesPerPrompt))
    if (rolloutBatchSize === undefined || rolloutBatchSize < 1) {
      return yield* fail(
        "rolloutBatchSize",
        options.globalBatchSize === undefined ? "missing" : "invalid",
        options.globalBatchSize === undefined
          ? "required: the number of Groups (prompts) per rollout step (or give --global-batch-size)"
          : `--global-batch-size ${options.globalBatchSize} // --n-samples-per-prompt ${options.nSamplesPerPrompt} is 0; set --rollout-batch-size`
      )
    }
    const overSamplingBatchSize = options.overSamplingBatchSize ?? rolloutBatchSize
    if (overSamplingBatchSize < rolloutBatchSize) {
      return yield* fail(
        "overSamplingBatchSize",
        "invalid",
        `${overSamplingBatchSize} is below --rollout-batch-size ${rolloutBatchSize}; it must be >= the batch size (or omit it)`
      )
    }
    const agenticConcurrency = options.agenticConcurrency ?? overSamplingBatchSize
    // One parser for both executors: process agents get the same record through the Supervisor's AgentSpec.
    const agentEnv = AgentSpec.parseEnv(options.agentEnv)
    if (Result.isFailure(agentEnv)) {
      return yield* new RolloutConfigError({
        option: agentEnv.failure.option,
        reason: "invalid",
        detail: agentEnv.failure.detail
      })
    }
    const agentEnvVars = agentEnv.success
    const engineProblem = engineOptionsProblem(options)
    if (engineProblem !== undefined) return yield* engineProblem
    const lora = LoraOptions.problem(options)
    if (lora !== undefined) return yield* fail(lora.field, "conflict", lora.detail)
    if (options.saveDebugRolloutData !== undefined && !options.saveDebugRolloutData.includes("{rollout_id}")) {
      return yield* fail(
        "saveDebugRolloutData",
        "invalid",
        `${JSON.stringify(options.saveDebugRolloutData)} must contain {rollout_id} so every step writes its own file`
      )
    }
    if (options.partialRolloutMaxAbortedCount !== undefined && !options.partialRollout) {
      return yield* fail(
        "partialRolloutMaxAbortedCount",
        "conflict",
        "only applies with --partial-rollout (it counts partial-rollout aborts); add --partial-rollout or remove it"
      )
    }
    if (options.fullyAsync && options.normalizeAdvantages) {
      return yield* fail(
        "normalizeAdvantages",
        "conflict",
        "cannot be used with --fully-async: global advantage whitening needs the statistics of the whole training " +
          "batch, and in fully async mode a batch's Groups come from several rollout steps while training runs; " +
          "remove --normalize-advantages (GRPO group normalization still applies) or run without --fully-async"
      )
    }
    const names = new Set<string>()
    for (const d of options.evalPromptData) {
      if (names.has(d.name)) {
        return yield* fail("evalPromptData", "invalid", `the Eval dataset name ${JSON.stringify(d.name)} is used twice`)
      }
      names.add(d.name)
    }
    if (options.evalInterval !== undefined && options.evalPromptData.length === 0) {
      return yield* fail("evalInterval", "conflict", "is set but no --eval-prompt-data NAME PATH is given")
    }
    const admission = AdmissionOptions.problem(options)
    if (admission !== undefined) return yield* fail(admission.field, "invalid", admission.detail)
    const credit = CreditOptions.problem(options)
    if (credit !== undefined) {
      return yield* new RolloutConfigError({ option: credit.flag, reason: "conflict", detail: credit.reason })
    }
    if (
      options.useDynamicBatchSize && options.maxTokensPerGpu !== undefined &&
      options.rolloutMaxContextLen !== undefined &&
      options.maxTokensPerGpu < options.rolloutMaxContextLen
    ) {
      return yield* fail(
        "maxTokensPerGpu",
        "invalid",
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

const decodeOptions = Schema.decodeUnknownEffect(RolloutOptions.RolloutOptions)

/** Decode options (JSON, flags, or a trainer's object) and resolve them; every failure names its flag. */
export const resolve = (input: unknown): Effect.Effect<RolloutSettings, RolloutConfigError> =>
  decodeOptions(input, { onExcessProperty: "error" }).pipe(
    Effect.mapError((error) =>
      new RolloutConfigError({
        option: "configuration",
        reason: "shape",
        // Schema paths name fields (`["rolloutBatchSize"]`); users know flags.
        detail: SchemaMessage.format(error.issue, FlagTable.pathKey),
        issue: error.issue
      })
    ),
    Effect.flatMap(resolveSettings),
    Effect.withSpan("Settings.resolve")
  )

/** SGLang's own default when `max_new_tokens` is not sent (the reference drops `None` sampling keys). */
const SGLANG_DEFAULT_MAX_NEW_TOKENS = 128

/** Sampling for every training request (docs/agent-contract.md); `position` is the Session's index in its Group. */
export const trainSampling = (settings: RolloutSettings, position: number): Sampling.RequestSampling => ({
  maxNewTokens: settings.rolloutMaxResponseLen ?? SGLANG_DEFAULT_MAX_NEW_TOKENS,
  temperature: settings.rolloutTemperature,
  topP: settings.rolloutTopP,
  topK: settings.rolloutTopK,
  stop: settings.rolloutStop,
  stopTokenIds: settings.rolloutStopTokenIds,
  seed: settings.rolloutSeed + position
})

/** Eval sampling (docs/runtime.md, "Eval"): eval flags, falling back to the rollout ones. */
export const evalSampling = (settings: RolloutSettings, position: number): Sampling.RequestSampling => ({
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
  Capacity.evalConcurrency(
    settings.agenticConcurrency * settings.nSamplesPerPrompt,
    groupSize,
    settings.agenticEvalConcurrency
  )

/** The flags that keep training Sessions resident during Eval (the guide's "Yes" column). */
export const residentDuringEvalFlags = (settings: RolloutSettings): ReadonlyArray<string> =>
  (["agenticPrelaunch", "partialRollout", "fullyAsync"] as const).filter((field) => settings[field]).map(
    FlagTable.flagOf
  )

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

/** The KV admission settings (undefined: admission off; docs/sglang.md "KV scheduling"). */
export const admission = (settings: RolloutSettings): AdmissionOptions.AdmissionSettings | undefined =>
  AdmissionOptions.resolve(settings)
