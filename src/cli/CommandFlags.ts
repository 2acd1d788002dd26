/**
 * What is built from the flag table (src/config/FlagTable.ts): the command-line normalization effect/cli needs before
 * parsing, the flags reference (docs/flags.md), and the effect/cli flags.
 *
 * **Details**
 * Every flag is one row of {@link rolloutFlags}: its Relax / argparse name, the `RolloutOptions` field it fills, and its
 * help text. Defaults are not repeated there: flags the user leaves out stay out of the options object, so the defaults
 * come from decoding `RolloutOptions` (layers/rollout/Settings.ts) and the help shows what that decoding fills in.
 *
 * argparse recipes write several values after one flag (`--agent-env A=1 B=2`, `--eval-prompt-data n1 p1 n2 p2`);
 * effect/cli takes one value per occurrence, so {@link expandMultiValues} rewrites such runs into repeated flags
 * (`--agent-env A=1 --agent-env B=2`) before parsing. Both spellings are accepted. As in argparse, the last
 * occurrence of a single-value flag wins ({@link lastOccurrenceWins}).
 */
import { Option, Schema } from "effect"
import { Flag, Param } from "effect/cli"
import * as FlagTable from "../config/FlagTable.ts"
import * as RolloutOptions from "../config/RolloutOptions.ts"

// ---------------------------------------------------------------------------------------------------------------
// The flag table (src/config/FlagTable.ts)

export { type FlagKind, type FlagSpec, probeFlags, rolloutFlags, rowFlag, serveFlags } from "../config/FlagTable.ts"

const isMulti = (kind: FlagTable.FlagKind): boolean => kind === "strings" || kind === "ints" || kind === "pairs"

/** Flags that take several values after one occurrence (argparse `nargs`). */
export const multiValueFlags: ReadonlySet<string> = new Set(
  FlagTable.rolloutFlags.filter((spec) => isMulti(spec.kind)).map((spec) => `--${spec.name}`)
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

const singleValueFlags: ReadonlyMap<string, FlagTable.FlagSpec> = new Map(
  [...FlagTable.rolloutFlags, FlagTable.rowFlag, ...FlagTable.probeFlags, ...FlagTable.serveFlags].filter((spec) =>
    !isMulti(spec.kind)
  ).map((
    spec
  ) => [`--${spec.name}`, spec])
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
export const normalizeArgs = (argv: ReadonlyArray<string>): Array<string> => lastOccurrenceWins(expandMultiValues(argv))

// ---------------------------------------------------------------------------------------------------------------
// Flag values

/** A flag's parsed value. */
export type FlagValue = string | number | boolean | ReadonlyArray<string> | ReadonlyArray<number>

/** What the parsed flags of one command are: `Option.none()` for every flag left out. */
export type FlagValues = Readonly<Record<string, Option.Option<FlagValue>>>

const decodedDefaults: Readonly<Record<string, unknown>> = Schema.decodeUnknownSync(RolloutOptions.RolloutOptions)({})

const showDefault = (spec: FlagTable.FlagSpec): string | undefined => {
  if (spec.defaultText !== undefined) return spec.defaultText
  if (spec.field === null) return undefined
  const value = decodedDefaults[spec.field]
  if (value === undefined) return undefined
  if (Array.isArray(value) && value.length === 0) return "none"
  return typeof value === "string" ? value : JSON.stringify(value)
}

/** The help text of a flag, its default included. */
export const describeFlag = (spec: FlagTable.FlagSpec): string => {
  const shown = showDefault(spec)
  const several = isMulti(spec.kind) ? " Several values may follow the flag, or repeat it." : ""
  return `${spec.description}${several}${shown === undefined ? "" : ` Default: ${shown}.`}`
}

const kindText = (kind: FlagTable.FlagKind): string => {
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
  const sections = new Map<string, Array<FlagTable.FlagSpec>>()
  for (const spec of [...FlagTable.rolloutFlags, FlagTable.rowFlag, ...FlagTable.probeFlags, ...FlagTable.serveFlags]) {
    sections.set(spec.section, [...(sections.get(spec.section) ?? []), spec])
  }
  const cell = (text: string) => text.replaceAll("|", "\\|")
  return [...sections.entries()].map(([section, specs]) =>
    [
      `### ${section}`,
      "",
      "| Flag | Value | Default | Meaning |",
      "|---|---|---|---|",
      ...specs.map((spec) =>
        `| \`--${spec.name}\` | ${kindText(spec.kind)} | ${cell(showDefault(spec) ?? "—")} | ${
          cell(spec.description)
        }` +
        `${isMulti(spec.kind) ? " Several values may follow the flag, or repeat it." : ""} |`
      )
    ].join("\n")
  ).join("\n\n") + "\n"
}

const widen = <A extends FlagValue>(flag: Flag.Flag<Option.Option<A>>): Flag.Flag<Option.Option<FlagValue>> =>
  Flag.map(flag, (value): Option.Option<FlagValue> => value)

const nonEmpty = <A>(values: ReadonlyArray<A>): Option.Option<ReadonlyArray<A>> =>
  values.length === 0 ? Option.none() : Option.some(values)

const flagOfSpec = (spec: FlagTable.FlagSpec): Flag.Flag<Option.Option<FlagValue>> => {
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
export const flagsOf = (
  specs: ReadonlyArray<FlagTable.FlagSpec>
): Record<string, Flag.Flag<Option.Option<FlagValue>>> =>
  Object.fromEntries(specs.map((spec) => [spec.name, flagOfSpec(spec)]))

/** The flag (or argument) a parameter reads, under its `optional`, `withDefault`, `atLeast`, ... wrappers. */
const singleOf = (param: Param.Param<Param.ParamKind, unknown>): Param.Single<Param.ParamKind, unknown> | undefined => {
  if (Param.isSingle(param)) return param
  const inner = "param" in param ? param.param : undefined
  return Param.isParam(inner) ? singleOf(inner) : undefined
}

/**
 * The `--name` of every flag of a command's `flags` (its config without the arguments): what the docs test checks the
 * pages against, read from the flags themselves so the list cannot fall behind them.
 */
export const flagNames = (
  flags: Readonly<Record<string, Param.Param<typeof Param.flagKind, unknown>>>
): ReadonlyArray<string> =>
  Object.values(flags).flatMap((flag) => {
    const single = singleOf(flag)
    return single === undefined ? [] : [`--${single.name}`]
  })

/** An optional string flag (`--name VALUE`), unset by default. */
export const optionalString = (name: string, description: string) =>
  Flag.optional(Flag.String(name)).pipe(Flag.withDescription(description))

/** A boolean flag (`--name`), false by default. */
export const toggle = (name: string, description: string) =>
  Flag.Boolean(name).pipe(Flag.withDefault(false), Flag.withDescription(description))
