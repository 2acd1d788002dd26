/**
 * The flag table of `relax-agentic rollout` and `relax-agentic check`, the command-line normalization effect/cli
 * needs before parsing, the flags reference (docs/flags.md), and the effect/cli flags built from the table.
 *
 * **Details**
 * Every flag is one row of {@link rolloutFlags}: its Relax / argparse name, the `RolloutOptions` field it fills, and its
 * help text. Defaults are not repeated here: flags the user leaves out stay out of the options object, so the defaults
 * come from decoding `RolloutOptions` (layers/Config.ts) and the help shows what that decoding fills in.
 *
 * argparse recipes write several values after one flag (`--agent-env A=1 B=2`, `--eval-prompt-data n1 p1 n2 p2`);
 * effect/cli takes one value per occurrence, so {@link expandMultiValues} rewrites such runs into repeated flags
 * (`--agent-env A=1 --agent-env B=2`) before parsing. Both spellings are accepted. As in argparse, the last
 * occurrence of a single-value flag wins ({@link lastOccurrenceWins}).
 */
import { Option, Schema } from "effect"
import { Flag } from "effect/cli"
import * as Config from "../../layers/Config.ts"
import * as Parsers from "../parsers/registry.ts"

// ---------------------------------------------------------------------------------------------------------------
// The flag table

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
  readonly field: keyof Config.RolloutOptions | null
  readonly kind: FlagKind
  /** Heading in `--help`-adjacent docs (docs/flags.md). */
  readonly section: string
  readonly description: string
  /** Shown instead of the decoded default when the default is derived from other flags. */
  readonly defaultText?: string
}

const S = {
  data: "Dataset and steps",
  agent: "Agent process",
  gateway: "Gateway and parsers",
  engine: "Engine",
  sampling: "Sampling",
  eval: "Eval",
  credit: "Reward and credit",
  scheduling: "Scheduling",
  output: "Outputs",
  cli: "Command line"
} as const

/** Every flag of `relax-agentic rollout` and `relax-agentic check`, in help order. */
export const rolloutFlags: ReadonlyArray<FlagSpec> = [
  // dataset and steps
  {
    name: "prompt-data",
    field: "promptData",
    kind: "string",
    section: S.data,
    description: "Training dataset: a JSONL file (one JSON object per line) or a JSON array of objects. Required."
  },
  {
    name: "input-key",
    field: "inputKey",
    kind: "string",
    section: S.data,
    description: "Dataset field with the prompt: a string (one user message) or an OpenAI message list."
  },
  {
    name: "metadata-key",
    field: "metadataKey",
    kind: "string",
    section: S.data,
    description: "Dataset field with the task metadata (a JSON object), given to the agent in RELAX_INPUT_JSON."
  },
  {
    name: "label-key",
    field: "labelKey",
    kind: "string",
    section: S.data,
    description: "Dataset field copied to every sample's `label`."
  },
  {
    name: "multimodal-keys",
    field: "multimodalKeys",
    kind: "json",
    section: S.data,
    description: "JSON object mapping a modality to a dataset field, e.g. '{\"image\":\"images\"}'; " +
      "each image needs one `<image>` placeholder in the prompt."
  },
  {
    name: "apply-chat-template-kwargs",
    field: "applyChatTemplateKwargs",
    kind: "json",
    section: S.data,
    description: "JSON object of base chat-template arguments, under each request's chat_template_kwargs."
  },
  {
    name: "n-samples-per-prompt",
    field: "nSamplesPerPrompt",
    kind: "int",
    section: S.data,
    description: "Sessions per Group; every dataset row becomes one Group."
  },
  {
    name: "rollout-batch-size",
    field: "rolloutBatchSize",
    kind: "int",
    section: S.data,
    description: "Groups per rollout step (the step's debt). This or --global-batch-size is required.",
    defaultText: "--global-batch-size // --n-samples-per-prompt"
  },
  {
    name: "global-batch-size",
    field: "globalBatchSize",
    kind: "int",
    section: S.data,
    description: "Samples per training step; only used to derive --rollout-batch-size."
  },
  {
    name: "over-sampling-batch-size",
    field: "overSamplingBatchSize",
    kind: "int",
    section: S.data,
    description: "Groups kept in flight per step; at least --rollout-batch-size.",
    defaultText: "--rollout-batch-size"
  },
  {
    name: "num-rollout",
    field: "numRollout",
    kind: "int",
    section: S.data,
    description: "Number of rollout steps."
  },
  {
    name: "rollout-shuffle",
    field: "rolloutShuffle",
    kind: "boolean",
    section: S.data,
    description: "Shuffle the dataset every epoch (seeded by --rollout-seed)."
  },
  // agent process
  {
    name: "agent-command",
    field: "agentCommand",
    kind: "string",
    section: S.agent,
    description: "Shell command started for every Session, run as `/bin/bash -lc <command>`. Required."
  },
  {
    name: "agent-cwd",
    field: "agentCwd",
    kind: "string",
    section: S.agent,
    description: "Working directory of the agent process; must exist. Required."
  },
  {
    name: "agent-env",
    field: "agentEnv",
    kind: "strings",
    section: S.agent,
    description: "Extra environment for the agent: KEY=VALUE ... (RELAX_ keys are reserved)."
  },
  {
    name: "agent-timeout",
    field: "agentTimeout",
    kind: "number",
    section: S.agent,
    description: "Active-time budget of one Session in seconds, counted only while it is in Runtime."
  },
  {
    name: "agent-max-slots",
    field: "agentMaxSlots",
    kind: "int",
    section: S.agent,
    description: "Hard concurrency limit of an external agent executor; `check` warns when it is below the " +
      "required slots."
  },
  {
    name: "use-agentic-rollout",
    field: null,
    kind: "boolean",
    section: S.agent,
    description: "Accepted for Relax recipe compatibility and ignored: this command is always agentic."
  },
  // gateway and parsers
  {
    name: "host",
    field: "host",
    kind: "string",
    section: S.gateway,
    description: "Interface the model API gateway binds (agents reach it through RELAX_BASE_URL)."
  },
  {
    name: "port",
    field: "port",
    kind: "int",
    section: S.gateway,
    description: "Port of the gateway; 0 lets the OS pick a free one."
  },
  {
    name: "agentic-tool-call-parser",
    field: "agenticToolCallParser",
    kind: "string",
    section: S.gateway,
    description: `Tool-call parser (SGLang names: ${Parsers.ToolCallParsers.names.join(", ")}); ` +
      "unset: generated text is not parsed for tool calls."
  },
  {
    name: "agentic-reasoning-parser",
    field: "agenticReasoningParser",
    kind: "string",
    section: S.gateway,
    description: `Reasoning parser (${Parsers.ReasoningParsers.names.join(", ")}); unset: no reasoning split.`
  },
  {
    name: "agentic-strict-match",
    field: "strictMatch",
    kind: "boolean",
    section: S.gateway,
    description: "Match histories exactly: an assistant message echoed without its reasoning_content starts a new " +
      "branch instead of matching the committed response."
  },
  // engine
  {
    name: "engine",
    field: "engine",
    kind: { literals: ["embedded", "sglang"] },
    section: S.engine,
    description: "Inference backend: `embedded` (in-process, deterministic) or `sglang` (servers at --sglang-url)."
  },
  {
    name: "sglang-url",
    field: "sglangUrls",
    kind: "strings",
    section: S.engine,
    description: "SGLang server URLs (http://host:port ...) for --engine sglang."
  },
  {
    name: "sglang-server-concurrency",
    field: "sglangServerConcurrency",
    kind: "int",
    section: S.engine,
    description: "Concurrent requests per SGLang server."
  },
  {
    name: "tokenizer",
    field: "tokenizer",
    kind: "string",
    section: S.engine,
    description: "Directory with tokenizer.json and tokenizer_config.json (chat template).",
    defaultText: "the bundled Qwen3 tokenizer"
  },
  {
    name: "embedded-policy",
    field: "embeddedPolicy",
    kind: "string",
    section: S.engine,
    description: "`path/to/module.ts#export`: a function (request) => assistant text that scripts the embedded " +
      "engine's answers.",
    defaultText: "seeded sampling over the vocabulary"
  },
  // sampling
  {
    name: "rollout-temperature",
    field: "rolloutTemperature",
    kind: "number",
    section: S.sampling,
    description: "Sampling temperature of every training request (request values are ignored)."
  },
  {
    name: "rollout-top-p",
    field: "rolloutTopP",
    kind: "number",
    section: S.sampling,
    description: "Top-p of every training request."
  },
  {
    name: "rollout-top-k",
    field: "rolloutTopK",
    kind: "int",
    section: S.sampling,
    description: "Top-k of every training request; -1 disables it."
  },
  {
    name: "rollout-max-response-len",
    field: "rolloutMaxResponseLen",
    kind: "int",
    section: S.sampling,
    description: "Most tokens generated per model request, unless the request asks for fewer.",
    defaultText: "128 (SGLang's default)"
  },
  {
    name: "rollout-max-context-len",
    field: "rolloutMaxContextLen",
    kind: "int",
    section: S.sampling,
    description: "Token limit of a Session's whole training lineage (prompt and every turn).",
    defaultText: "unlimited"
  },
  {
    name: "rollout-stop",
    field: "rolloutStop",
    kind: "strings",
    section: S.sampling,
    description: "Stop strings of every request (several values allowed)."
  },
  {
    name: "rollout-stop-token-ids",
    field: "rolloutStopTokenIds",
    kind: "ints",
    section: S.sampling,
    description: "Stop token ids of every request (several values allowed)."
  },
  {
    name: "rollout-skip-special-tokens",
    field: "rolloutSkipSpecialTokens",
    kind: "boolean",
    section: S.sampling,
    description: "Drop special tokens from decoded response text (accepted for recipe compatibility; decoded " +
      "text keeps special tokens for now)."
  },
  {
    name: "rollout-seed",
    field: "rolloutSeed",
    kind: "int",
    section: S.sampling,
    description: "Seed of dataset shuffling and of sampling (a Session's seed is this plus its Group position)."
  },
  // eval
  {
    name: "eval-prompt-data",
    field: "evalPromptData",
    kind: "pairs",
    section: S.eval,
    description: "Eval datasets as NAME PATH pairs: --eval-prompt-data gsm8k a.jsonl math b.jsonl."
  },
  {
    name: "n-samples-per-eval-prompt",
    field: "nSamplesPerEvalPrompt",
    kind: "int",
    section: S.eval,
    description: "Sessions per Eval Group."
  },
  {
    name: "eval-interval",
    field: "evalInterval",
    kind: "int",
    section: S.eval,
    description: "Run Eval (every --eval-prompt-data dataset) before training, after every N steps, and after the " +
      "last step. Without it no Eval runs.",
    defaultText: "no Eval"
  },
  {
    name: "skip-eval-before-train",
    field: "skipEvalBeforeTrain",
    kind: "boolean",
    section: S.eval,
    description: "Skip the Eval that runs before the first training step."
  },
  {
    name: "eval-temperature",
    field: "evalTemperature",
    kind: "number",
    section: S.eval,
    description: "Eval sampling temperature.",
    defaultText: "--rollout-temperature"
  },
  {
    name: "eval-top-p",
    field: "evalTopP",
    kind: "number",
    section: S.eval,
    description: "Eval top-p.",
    defaultText: "--rollout-top-p"
  },
  {
    name: "eval-top-k",
    field: "evalTopK",
    kind: "int",
    section: S.eval,
    description: "Eval top-k.",
    defaultText: "--rollout-top-k"
  },
  {
    name: "eval-max-response-len",
    field: "evalMaxResponseLen",
    kind: "int",
    section: S.eval,
    description: "Eval tokens per model request.",
    defaultText: "--rollout-max-response-len"
  },
  {
    name: "eval-max-context-len",
    field: "evalMaxContextLen",
    kind: "int",
    section: S.eval,
    description: "Eval lineage token limit.",
    defaultText: "--rollout-max-context-len"
  },
  // reward and credit
  {
    name: "reward-key",
    field: "rewardKey",
    kind: "string",
    section: S.credit,
    description: "When the agent writes reward as an object, the key of its primary value."
  },
  {
    name: "eval-reward-key",
    field: "evalRewardKey",
    kind: "string",
    section: S.credit,
    description: "The same for Eval.",
    defaultText: "--reward-key"
  },
  {
    name: "custom-rm-path",
    field: "customRmPath",
    kind: "string",
    section: S.credit,
    description: "`module#export` of a reward function (sample, config) => reward for rows without a reward."
  },
  {
    name: "group-rm",
    field: "groupRm",
    kind: "boolean",
    section: S.credit,
    description: "Call --custom-rm-path once per Group: (samples, config) => rewards."
  },
  {
    name: "agentic-custom-advantage-path",
    field: "agenticCustomAdvantagePath",
    kind: "string",
    section: S.credit,
    description: "`module#export` of a custom advantage function: export metadata by Session → one credit per " +
      "context (or null to filter the Group). Training only."
  },
  {
    name: "advantage-estimator",
    field: "advantageEstimator",
    kind: { literals: ["grpo"] },
    section: S.credit,
    description: "Advantage estimator for standard rewards."
  },
  {
    name: "disable-grpo-std-normalization",
    field: "disableGrpoStdNormalization",
    kind: "boolean",
    section: S.credit,
    description: "Do not divide Group-centred rewards by the Group's standard deviation."
  },
  {
    name: "disable-rewards-normalization",
    field: "disableRewardsNormalization",
    kind: "boolean",
    section: S.credit,
    description: "Use raw rewards as advantages (no Group mean subtraction)."
  },
  {
    name: "normalize-advantages",
    field: "normalizeAdvantages",
    kind: "boolean",
    section: S.credit,
    description: "Whiten the step's advantages over its loss-masked tokens."
  },
  {
    name: "dynamic-sampling-filter-path",
    field: "dynamicSamplingFilterPath",
    kind: "string",
    section: S.credit,
    description: "`module#export` of a Group filter (accepted for recipe compatibility; the rollout does not call " +
      "it yet)."
  },
  {
    name: "log-passrate",
    field: "logPassrate",
    kind: "boolean",
    section: S.credit,
    description: "Report pass@k, counting a primary reward of 1 as a success."
  },
  {
    name: "use-dynamic-batch-size",
    field: "useDynamicBatchSize",
    kind: "boolean",
    section: S.credit,
    description: "Pack samples into token-budgeted micro-batches (required when a Session exports several contexts)."
  },
  {
    name: "max-tokens-per-gpu",
    field: "maxTokensPerGpu",
    kind: "int",
    section: S.credit,
    description: "Token budget of one micro-batch; required with --use-dynamic-batch-size."
  },
  // scheduling
  {
    name: "agentic-concurrency",
    field: "agenticConcurrency",
    kind: "int",
    section: S.scheduling,
    description: "Resident training Groups (Prepare and Runtime share this capacity).",
    defaultText: "--over-sampling-batch-size"
  },
  {
    name: "agentic-eval-concurrency",
    field: "agenticEvalConcurrency",
    kind: "int",
    section: S.scheduling,
    description: "Resident Eval Groups per dataset.",
    defaultText: "ceil(T / n_samples_per_eval_prompt), T = agentic_concurrency * n_samples_per_prompt"
  },
  {
    name: "agentic-prelaunch",
    field: "agenticPrelaunch",
    kind: "boolean",
    section: S.scheduling,
    description: "Start agents while resident capacity is free, the next step's too; their first request is held " +
      "until the Group's Runtime lease."
  },
  {
    name: "agentic-max-consecutive-drops",
    field: "agenticMaxConsecutiveDrops",
    kind: "int",
    section: S.scheduling,
    description: "Stop the rollout with an error after this many Groups dropped in a row (training and Eval; an " +
      "accepted or filtered Group resets the count), instead of refilling a failing agent forever. 0 = unlimited, " +
      "as Relax.",
    defaultText: "max(8, 2 * --agentic-concurrency)"
  },
  {
    name: "partial-rollout",
    field: "partialRollout",
    kind: "boolean",
    section: S.scheduling,
    description: "Reuse unfinished samples: when a step's debt is paid, in-flight generations are aborted and parked " +
      "(the agent's HTTP request stays open) and resume next step from prompt + partial tokens; their Groups stay " +
      "resident across the step boundary."
  },
  {
    name: "partial-rollout-max-aborted-count",
    field: "partialRolloutMaxAbortedCount",
    kind: "int",
    section: S.scheduling,
    description: "With --partial-rollout: a request aborted this many times is protected at the next resume (it " +
      "is not aborted again, and its Session's active-time budget keeps running through pauses).",
    defaultText: "unlimited"
  },
  {
    name: "fully-async",
    field: "fullyAsync",
    kind: "boolean",
    section: S.scheduling,
    description: "Overlap rollout and training: a step may close while its remaining debt is interrupted resident " +
      "Groups, which finish into the previous partition next step; a final backfill step drains the rest. " +
      "Incompatible with --normalize-advantages."
  },
  // outputs
  {
    name: "output-dir",
    field: "outputDir",
    kind: "string",
    section: S.output,
    description: "Directory for rollout_<id>.jsonl (one sample per line) and metrics.jsonl.",
    defaultText: "runs/rollout-<timestamp>-<id> (relax-agentic rollout)"
  },
  {
    name: "save-debug-rollout-data",
    field: "saveDebugRolloutData",
    kind: "string",
    section: S.output,
    description: "Path with {rollout_id}: per-step JSONL dump of metadata, SessionForest state hashes, status, " +
      "turns, timing, aborts and weight versions."
  },
  // the command line itself
  {
    name: "config",
    field: null,
    kind: "string",
    section: S.cli,
    description: "JSON file of options (keys: flag names without dashes, or RolloutOptions field names); " +
      "flags on the command line win."
  }
]

/** `check` only: which dataset row the check Session runs. */
export const rowFlag: FlagSpec = {
  name: "row",
  field: null,
  kind: "int",
  section: S.cli,
  description: "`check` only: the dataset row (0-based) the check Session runs."
}

const isMulti = (kind: FlagKind): boolean => kind === "strings" || kind === "ints" || kind === "pairs"

/** Flags that take several values after one occurrence (argparse `nargs`). */
export const multiValueFlags: ReadonlySet<string> = new Set(
  rolloutFlags.filter((spec) => isMulti(spec.kind)).map((spec) => `--${spec.name}`)
)

const looksLikeFlag = (token: string): boolean => token === "--" || /^--?[A-Za-z]/.test(token)

/**
 * Rewrite argparse-style multi-value runs into repeated flags: `--agent-env A=1 B=2` → `--agent-env A=1 --agent-env
 * B=2`. A run ends at the next token that looks like a flag (`-x`, `--name`) or at `--`.
 */
export const expandMultiValues = (
  argv: ReadonlyArray<string>,
  names: ReadonlySet<string> = multiValueFlags
): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!
    out.push(token)
    if (token === "--") {
      out.push(...argv.slice(i + 1))
      break
    }
    if (!names.has(token)) continue
    let first = true
    while (i + 1 < argv.length && !looksLikeFlag(argv[i + 1]!)) {
      if (!first) out.push(token)
      out.push(argv[++i]!)
      first = false
    }
  }
  return out
}

const singleValueFlags: ReadonlyMap<string, FlagSpec> = new Map(
  [...rolloutFlags, rowFlag].filter((spec) => !isMulti(spec.kind)).map((spec) => [`--${spec.name}`, spec])
)

/**
 * Keep only the last occurrence of every single-value flag, as argparse does (a recipe may append an override:
 * `... --agent-cwd /a ... --agent-cwd /b` runs in `/b`); effect/cli would reject the repetition.
 */
export const lastOccurrenceWins = (argv: ReadonlyArray<string>): Array<string> => {
  const segments: Array<{ readonly key: string | undefined; readonly tokens: ReadonlyArray<string> }> = []
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!
    if (token === "--") {
      segments.push({ key: undefined, tokens: argv.slice(i) })
      break
    }
    const eq = token.indexOf("=")
    const name = token.startsWith("--") && eq > 0 ? token.slice(0, eq) : token
    const spec = singleValueFlags.get(name)
    if (spec === undefined) {
      segments.push({ key: undefined, tokens: [token] })
      continue
    }
    // `--flag=value` carries its value; a boolean takes an optional value; every other flag takes the next token.
    const takesNext = name === token && i + 1 < argv.length &&
      (spec.kind !== "boolean" || !looksLikeFlag(argv[i + 1]!))
    segments.push({ key: name, tokens: takesNext ? [token, argv[++i]!] : [token] })
  }
  const last = new Map<string, number>()
  segments.forEach((segment, index) => {
    if (segment.key !== undefined) last.set(segment.key, index)
  })
  return segments.flatMap((segment, index) =>
    segment.key === undefined || last.get(segment.key) === index ? segment.tokens : []
  )
}

/** The command line as effect/cli parses it: multi-value runs expanded, repeated single-value flags resolved. */
export const normalizeArgs = (argv: ReadonlyArray<string>): Array<string> =>
  lastOccurrenceWins(expandMultiValues(argv))

// ---------------------------------------------------------------------------------------------------------------
// Flag values

/** A flag's parsed value. */
export type FlagValue = string | number | boolean | ReadonlyArray<string> | ReadonlyArray<number>

/** What the parsed flags of one command are: `Option.none()` for every flag left out. */
export type FlagValues = Readonly<Record<string, Option.Option<FlagValue>>>

const decodedDefaults: Readonly<Record<string, unknown>> = Schema.decodeUnknownSync(Config.RolloutOptions)({})

const showDefault = (spec: FlagSpec): string | undefined => {
  if (spec.defaultText !== undefined) return spec.defaultText
  if (spec.field === null) return undefined
  const value = decodedDefaults[spec.field]
  if (value === undefined) return undefined
  if (Array.isArray(value) && value.length === 0) return "none"
  return typeof value === "string" ? value : JSON.stringify(value)
}

/** The help text of a flag, its default included. */
export const describeFlag = (spec: FlagSpec): string => {
  const shown = showDefault(spec)
  const several = isMulti(spec.kind) ? " Several values may follow the flag, or repeat it." : ""
  return `${spec.description}${several}${shown === undefined ? "" : ` Default: ${shown}.`}`
}

const kindText = (kind: FlagKind): string => {
  if (typeof kind === "object") return kind.literals.join(" \\| ")
  switch (kind) {
    case "string":
      return "text"
    case "int":
      return "integer"
    case "number":
      return "number"
    case "boolean":
      return "flag"
    case "json":
      return "JSON object"
    case "strings":
      return "text ..."
    case "ints":
      return "integer ..."
    case "pairs":
      return "NAME PATH ..."
  }
}

/**
 * The flags reference as Markdown tables, one per section (docs/flags.md embeds it verbatim; a test keeps the two
 * equal).
 */
export const flagsReference = (): string => {
  const sections = new Map<string, Array<FlagSpec>>()
  for (const spec of [...rolloutFlags, rowFlag]) sections.set(spec.section, [...(sections.get(spec.section) ?? []), spec])
  const cell = (text: string) => text.replaceAll("|", "\\|")
  return [...sections.entries()].map(([section, specs]) =>
    [
      `### ${section}`,
      "",
      "| Flag | Value | Default | Meaning |",
      "|---|---|---|---|",
      ...specs.map((spec) =>
        `| \`--${spec.name}\` | ${kindText(spec.kind)} | ${cell(showDefault(spec) ?? "—")} | ${cell(spec.description)}` +
        `${isMulti(spec.kind) ? " Several values may follow the flag, or repeat it." : ""} |`
      )
    ].join("\n")
  ).join("\n\n") + "\n"
}

const widen = <A extends FlagValue>(flag: Flag.Flag<Option.Option<A>>): Flag.Flag<Option.Option<FlagValue>> =>
  Flag.map(flag, (value): Option.Option<FlagValue> => value)

const nonEmpty = <A>(values: ReadonlyArray<A>): Option.Option<ReadonlyArray<A>> =>
  values.length === 0 ? Option.none() : Option.some(values)

const flagOfSpec = (spec: FlagSpec): Flag.Flag<Option.Option<FlagValue>> => {
  const kind = spec.kind
  const flag = ((): Flag.Flag<Option.Option<FlagValue>> => {
    if (typeof kind === "object") return widen(Flag.optional(Flag.Literals(spec.name, kind.literals)))
    switch (kind) {
      case "string":
      case "json":
        return widen(Flag.optional(Flag.String(spec.name)))
      case "int":
        return widen(Flag.optional(Flag.Int(spec.name)))
      case "number":
        return widen(Flag.optional(Flag.Finite(spec.name)))
      case "boolean":
        return widen(Flag.optional(Flag.Boolean(spec.name)))
      case "strings":
      case "pairs":
        return Flag.map(Flag.atLeast(Flag.String(spec.name), 0), (v): Option.Option<FlagValue> => nonEmpty(v))
      case "ints":
        return Flag.map(Flag.atLeast(Flag.Int(spec.name), 0), (v): Option.Option<FlagValue> => nonEmpty(v))
    }
  })()
  return Flag.withDescription(flag, describeFlag(spec))
}


/** The effect/cli flags of a command, one per row of the table, keyed by flag name. */
export const flagsOf = (specs: ReadonlyArray<FlagSpec>): Record<string, Flag.Flag<Option.Option<FlagValue>>> =>
  Object.fromEntries(specs.map((spec) => [spec.name, flagOfSpec(spec)]))
