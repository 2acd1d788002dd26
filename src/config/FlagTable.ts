/**
 * The flag table of `relax-agentic rollout` and `relax-agentic check`: one row per flag, naming its Relax / argparse
 * spelling, the `RolloutOptions` field it fills, how its text becomes a value, and its help text.
 *
 * **Details**
 * This is the only place a flag name is tied to a field: `flagOf` (error messages), the `--config` file keys
 * (src/cli/SettingsFromFlags.ts), the effect/cli flags and docs/flags.md (src/cli/CommandFlags.ts) are all derived from it. Adding a
 * flag is adding a row (and its field to `RolloutOptions` in src/config/RolloutOptions.ts).
 */
import * as SchemaMessage from "../json/SchemaMessage.ts"
import * as ParserRegistry from "../parsers/ParserRegistry.ts"
import type * as RolloutOptions from "./RolloutOptions.ts"

/** How a flag's text becomes a value. */
export type FlagKind =
  | "string"
  | "int"
  | "number"
  | "boolean"
  /** A JSON object given as text. */
  | "json"
  /** Several strings (argparse `nargs`): repeated or space-separated. */
  | "strings"
  /** Several integers (argparse `nargs`). */
  | "ints"
  /** `NAME PATH` pairs (`--eval-prompt-data`). */
  | "pairs"
  | { readonly literals: ReadonlyArray<string> }

/** One command-line flag. */
export interface FlagSpec {
  /** Without the leading dashes: `rollout-batch-size`. */
  readonly name: string
  /** The `RolloutOptions` field it fills; `null` for flags the CLI itself consumes. */
  readonly field: keyof RolloutOptions.RolloutOptions | null
  readonly kind: FlagKind
  /** Heading in `--help`-adjacent docs (docs/flags.md). */
  readonly section: string
  readonly description: string
  /** Shown instead of the decoded default when the default is derived from other flags. */
  readonly defaultText?: string
}

/** The help sections, in order: each flag names its section. */
const Section = {
  data: "Dataset and steps",
  agent: "Agent process",
  gateway: "Gateway and parsers",
  engine: "Engine",
  sampling: "Sampling",
  eval: "Eval",
  credit: "Reward and credit",
  scheduling: "Scheduling",
  kv: "KV scheduling",
  output: "Outputs",
  cli: "Command line",
  serve: "Trainer RPC (serve)"
} as const

/** Every flag of `relax-agentic rollout` and `relax-agentic check`, in help order. */
export const rolloutFlags: ReadonlyArray<FlagSpec> = [
  // dataset and steps
  {
    name: "prompt-data",
    field: "promptData",
    kind: "string",
    section: Section.data,
    description: "Training dataset: a JSONL file (one JSON object per line) or a JSON array of objects. Required."
  },
  {
    name: "input-key",
    field: "inputKey",
    kind: "string",
    section: Section.data,
    description: "Dataset field with the prompt: a string (one user message) or an OpenAI message list."
  },
  {
    name: "metadata-key",
    field: "metadataKey",
    kind: "string",
    section: Section.data,
    description: "Dataset field with the task metadata (a JSON object), given to the agent in RELAX_INPUT_JSON."
  },
  {
    name: "label-key",
    field: "labelKey",
    kind: "string",
    section: Section.data,
    description: "Dataset field copied to every sample's `label`."
  },
  {
    name: "multimodal-keys",
    field: "multimodalKeys",
    kind: "json",
    section: Section.data,
    description: "JSON object mapping a modality to a dataset field, e.g. '{\"image\":\"images\"}'; " +
      "each image needs one `<image>` placeholder in the prompt."
  },
  {
    name: "apply-chat-template-kwargs",
    field: "applyChatTemplateKwargs",
    kind: "json",
    section: Section.data,
    description: "JSON object of base chat-template arguments, under each request's chat_template_kwargs."
  },
  {
    name: "n-samples-per-prompt",
    field: "nSamplesPerPrompt",
    kind: "int",
    section: Section.data,
    description: "Sessions per Group; every dataset row becomes one Group."
  },
  {
    name: "rollout-batch-size",
    field: "rolloutBatchSize",
    kind: "int",
    section: Section.data,
    description: "Groups per rollout step (the step's debt). This or --global-batch-size is required.",
    defaultText: "--global-batch-size // --n-samples-per-prompt"
  },
  {
    name: "global-batch-size",
    field: "globalBatchSize",
    kind: "int",
    section: Section.data,
    description: "Samples per training step; only used to derive --rollout-batch-size."
  },
  {
    name: "over-sampling-batch-size",
    field: "overSamplingBatchSize",
    kind: "int",
    section: Section.data,
    description: "Groups kept in flight per step; at least --rollout-batch-size.",
    defaultText: "--rollout-batch-size"
  },
  {
    name: "num-rollout",
    field: "numRollout",
    kind: "int",
    section: Section.data,
    description: "Number of rollout steps."
  },
  {
    name: "rollout-shuffle",
    field: "rolloutShuffle",
    kind: "boolean",
    section: Section.data,
    description: "Shuffle the dataset every epoch (seeded by --rollout-seed)."
  },
  // agent process
  {
    name: "agent-command",
    field: "agentCommand",
    kind: "string",
    section: Section.agent,
    description: "Shell command started for every Session, run as `/bin/bash -lc <command>`. Required."
  },
  {
    name: "agent-cwd",
    field: "agentCwd",
    kind: "string",
    section: Section.agent,
    description: "Working directory of the agent process; must exist. Required."
  },
  {
    name: "agent-env",
    field: "agentEnv",
    kind: "strings",
    section: Section.agent,
    description: "Extra environment for the agent: KEY=VALUE ... (RELAX_ keys are reserved)."
  },
  {
    name: "agent-timeout",
    field: "agentTimeout",
    kind: "number",
    section: Section.agent,
    description: "Active-time budget of one Session in seconds, counted only while it is in Runtime; an agent " +
      "that sends no model request within this many seconds of its start is stopped too."
  },
  {
    name: "agent-max-slots",
    field: "agentMaxSlots",
    kind: "int",
    section: Section.agent,
    description: "Hard concurrency limit of an external agent executor; `check` fails and `rollout` warns at " +
      "startup when it is below the required slots."
  },
  {
    name: "agent-max-starting",
    field: "agentMaxStarting",
    kind: "int",
    section: Section.agent,
    description: "Agents starting at once (from their launch to their first model request), per process: the " +
      "single process, or each cluster runner. Others wait to be launched, so a step does not start every sandbox " +
      "in the same second.",
    defaultText: "unlimited"
  },
  {
    name: "use-agentic-rollout",
    field: null,
    kind: "boolean",
    section: Section.agent,
    description: "Relax's switch to the agentic path, accepted so recipes carry over; this command is always " +
      "agentic, so it changes nothing."
  },
  // gateway and parsers
  {
    name: "host",
    field: "host",
    kind: "string",
    section: Section.gateway,
    description: "Interface the model API gateway binds (agents reach it through RELAX_BASE_URL); any address other " +
      "than loopback logs a warning, since the session id is the only credential.",
    defaultText: "127.0.0.1"
  },
  {
    name: "port",
    field: "port",
    kind: "int",
    section: Section.gateway,
    description: "Port of the gateway; 0 lets the OS pick a free one."
  },
  {
    name: "otlp-endpoint",
    field: "otlpEndpoint",
    kind: "string",
    section: Section.gateway,
    description: "OpenTelemetry OTLP/HTTP base URL (e.g. http://127.0.0.1:4318): traces of every model request, " +
      "Session and step, and the metrics, exported with JSON to <url>/v1/traces and <url>/v1/metrics. Unset: " +
      "OTEL_EXPORTER_OTLP_ENDPOINT if set, else nothing is exported (docs/observability.md)."
  },
  {
    name: "metrics-port",
    field: "metricsPort",
    kind: "int",
    section: Section.gateway,
    description: "Also serve the Prometheus /metrics on 127.0.0.1 at this port (0: the OS picks one; its URL is " +
      "logged), besides the gateway's own /metrics (docs/observability.md)."
  },
  {
    name: "agentic-tool-call-parser",
    field: "agenticToolCallParser",
    kind: "string",
    section: Section.gateway,
    description: `Tool-call parser (SGLang names: ${ParserRegistry.ToolCallParsers.names.join(", ")}); ` +
      "unset: generated text is not parsed for tool calls."
  },
  {
    name: "agentic-fail-unparsed-turns",
    field: "agenticFailUnparsedTurns",
    kind: "boolean",
    section: Section.gateway,
    description:
      "Answer 500 (and drop the Session's Group) for a turn whose tool calls the parser dropped or could not " +
      "read, leaving nothing else, as Relax does. Default: the turn is committed with its raw text as content, " +
      "answered 200 and counted in rollout/parser_failures."
  },
  {
    name: "agentic-reasoning-parser",
    field: "agenticReasoningParser",
    kind: "string",
    section: Section.gateway,
    description: `Reasoning parser (${ParserRegistry.ReasoningParsers.names.join(", ")}); unset: no reasoning split.`
  },
  {
    name: "agentic-strict-match",
    field: "strictMatch",
    kind: "boolean",
    section: Section.gateway,
    description: "Match histories exactly: an assistant message echoed without its reasoning_content starts a new " +
      "branch instead of matching the committed response."
  },
  {
    name: "agentic-allow-special-tokens",
    field: "agenticAllowSpecialTokens",
    kind: "boolean",
    section: Section.gateway,
    description: "Tokenize special-token literals in agent text (<|im_end|> in a user message or tool result) as " +
      "control tokens, as Relax does. Default: they are plain text, so an agent or tool cannot open or close turns."
  },
  // engine
  {
    name: "engine",
    field: "engine",
    kind: { literals: ["embedded", "sglang"] },
    section: Section.engine,
    description: "Inference backend: `embedded` (in-process, deterministic) or `sglang` (servers at --sglang-url)."
  },
  {
    name: "sglang-url",
    field: "sglangUrls",
    kind: "strings",
    section: Section.engine,
    description: "SGLang worker URLs (http://host:port ...) for --engine sglang; Sessions stick to one worker. " +
      "This or --sglang-router-url is required with --engine sglang."
  },
  {
    name: "sglang-router-url",
    field: "sglangRouterUrl",
    kind: "string",
    section: Section.engine,
    description: "An SGLang router (SGLang Model Gateway, http://host:port) for --engine sglang: generation goes " +
      "through it with the sticky header `X-SMG-Routing-Key: <session id>`; workers are listed from its /workers " +
      "for aborts, weight versions and session closes. Instead of --sglang-url."
  },
  {
    name: "sglang-server-concurrency",
    field: "sglangServerConcurrency",
    kind: "int",
    section: Section.engine,
    description: "Concurrent requests per SGLang worker.",
    defaultText: "512"
  },
  {
    name: "sglang-startup-timeout",
    field: "sglangStartupTimeout",
    kind: "number",
    section: Section.engine,
    description: "Seconds to wait at startup for SGLang servers that are still starting (GET /health answers 503 " +
      "while the model loads, or the port refuses connections), asking every 2 seconds; then the rollout refuses to " +
      "start, naming the server. 0: ask once. Raise it for models that take longer to load.",
    defaultText: "600"
  },
  {
    name: "sglang-enable-deterministic-inference",
    field: "sglangEnableDeterministicInference",
    kind: "boolean",
    section: Section.engine,
    description: "The SGLang servers were launched for deterministic inference (docs/sglang.md): send " +
      "`sampling_seed` (--rollout-seed plus the Session's Group position) on every request, as Relax does. Without " +
      "it no seed is sent."
  },
  {
    name: "sglang-api-key",
    field: "sglangApiKey",
    kind: "string",
    section: Section.engine,
    description: "Sent as `Authorization: Bearer <key>` on every SGLang request, for servers and routers launched " +
      "with an API key (without it they answer 401). Default: the SGLANG_API_KEY environment variable."
  },
  {
    name: "sglang-priority-scheduling",
    field: "sglangPriorityScheduling",
    kind: "boolean",
    section: Section.engine,
    description: "The SGLang servers run with priority scheduling enabled: resumed attempts (partial " +
      "rollout, weight updates) and the requests of protected Sessions are sent with `priority: 1` and new ones " +
      "with 0, so they are not queued behind new work."
  },
  {
    name: "sglang-lora-path",
    field: "sglangLoraPath",
    kind: "string",
    section: Section.engine,
    description: "Generate with this LoRA adapter (`lora_path` on every request; servers with LoRA enabled and the " +
      "adapter loaded)."
  },
  {
    name: "use-rollout-routing-replay",
    field: "useRolloutRoutingReplay",
    kind: "boolean",
    section: Section.engine,
    description: "MoE rollout routing replay (Relax's flag): `return_routed_experts` on every request (servers " +
      "launched to return routed experts; docs/sglang.md), and the expert ids of every sequence position in the training " +
      "sample's `rollout_routed_experts` (docs/outputs.md). SGLang only."
  },
  {
    name: "agentic-session-lifecycle",
    field: "agenticSessionLifecycle",
    kind: "boolean",
    section: Section.engine,
    description: "Send `session_id` with every SGLang request and POST /close_session to every worker when a Session " +
      "ends, so its radix-cache entries are released (servers launched with the session radix cache; see " +
      "docs/sglang.md). A failed close is counted, never fatal."
  },
  {
    name: "tokenizer",
    field: "tokenizer",
    kind: "string",
    section: Section.engine,
    description: "Directory with tokenizer.json and tokenizer_config.json (chat template) of the served model, and " +
      "its preprocessor_config.json for a vision model; required with --engine sglang, where startup checks that " +
      "the servers tokenize the same way (their /tokenize).",
    defaultText: "the bundled Qwen3 tokenizer (--engine embedded only)"
  },
  {
    name: "multimodal-train-inputs",
    field: "multimodalTrainInputs",
    kind: { literals: ["none", "grid", "pixels"] },
    section: Section.engine,
    description: "What a vision model's samples carry for training (a --tokenizer with preprocessor_config.json): " +
      "`pixels` = processor-expanded image tokens, `image_grid_thw` and `pixel_values` (computed as the model's " +
      "image processor does; a sidecar .npy per step beside rollout_<id>.jsonl, arrays in the API and RPC); `grid` = " +
      "the tokens and `image_grid_thw` only; `none` = one placeholder per image as inference saw it, no " +
      "multimodal_train_inputs (docs/outputs.md).",
    defaultText: "pixels"
  },
  {
    name: "embedded-policy",
    field: "embeddedPolicy",
    kind: "string",
    section: Section.engine,
    description: "`path/to/module.ts#export`: a function (request) => assistant text that scripts the embedded " +
      "engine's answers (--engine embedded only).",
    defaultText: "seeded sampling over the vocabulary"
  },
  // sampling
  {
    name: "rollout-temperature",
    field: "rolloutTemperature",
    kind: "number",
    section: Section.sampling,
    description: "Sampling temperature of every training request (request values are ignored)."
  },
  {
    name: "rollout-top-p",
    field: "rolloutTopP",
    kind: "number",
    section: Section.sampling,
    description: "Top-p of every training request."
  },
  {
    name: "rollout-top-k",
    field: "rolloutTopK",
    kind: "int",
    section: Section.sampling,
    description: "Top-k of every training request; -1 disables it."
  },
  {
    name: "rollout-max-response-len",
    field: "rolloutMaxResponseLen",
    kind: "int",
    section: Section.sampling,
    description: "Most tokens generated per model request, unless the request asks for fewer.",
    defaultText: "128 (SGLang's default)"
  },
  {
    name: "rollout-max-context-len",
    field: "rolloutMaxContextLen",
    kind: "int",
    section: Section.sampling,
    description: "Token limit of a Session's whole training lineage (prompt and every turn).",
    defaultText: "unlimited"
  },
  {
    name: "rollout-stop",
    field: "rolloutStop",
    kind: "strings",
    section: Section.sampling,
    description: "Stop strings of every request (several values allowed)."
  },
  {
    name: "rollout-stop-token-ids",
    field: "rolloutStopTokenIds",
    kind: "ints",
    section: Section.sampling,
    description: "Stop token ids of every request (several values allowed)."
  },
  {
    name: "rollout-skip-special-tokens",
    field: "rolloutSkipSpecialTokens",
    kind: "boolean",
    section: Section.sampling,
    description: "Drop special tokens (e.g. <|endoftext|>) from the response text the agent gets; the trained " +
      "token ids keep them, and a trailing end-of-turn token is never part of the text."
  },
  {
    name: "rollout-seed",
    field: "rolloutSeed",
    kind: "int",
    section: Section.sampling,
    description: "Seed of dataset shuffling and of sampling (a Session's seed is this plus its Group position)."
  },
  // eval
  {
    name: "eval-prompt-data",
    field: "evalPromptData",
    kind: "pairs",
    section: Section.eval,
    description: "Eval datasets as NAME PATH pairs: --eval-prompt-data gsm8k a.jsonl math b.jsonl."
  },
  {
    name: "n-samples-per-eval-prompt",
    field: "nSamplesPerEvalPrompt",
    kind: "int",
    section: Section.eval,
    description: "Sessions per Eval Group."
  },
  {
    name: "eval-interval",
    field: "evalInterval",
    kind: "int",
    section: Section.eval,
    description: "Run Eval (every --eval-prompt-data dataset) before training, after every N steps, and after the " +
      "last step. Without it no Eval runs.",
    defaultText: "no Eval"
  },
  {
    name: "skip-eval-before-train",
    field: "skipEvalBeforeTrain",
    kind: "boolean",
    section: Section.eval,
    description: "Skip the Eval that runs before the first training step."
  },
  {
    name: "eval-temperature",
    field: "evalTemperature",
    kind: "number",
    section: Section.eval,
    description: "Eval sampling temperature.",
    defaultText: "--rollout-temperature"
  },
  {
    name: "eval-top-p",
    field: "evalTopP",
    kind: "number",
    section: Section.eval,
    description: "Eval top-p.",
    defaultText: "--rollout-top-p"
  },
  {
    name: "eval-top-k",
    field: "evalTopK",
    kind: "int",
    section: Section.eval,
    description: "Eval top-k.",
    defaultText: "--rollout-top-k"
  },
  {
    name: "eval-max-response-len",
    field: "evalMaxResponseLen",
    kind: "int",
    section: Section.eval,
    description: "Eval tokens per model request.",
    defaultText: "--rollout-max-response-len"
  },
  {
    name: "eval-max-context-len",
    field: "evalMaxContextLen",
    kind: "int",
    section: Section.eval,
    description: "Eval lineage token limit.",
    defaultText: "--rollout-max-context-len"
  },
  // reward and credit
  {
    name: "reward-key",
    field: "rewardKey",
    kind: "string",
    section: Section.credit,
    description: "When the agent writes reward as an object, the key of its primary value."
  },
  {
    name: "eval-reward-key",
    field: "evalRewardKey",
    kind: "string",
    section: Section.credit,
    description: "The same for Eval.",
    defaultText: "--reward-key"
  },
  {
    name: "custom-rm-path",
    field: "customRmPath",
    kind: "string",
    section: Section.credit,
    description: "`module#export` of a reward function (sample, config) => reward for rows without a reward."
  },
  {
    name: "group-rm",
    field: "groupRm",
    kind: "boolean",
    section: Section.credit,
    description: "Call --custom-rm-path once per Group: (samples, config) => rewards."
  },
  {
    name: "agentic-custom-advantage-path",
    field: "agenticCustomAdvantagePath",
    kind: "string",
    section: Section.credit,
    description: "`module#export` of a custom advantage function: export metadata by Session → one credit per " +
      "context (or null to filter the Group). Training only."
  },
  {
    name: "advantage-estimator",
    field: "advantageEstimator",
    kind: { literals: ["grpo"] },
    section: Section.credit,
    description: "Advantage estimator for standard rewards."
  },
  {
    name: "disable-grpo-std-normalization",
    field: "disableGrpoStdNormalization",
    kind: "boolean",
    section: Section.credit,
    description: "Do not divide Group-centred rewards by the Group's standard deviation."
  },
  {
    name: "disable-rewards-normalization",
    field: "disableRewardsNormalization",
    kind: "boolean",
    section: Section.credit,
    description: "Use raw rewards as advantages (no Group mean subtraction)."
  },
  {
    name: "normalize-advantages",
    field: "normalizeAdvantages",
    kind: "boolean",
    section: Section.credit,
    description: "Whiten the step's advantages over its loss-masked tokens."
  },
  {
    name: "dynamic-sampling-filter-path",
    field: "dynamicSamplingFilterPath",
    kind: "string",
    section: Section.credit,
    description: "`module#export` of a Group filter (samples, config) => true | false | { keep, reason }, called " +
      "once per finished training Group after its credit (never in Eval): a Group not kept is filtered and refilled, " +
      "counted under rollout/dynamic_filter/drop_<reason> when a reason is given."
  },
  {
    name: "log-passrate",
    field: "logPassrate",
    kind: "boolean",
    section: Section.credit,
    description: "Report pass@k, counting a primary reward of 1 as a success."
  },
  {
    name: "use-dynamic-batch-size",
    field: "useDynamicBatchSize",
    kind: "boolean",
    section: Section.credit,
    description: "Pack samples into token-budgeted micro-batches (required when a Session exports several contexts)."
  },
  {
    name: "max-tokens-per-gpu",
    field: "maxTokensPerGpu",
    kind: "int",
    section: Section.credit,
    description: "Token budget of one micro-batch; required with --use-dynamic-batch-size."
  },
  // scheduling
  {
    name: "agentic-concurrency",
    field: "agenticConcurrency",
    kind: "int",
    section: Section.scheduling,
    description: "Resident training Groups (Prepare and Runtime share this capacity).",
    defaultText: "--over-sampling-batch-size"
  },
  {
    name: "agentic-eval-concurrency",
    field: "agenticEvalConcurrency",
    kind: "int",
    section: Section.scheduling,
    description: "Resident Eval Groups per dataset.",
    defaultText: "ceil(T / n_samples_per_eval_prompt), T = agentic_concurrency * n_samples_per_prompt"
  },
  {
    name: "agentic-prelaunch",
    field: "agenticPrelaunch",
    kind: "boolean",
    section: Section.scheduling,
    description: "Start agents while resident capacity is free, the next step's too; their first request is held " +
      "until the Group's Runtime lease."
  },
  {
    name: "agentic-max-consecutive-drops",
    field: "agenticMaxConsecutiveDrops",
    kind: "int",
    section: Section.scheduling,
    description: "Stop the rollout with an error after this many Groups dropped in a row (training and Eval; an " +
      "accepted or filtered Group resets the count), instead of refilling a failing agent forever. 0 = unlimited, " +
      "as Relax.",
    defaultText: "max(8, 2 * --agentic-concurrency)"
  },
  {
    name: "partial-rollout",
    field: "partialRollout",
    kind: "boolean",
    section: Section.scheduling,
    description: "Reuse unfinished samples: when a step's debt is paid, in-flight generations are aborted and parked " +
      "(the agent's HTTP request stays open) and resume next step from prompt + partial tokens; their Groups stay " +
      "resident across the step boundary."
  },
  {
    name: "partial-rollout-max-aborted-count",
    field: "partialRolloutMaxAbortedCount",
    kind: "int",
    section: Section.scheduling,
    description: "With --partial-rollout: a request aborted this many times is protected at the next resume (it " +
      "is not aborted again, its Session's active-time budget keeps running, and a step's close waits for it).",
    defaultText: "unlimited"
  },
  {
    name: "fully-async",
    field: "fullyAsync",
    kind: "boolean",
    section: Section.scheduling,
    description: "Overlap rollout and training: a step may close while its remaining debt is interrupted resident " +
      "Groups, which finish into the previous partition next step; a final backfill step drains the rest. " +
      "Incompatible with --normalize-advantages."
  },
  {
    name: "lora-adapter-mode",
    field: "loraAdapterMode",
    kind: "boolean",
    section: Section.scheduling,
    description: "The trainer trains a LoRA adapter and publishes it (PublishAdapter / publishAdapter): every " +
      "worker loads it and requests name it. Alone: in place, a two-phase weight update of the fixed name " +
      "relax_policy_lora. With --enable-versioned-lora-publication: versioned (docs/lora.md)."
  },
  {
    name: "enable-versioned-lora-publication",
    field: "enableVersionedLoraPublication",
    kind: "boolean",
    section: Section.scheduling,
    description: "With --lora-adapter-mode and --fully-async: each publication is a new adapter version loaded on " +
      "every worker without pausing generation; a Session binds the newest version at its first model request and " +
      "keeps it for its whole life; at most 2 versions are loaded (docs/lora.md)."
  },
  // KV scheduling (docs/sglang.md "KV scheduling")
  {
    name: "agentic-program-admission",
    field: "agenticProgramAdmission",
    kind: "boolean",
    section: Section.kv,
    description: "Program-aware KV admission: every backend attempt reserves its prompt + expected decode tokens " +
      "against the fleet's KV pool (Σ max_total_num_tokens of healthy workers, read from their /metrics) and waits, " +
      "first come first served, while the pool is full or a worker is under pressure, instead of being retracted " +
      "by SGLang (docs/sglang.md \"KV scheduling\")."
  },
  {
    name: "agentic-admission-headroom",
    field: "agenticAdmissionHeadroom",
    kind: "number",
    section: Section.kv,
    description: "With --agentic-program-admission: the share of the fleet's KV tokens reservations may fill, in " +
      "(0, 1]; 1.0 when admission holds nearly all the traffic (docs/sglang.md \"KV scheduling\")."
  },
  {
    name: "agentic-admission-pressure-threshold",
    field: "agenticAdmissionPressureThreshold",
    kind: "number",
    section: Section.kv,
    description: "With --agentic-program-admission: no attempt is admitted while any worker's KV token usage is at " +
      "or above this, in (0, 1]."
  },
  {
    name: "agentic-admission-expected-decode-cap",
    field: "agenticAdmissionExpectedDecodeCap",
    kind: "int",
    section: Section.kv,
    description: "With --agentic-program-admission: the most completion tokens an attempt reserves (its remaining " +
      "budget when smaller), > 0.",
    defaultText: "--rollout-max-response-len"
  },
  {
    name: "agentic-admission-max-wait-s",
    field: "agenticAdmissionMaxWaitS",
    kind: "number",
    section: Section.kv,
    description: "With --agentic-program-admission: an attempt that waited this many seconds is sent without a " +
      "reservation (counted as bypass_aged), >= 0."
  },
  {
    name: "agentic-admission-scope",
    field: "agenticAdmissionScope",
    kind: { literals: ["train", "all"] },
    section: Section.kv,
    description: "With --agentic-program-admission: `train` admits training Sessions' attempts only (Eval runs " +
      "unreserved), `all` admits Eval's too."
  },
  {
    name: "embedded-kv-tokens",
    field: "embeddedKvTokens",
    kind: "int",
    section: Section.kv,
    description: "The embedded engine's KV pool in tokens: what it reports as max_total_num_tokens (its used tokens " +
      "are its running attempts' lengths), so admission runs without SGLang (--engine embedded only).",
    defaultText: "262144"
  },
  // outputs
  {
    name: "output-dir",
    field: "outputDir",
    kind: "string",
    section: Section.output,
    description: "Directory for rollout_<id>.jsonl (one sample per line) and metrics.jsonl; the logs of failed " +
      "Sessions are kept in its logs/ folder as <session_id>.log.",
    defaultText: "runs/rollout-<timestamp>-<id> (relax-agentic rollout)"
  },
  {
    name: "agentic-keep-session-logs",
    field: "agenticKeepSessionLogs",
    kind: "boolean",
    section: Section.output,
    description: "Keep every Session's agent log (stdout + stderr) in <output-dir>/logs/, not only the failed ones."
  },
  {
    name: "save-debug-rollout-data",
    field: "saveDebugRolloutData",
    kind: "string",
    section: Section.output,
    description: "Path with {rollout_id}: per-step JSONL dump of metadata, SessionForest state hashes, status, " +
      "turns, timing, aborts and weight versions, the training view and each Session's whole SessionForest " +
      "(what `relax-agentic inspect` shows)."
  },
  // the command line itself
  {
    name: "config",
    field: null,
    kind: "string",
    section: Section.cli,
    description: "JSON file of options (keys: flag names without dashes, or RolloutOptions field names); " +
      "flags on the command line win."
  }
]

/** `check` only: which dataset row the check Session runs. */
export const rowFlag: FlagSpec = {
  name: "row",
  field: null,
  kind: "int",
  section: Section.cli,
  description: "`check` only: the dataset row (0-based) the check Session runs."
}

/** `check` only: the SGLang conformance probe (docs/sglang.md, "Check your SGLang"). */
export const probeFlags: ReadonlyArray<FlagSpec> = [
  {
    name: "probe-engine",
    field: null,
    kind: "boolean",
    section: Section.cli,
    description: "`check` only: instead of an agent Session, probe the configured SGLang workers or router for every " +
      "behaviour relax-agentic relies on (a table; exits non-zero on a row that breaks a rollout)."
  },
  {
    name: "probe-budget",
    field: null,
    kind: "int",
    section: Section.cli,
    description: "`check --probe-engine` only: the most short /generate requests the probe sends. Default: 40."
  },
  {
    name: "json",
    field: null,
    kind: "boolean",
    section: Section.cli,
    description: "`check --probe-engine` only: print the probe's report as JSON instead of a table."
  }
]

/** `serve` only: where the trainer RPC listens and what it asks of callers (docs/trainer.md). */
export const serveFlags: ReadonlyArray<FlagSpec> = [
  {
    name: "rpc-host",
    field: null,
    kind: "string",
    section: Section.serve,
    description: "`serve` only: interface the trainer RPC binds. A host other than loopback needs a token.",
    defaultText: "127.0.0.1"
  },
  {
    name: "rpc-port",
    field: null,
    kind: "int",
    section: Section.serve,
    description:
      "`serve` only: port of the trainer RPC (`0`: the system picks one); `serve` prints the URL it listens on.",
    defaultText: "8765"
  },
  {
    name: "rpc-token",
    field: null,
    kind: "string",
    section: Section.serve,
    description: "`serve` only: every RPC request must carry `Authorization: Bearer <token>`. " +
      "Also read from the environment variable RELAX_RPC_TOKEN, which keeps it out of the process list.",
    defaultText: "none"
  }
]

/** `--name` of every flag that fills a field, keyed by the field. */
export const flagNameOfField: ReadonlyMap<string, string> = new Map(
  rolloutFlags.flatMap((spec) => spec.field === null ? [] : [[spec.field, `--${spec.name}`]])
)

/**
 * The flag of a field, from the flag table (`rolloutBatchSize` → `--rollout-batch-size`, `sglangUrls` →
 * `--sglang-url`); a field without a flag gets its mechanical kebab-case name.
 */
export const flagOf = (field: string): string =>
  flagNameOfField.get(field) ?? `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`

/** A Schema path segment as users know it: a settings field as its flag, anything else as Effect writes it. */
export const pathKey = (key: PropertyKey): string =>
  typeof key === "string" && /^[A-Za-z]+$/.test(key) ? flagOf(key) : SchemaMessage.bracketKey(key)
