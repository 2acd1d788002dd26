/**
 * The `relax-agentic` command: `rollout` runs a multi-step agentic rollout and writes its samples; `check` runs one
 * Session of the harness and reports the launch checks of "Prepare Your Agent" and the required external-agent
 * capacity.
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
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Cause, Console, Data, Effect, Layer, Option, Result, Schema } from "effect"
import { CliError, CliOutput, Command, Flag } from "effect/cli"
import { randomUUID } from "node:crypto"
import { readFileSync, realpathSync } from "node:fs"
import { resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import * as Config from "../layers/Config.ts"
import { Rollout } from "../layers/Rollout.ts"
import * as Relax from "./index.ts"
import { EmbeddedEngine } from "../layers/EmbeddedEngine.ts"
import { Engine } from "../layers/Engine.ts"
import { Forests } from "../layers/Forests.ts"
import { Gateway } from "../layers/Gateway.ts"
import { Generation } from "../layers/Generation.ts"
import { emptyCounters, Sessions } from "../layers/Sessions.ts"
import { SglangEngine } from "../layers/SglangEngine.ts"
import * as Supervisor from "../layers/Supervisor.ts"
import { Tokenizer } from "../layers/Tokenizer.ts"
import { ExportError } from "./forest/errors.ts"
import * as Forest from "./forest/Forest.ts"
import * as Parsers from "./parsers/registry.ts"
import * as Capacity from "./schedule/Capacity.ts"
import * as Dataset from "./schedule/Dataset.ts"
import * as SessionInput from "./session/SessionInput.ts"
import type * as SessionOutput from "./session/SessionOutput.ts"
import * as Reward from "./credit/Reward.ts"

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
const rowFlag: FlagSpec = {
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
// Flags → options

/** A flag's parsed value. */
export type FlagValue = string | number | boolean | ReadonlyArray<string> | ReadonlyArray<number>

/** What the parsed flags of one command are: `Option.none()` for every flag left out. */
export type FlagValues = Readonly<Record<string, Option.Option<FlagValue>>>

/** A command line that cannot become options; the message names the flag and the fix. */
export class CliInputError extends Data.TaggedError("CliInputError")<{
  readonly flag: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.flag}: ${this.reason}`
  }
}

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

const flagsOf = (specs: ReadonlyArray<FlagSpec>): Record<string, Flag.Flag<Option.Option<FlagValue>>> =>
  Object.fromEntries(specs.map((spec) => [spec.name, flagOfSpec(spec)]))

const parseJsonObject = (flag: string, text: string): Result.Result<Schema.JsonObject, CliInputError> => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return Result.fail(
      new CliInputError({
        flag,
        reason: `${JSON.stringify(text)} is not valid JSON (${error instanceof Error ? error.message : String(error)}); ` +
          `quote it for the shell, e.g. ${flag} '{"image":"images"}'`
      })
    )
  }
  return Schema.is(Schema.JsonObject)(value)
    ? Result.succeed(value)
    : Result.fail(new CliInputError({ flag, reason: `expects a JSON object, got ${text}` }))
}

const toPairs = (flag: string, values: ReadonlyArray<string>) => {
  if (values.length % 2 !== 0) {
    return Result.fail(
      new CliInputError({
        flag,
        reason: `expects NAME PATH pairs, got ${values.length} value(s) (${values.join(" ")}); ` +
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
  values: FlagValues,
  specs: ReadonlyArray<FlagSpec> = rolloutFlags
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
  rolloutFlags.flatMap((spec) => spec.field === null ? [] : [[spec.name, spec.field], [spec.field, spec.field]])
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
      new CliInputError({ flag, reason: `cannot read ${path}: ${error instanceof Error ? error.message : String(error)}` })
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
            reason: `${path}: unknown option ${JSON.stringify(key)}; use a flag name (e.g. "n-samples-per-prompt") ` +
              `listed by relax-agentic rollout --help`
          })
        )
      }
      options[field] = value
    }
    return Result.succeed(options)
  })
}

/** A configuration error as one line that starts with the flag: `--rollout-batch-size: Expected ..., got 0`. */
export const configMessage = (error: Config.RolloutConfigError): string => {
  const text = error.message
  // Schema issues read "configuration: <what>\n  at --flag"; lead with the flag the user has to change.
  const located = /^configuration: ([\s\S]*?)\n\s*at (--[a-z-]+)(?:\[\d+\])?\s*$/.exec(text)
  return located === null ? text : `${located[2]}: ${located[1]!.trim()}`
}

/** Everything that turns a command line into resolved settings can fail with this. */
export type SettingsError = CliInputError | Config.RolloutConfigError

/**
 * Resolve a command's parsed flags: `--config` file first, command-line flags over it, then `Config.resolve`.
 */
export const settingsFromFlags = (
  values: FlagValues,
  extra: Readonly<Record<string, unknown>> = {}
): Effect.Effect<Config.RolloutSettings, SettingsError> =>
  Effect.gen(function*() {
    const fromFlags = yield* Effect.fromResult(optionsFromFlags(values))
    const configPath = values["config"]
    const fromFile = configPath !== undefined && Option.isSome(configPath) && typeof configPath.value === "string"
      ? yield* Effect.fromResult(readConfigFile(configPath.value))
      : {}
    return yield* Config.resolve({ ...extra, ...fromFile, ...fromFlags })
  })

/** A failure as effect/cli shows it: `ERROR` + the message on stderr, exit code 1. */
const userError = (message: string) => new CliError.UserError({ cause: message, userMessage: message })

const settingsError = (error: SettingsError) =>
  userError(error._tag === "RolloutConfigError" ? configMessage(error) : error.message)

// ---------------------------------------------------------------------------------------------------------------
// check

/** One launch check of "Prepare Your Agent". */
export interface Requirement {
  readonly name: string
  readonly passed: boolean
  readonly detail: string
}

/** What `relax-agentic check` found. */
export interface CheckReport {
  readonly sessionId: string
  readonly row: number
  readonly requirements: ReadonlyArray<Requirement>
  /** Response turns committed to the Session's SessionForest. */
  readonly turns: number
  readonly requests: number
  /** The agent's log tail (stdout + stderr), for a failed run. */
  readonly logTail: string
  readonly capacity: Capacity.CapacityReport
}

/** A check that could not start its Session (bad flags, dataset, hooks, port). */
export class CheckStartupError extends Data.TaggedError("CheckStartupError")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

const startup = <A, E extends { readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new CheckStartupError({ reason: error.message }))

/** The capacity table of the guide for these settings. */
export const capacityOf = (settings: Config.RolloutSettings): Capacity.CapacityReport =>
  // Eval runs only with --eval-interval (layers/Rollout.ts), so datasets alone add no Eval Sessions.
  Config.capacity(settings.evalInterval === undefined ? { ...settings, evalDatasets: [] } : settings)

const parsersOf = (settings: Config.RolloutSettings) =>
  Effect.gen(function*() {
    const toolCallParser = settings.agenticToolCallParser === undefined
      ? undefined
      : yield* Effect.fromResult(Parsers.ToolCallParsers.get(settings.agenticToolCallParser))
    const reasoningParser = settings.agenticReasoningParser === undefined
      ? undefined
      : yield* Effect.fromResult(Parsers.ReasoningParsers.get(settings.agenticReasoningParser))
    return { toolCallParser, reasoningParser, strictMatch: settings.strictMatch }
  })

/** The tokenizer, engine and gateway stack one check Session talks to. */
const checkStack = (settings: Config.RolloutSettings) =>
  Effect.gen(function*() {
    const parsers = yield* startup(parsersOf(settings))
    const tokenizer = settings.tokenizer === undefined ? Tokenizer.layer : Tokenizer.fromDirectory(settings.tokenizer)
    const engine = settings.engine === "sglang"
      ? SglangEngine.layer({ workerUrls: settings.sglangUrls, serverConcurrency: settings.sglangServerConcurrency })
      : settings.embeddedPolicy === undefined
      ? EmbeddedEngine.layer({ seed: settings.rolloutSeed })
      : EmbeddedEngine.layer({ seed: settings.rolloutSeed, policy: yield* startup(EmbeddedEngine.loadPolicy(settings.embeddedPolicy)) })
    const core = Layer.mergeAll(Forests.layer, Sessions.layer, engine).pipe(Layer.provideMerge(tokenizer))
    const generation = Generation.layer(parsers).pipe(Layer.provideMerge(core))
    return Gateway.layer({ host: settings.host, port: settings.port }).pipe(Layer.provideMerge(generation))
  })

const readRow = (settings: Config.RolloutSettings, row: number) =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => readFileSync(settings.promptData, "utf8"),
      catch: (error) =>
        new CheckStartupError({
          reason: `--prompt-data: cannot read ${settings.promptData}: ${error instanceof Error ? error.message : String(error)}`
        })
    })
    const rows = yield* startup(Effect.fromResult(Dataset.parse(text, settings.promptData)))
    const data = rows[row]
    if (data === undefined) {
      return yield* new CheckStartupError({
        reason: `--row: ${row} is out of range; ${settings.promptData} has ${rows.length} row(s)`
      })
    }
    return yield* startup(Effect.fromResult(SessionInput.fromRow(data, row, {
      inputKey: settings.inputKey,
      metadataKey: settings.metadataKey,
      ...(settings.labelKey === undefined ? {} : { labelKey: settings.labelKey }),
      ...(settings.multimodalKeys === undefined ? {} : { multimodalKeys: settings.multimodalKeys })
    })))
  })

const textOf = (value: unknown): string => typeof value === "string" ? value : JSON.stringify(value ?? "")

const observedText = (forest: Forest.Forest): string =>
  [...forest.nodes.values()]
    .flatMap((node) => node.kind === "obs" ? node.messages.map((message) => textOf(message.content)) : [])
    .join("\n")

const responseTurns = (forest: Forest.Forest): number =>
  [...forest.nodes.values()].filter((node) => node.kind === "resp").length

const describeReward = (
  output: SessionOutput.AgentOutput,
  settings: Config.RolloutSettings
): { readonly passed: boolean; readonly detail: string } => {
  const rewards = output.kind === "implicit"
    ? (output.reward === undefined ? [] : [output.reward])
    : output.records.flatMap((record) => record.reward === undefined ? [] : [record.reward])
  const hasMetadata = output.kind === "implicit" ? output.metadata !== undefined : output.records.length > 0
  const present = rewards.filter((reward): reward is Reward.PresentReward => reward !== null)
  if (present.length === 0) {
    if (settings.customRmPath !== undefined || settings.agenticCustomAdvantagePath !== undefined) {
      return {
        passed: hasMetadata,
        detail: hasMetadata
          ? "no reward written; credit comes from --custom-rm-path / --agentic-custom-advantage-path"
          : "RELAX_OUTPUT_JSON is missing or empty: write metadata (and reward) before exiting"
      }
    }
    return {
      passed: false,
      detail: "no reward in RELAX_OUTPUT_JSON: write {\"reward\": ...} (or configure --custom-rm-path)"
    }
  }
  const primary = Reward.primaryValue(present[0]!, settings.rewardKey)
  return Result.isSuccess(primary)
    ? {
      passed: true,
      detail: `reward ${JSON.stringify(present[0])}` +
        (typeof present[0] === "number" ? "" : ` → ${primary.success} (--reward-key ${settings.rewardKey})`) +
        (output.kind === "explicit" ? `; ${output.records.length} explicit record(s)` : "")
    }
    : { passed: false, detail: primary.failure }
}

/**
 * Run one Session of the harness against a gateway over the configured engine (embedded by default) and check the
 * five requirements of "Prepare Your Agent": it accepts the input, calls a model endpoint, completes a run (turn
 * count reported), writes a final result, and exits without error.
 */
export const runCheck = (
  settings: Config.RolloutSettings,
  options: { readonly row?: number | undefined } = {}
): Effect.Effect<CheckReport, CheckStartupError> =>
  Effect.gen(function*() {
    const row = options.row ?? 0
    const spec = yield* startup(Supervisor.resolveAgentSpec({
      command: settings.agentCommand,
      cwd: settings.agentCwd,
      env: settings.agentEnv,
      timeoutSeconds: settings.agentTimeout
    }))
    const prepared = yield* readRow(settings, row)
    const stack = yield* checkStack(settings)
    return yield* Effect.gen(function*() {
      const gateway = yield* Gateway
      const sessions = yield* Sessions
      const forests = yield* Forests
      const sessionId = yield* sessions.newSessionId
      const groupId = "check:prepare_group_0"
      const counters = emptyCounters()
      yield* forests.create(sessionId, {
        groupIndex: 0,
        index: 0,
        metadata: prepared.metadata,
        chatTemplateKwargs: settings.applyChatTemplateKwargs,
        ...(prepared.label === undefined ? {} : { label: prepared.label })
      })
      yield* sessions.register({
        sessionId,
        groupId,
        mode: "train",
        sampling: Config.trainSampling(settings, 0),
        maxContextLen: settings.rolloutMaxContextLen,
        rolloutId: () => 0,
        awaitLease: Effect.void,
        counters
      })
      const supervisor = Supervisor.Supervisor.localProcess({ spec, baseUrl: gateway.agentBaseUrl })
      const outcome = yield* Effect.result(supervisor.run({ sessionId, groupId, rolloutMode: "train", input: prepared }))
      yield* sessions.close(sessionId)
      const forest = yield* Effect.orDie(forests.get(sessionId))
      const turns = responseTurns(forest)

      const inputTexts = (prepared.messages ?? []).map((message) => textOf(message["content"]))
      const seen = observedText(forest)
      const missing = inputTexts.filter((text) => !seen.includes(text))
      const accepted: Requirement = {
        name: "accepts the input",
        passed: counters.requests > 0 && missing.length === 0,
        detail: counters.requests === 0
          ? "no model request arrived: does the harness read RELAX_INPUT_JSON and use RELAX_BASE_URL?"
          : prepared.messages === undefined
          ? "metadata-only task: the harness built its own messages"
          : missing.length === 0
          ? `the requests carried all ${inputTexts.length} input message(s) from RELAX_INPUT_JSON`
          : `${missing.length} input message(s) never reached the model, e.g. ${JSON.stringify(missing[0]!.slice(0, 80))}`
      }
      const called: Requirement = {
        name: "calls a supported model endpoint",
        passed: counters.requests > 0 && turns > 0,
        detail: counters.requests === 0
          ? "no request reached RELAX_BASE_URL (Chat Completions, Responses or Messages with Bearer RELAX_SESSION_ID)"
          : `${counters.requests} request(s), ${turns} response(s) committed`
      }
      const exported = Result.isSuccess(outcome)
        ? (outcome.success.output.kind === "implicit"
          ? Forest.exportImplicit(forest, outcome.success.output)
          : Forest.exportExplicit(forest, outcome.success.output.records, undefined, { strict: settings.strictMatch }))
        : undefined
      const completed: Requirement = {
        name: "completes a full run",
        passed: Result.isSuccess(outcome) && turns > 0 && exported !== undefined && !(exported instanceof ExportError),
        detail: `${turns} turn(s)${turns > 1 ? " (multi-turn)" : ""}` +
          (exported === undefined
            ? "; the agent did not finish"
            : exported instanceof ExportError
            ? `; export failed: ${exported.message}`
            : `; export selects ${exported.length} training context(s)`)
      }
      const wrote: Requirement = Result.isSuccess(outcome)
        ? { name: "writes a final result", ...describeReward(outcome.success.output, settings) }
        : { name: "writes a final result", passed: false, detail: "the agent did not exit cleanly" }
      const exited: Requirement = Result.isSuccess(outcome)
        ? { name: "exits without error", passed: true, detail: "exit code 0" }
        : { name: "exits without error", passed: false, detail: outcome.failure.message.split("\n")[0] ?? "" }
      const logTail = Result.isSuccess(outcome) ? outcome.success.logTail : outcome.failure._tag === "AgentExecutionError"
        ? outcome.failure.logTail
        : ""
      return {
        sessionId,
        row,
        requirements: [accepted, called, completed, wrote, exited],
        turns,
        requests: counters.requests,
        logTail,
        capacity: capacityOf(settings)
      } satisfies CheckReport
    }).pipe(Effect.provide(stack), Effect.scoped, Effect.catchTag("ServeError", (error) =>
      Effect.fail(new CheckStartupError({ reason: `--host/--port: the gateway cannot listen: ${error.message}` }))))
  }).pipe(
    Effect.catchTags({
      TokenizerLoadError: (error) => Effect.fail(new CheckStartupError({ reason: `--tokenizer: ${error.message}` })),
      EngineError: (error) => Effect.fail(new CheckStartupError({ reason: `--engine: ${error.message}` }))
    })
  )

/** The report as `relax-agentic check` prints it. */
export const renderCheck = (report: CheckReport, settings: Config.RolloutSettings): string => {
  const lines = [
    `Launch checks: one Session (row ${report.row} of ${settings.promptData}) of ${JSON.stringify(settings.agentCommand)} ` +
    `in ${settings.agentCwd ?? "."} on the ${settings.engine} engine`
  ]
  for (const requirement of report.requirements) {
    lines.push(`  [${requirement.passed ? "PASS" : "FAIL"}] ${requirement.name}: ${requirement.detail}`)
  }
  const failed = report.requirements.filter((requirement) => !requirement.passed).length
  if (failed > 0 && report.logTail.trim().length > 0) {
    lines.push("  agent log (tail):", ...report.logTail.trimEnd().split("\n").slice(-20).map((line) => `    ${line}`))
  }
  lines.push(
    failed === 0 ? "All launch checks passed." : `${failed} launch check(s) failed.`,
    "",
    Capacity.render(report.capacity)
  )
  return lines.join("\n")
}

// ---------------------------------------------------------------------------------------------------------------
// The commands

const version = ((): string => {
  const text = readFileSync(new URL("../package.json", import.meta.url), "utf8")
  const decoded = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Struct({ version: Schema.String })))(text)
  return Option.match(decoded, { onNone: () => "0.0.0", onSome: (pkg) => pkg.version })
})()

const stamp = (): string => new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15)

/** `relax-agentic check [flags]`. */
export const checkCommand = Command.make(
  "check",
  flagsOf([...rolloutFlags, rowFlag]),
  (values) =>
    Effect.gen(function*() {
      const settings = yield* Effect.mapError(settingsFromFlags(values), settingsError)
      const row = values["row"]
      const report = yield* runCheck(settings, {
        row: row !== undefined && Option.isSome(row) && typeof row.value === "number" ? row.value : undefined
      }).pipe(Effect.mapError((error) => userError(error.message)))
      yield* Console.log(renderCheck(report, settings))
      if (report.requirements.some((requirement) => !requirement.passed) || report.capacity.warning !== undefined) {
        return yield* userError("check failed: fix the items marked FAIL / WARNING above")
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
  if (error instanceof Config.RolloutConfigError) return configMessage(error)
  if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "ServeError") {
    return `--host/--port: the gateway cannot listen${error instanceof Error ? `: ${error.message}` : ""}`
  }
  return error instanceof Error ? error.message : String(error)
}

/**
 * Run the whole rollout the settings describe (`--num-rollout` steps, Eval, the files under `--output-dir`) and
 * return what it wrote. Every agent is reaped before this completes, also when it is interrupted (Ctrl-C).
 */
export const runRollout = (settings: Config.RolloutSettings) =>
  Effect.gen(function*() {
    const rollout = yield* Rollout
    return yield* rollout.run
  }).pipe(Effect.provide(Relax.layerFromSettings(settings)))

/** `relax-agentic rollout [flags]`. */
export const rolloutCommand = Command.make(
  "rollout",
  flagsOf(rolloutFlags),
  (values) =>
    Effect.gen(function*() {
      const settings = yield* Effect.mapError(
        settingsFromFlags(values, { outputDir: `runs/rollout-${stamp()}-${randomUUID().slice(0, 8)}` }),
        settingsError
      )
      const summary = yield* runRollout(settings).pipe(Effect.mapError((error) => userError(failureText(error))))
      const dir = resolvePath(settings.outputDir ?? ".")
      yield* Console.log(
        `Rollout finished: ${summary.steps} step(s), ${summary.evals} Eval run(s). Samples and metrics: ${dir}`
      )
    })
).pipe(Command.withDescription("Run an agentic rollout: Groups of agent Sessions per step, samples to --output-dir."))

/** The root command. */
export const command = Command.make("relax-agentic").pipe(
  Command.withDescription("Agentic rollout for RL training: supervise agent harnesses, serve them model APIs, " +
    "record SessionForests, write training samples."),
  Command.withSubcommands([rolloutCommand, checkCommand])
)

/**
 * Parse a `rollout` / `check` command line into flag values without running anything (multi-value runs expanded
 * first). Fails with effect/cli's parse errors (unknown flag, a value of the wrong type).
 */
export const parseArgs = (
  argv: ReadonlyArray<string>
): Effect.Effect<FlagValues, CliError.CliError, Command.Environment> =>
  Effect.gen(function*() {
    let captured: FlagValues = {}
    const probe = Command.make("rollout", flagsOf([...rolloutFlags, rowFlag]), (values) =>
      Effect.sync(() => {
        captured = values
      }))
    yield* Command.runWith(probe, { version, renderErrors: false })(normalizeArgs(argv))
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
            : `  Run "${path} --help" to list the commands (rollout, check).`
        )
      })
      : CliOutput.defaultPresenter.present(event)
}

/** Run the command line `argv` (without `node` and the script). */
export const run = (argv: ReadonlyArray<string>) =>
  Command.runWith(command, { version })(normalizeArgs(argv)).pipe(
    Effect.provide(CliOutput.layerPresenter(presenter))
  )

const entryFiles = (): ReadonlyArray<string> =>
  [fileURLToPath(import.meta.url), fileURLToPath(new URL("../bin/relax-agentic.mjs", import.meta.url))].map((path) => {
    try {
      return realpathSync(path)
    } catch {
      return path
    }
  })

// Run only as the program (node src/cli.ts, or bin/relax-agentic.mjs importing this file), never when imported.
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
    NodeRuntime.runMain({ disableErrorReporting: true })
  )
}
