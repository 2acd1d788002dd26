/**
 * The option Schema of a rollout: every flag of `relax-agentic rollout` as a camelCase field, with the reference's
 * defaults.
 *
 * **Details**
 * A field is named after its flag in camelCase (`--rollout-batch-size` → `rolloutBatchSize`); the flag table
 * (src/config/FlagTable.ts) ties each field to its flag. `RolloutOptions` is what a CLI, a JSON config file or a
 * trainer writes (defaults filled in by decoding); src/config/Settings.ts resolves it into the `RolloutSettings` the
 * services read.
 */
import { Effect, Schema } from "effect"

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

/** What vision samples carry for training (`--multimodal-train-inputs`, docs/outputs.md). */
export const MultimodalTrainInputs = Schema.Literals(["none", "grid", "pixels"])
export type MultimodalTrainInputs = typeof MultimodalTrainInputs.Type

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
  /** Agents between their launch and their first model request at once, per process (unlimited when absent). */
  agentMaxStarting: Schema.optional(PositiveInt),
  // gateway
  host: withDefault(Schema.String, "127.0.0.1"),
  port: withDefault(NonNegativeInt, 0),
  /** OTLP/HTTP base URL for traces and metrics (else `OTEL_EXPORTER_OTLP_ENDPOINT`; unset: no export). */
  otlpEndpoint: Schema.optional(Schema.String),
  /** A loopback port that serves only Prometheus `/metrics` (0: any free one); unset: only the gateway's `/metrics`. */
  metricsPort: Schema.optional(NonNegativeInt),
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
  /** Seconds the startup health check waits for SGLang servers that are starting (0: ask once); the engine's default (600) when absent. */
  sglangStartupTimeout: Schema.optional(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))),
  /** Send `sampling_seed` (the servers run deterministic inference). */
  sglangEnableDeterministicInference: withDefault(Schema.Boolean, false),
  /** Send `session_id` and close SGLang sessions when a Session ends. */
  agenticSessionLifecycle: withDefault(Schema.Boolean, false),
  /** `Authorization: Bearer` for SGLang (default: `SGLANG_API_KEY`). */
  sglangApiKey: Schema.optional(Schema.String),
  /** Send `priority` (resumed attempts first; servers with priority scheduling). */
  sglangPriorityScheduling: withDefault(Schema.Boolean, false),
  /** `lora_path` on every request. */
  sglangLoraPath: Schema.optional(Schema.String),
  /** `return_routed_experts` on every request; each response token's MoE routing in the sample's `routed_experts`. */
  useRolloutRoutingReplay: withDefault(Schema.Boolean, false),
  /** Directory with `tokenizer.json` (+ chat template); required with SGLang, else the bundled Qwen3 tokenizer. */
  tokenizer: Schema.optional(Schema.String),
  multimodalTrainInputs: withDefault(MultimodalTrainInputs, "pixels"),
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
  /** Serve the trainer's LoRA adapters (docs/lora.md): in place, or versioned with the next flag. */
  loraAdapterMode: withDefault(Schema.Boolean, false),
  /** Versioned LoRA: each Session keeps the version it bound (needs `loraAdapterMode` and `fullyAsync`). */
  enableVersionedLoraPublication: withDefault(Schema.Boolean, false),
  // KV scheduling: ranges are checked only with admission on (src/config/AdmissionOptions.ts), as Relax does
  /** Reserve KV tokens per backend attempt and wait for room (docs/sglang.md "KV scheduling"). */
  agenticProgramAdmission: withDefault(Schema.Boolean, false),
  agenticAdmissionHeadroom: withDefault(Schema.Finite, 0.9),
  agenticAdmissionPressureThreshold: withDefault(Schema.Finite, 0.92),
  /** Default: `rolloutMaxResponseLen`. */
  agenticAdmissionExpectedDecodeCap: Schema.optional(Schema.Int),
  agenticAdmissionMaxWaitS: withDefault(Schema.Finite, 30),
  agenticAdmissionScope: withDefault(Schema.Literals(["train", "all"]), "train"),
  /** The embedded engine's KV pool (tokens) it reports to admission. */
  embeddedKvTokens: Schema.optional(PositiveInt),
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
