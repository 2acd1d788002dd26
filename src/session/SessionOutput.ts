/**
 * Session output: what an agent writes to `RELAX_OUTPUT_JSON`, parsed after a clean exit.
 *
 * **Details**
 * - missing, empty or blank: implicit export with no metadata and no reward;
 * - one JSON object without `messages`: implicit export `{metadata?, reward?}`;
 * - one JSON object with `messages`: one explicit record;
 * - otherwise JSONL: every non-blank line is one explicit record
 *   `{name, messages, tools?, chat_template_kwargs?, metadata?, reward?}`, names non-empty and unique.
 *
 * A JSON array or scalar is an error. Unknown keys produce warnings (the reference texts), not errors. Every error
 * names the line and the field. Messages, tools and template kwargs are checked for shape here; whether they match a
 * committed SessionForest state is decided at export.
 */
import { Result, Schema } from "effect"
import * as Thrown from "../Thrown.ts"
import * as SessionError from "./SessionError.ts"

/** A reward: `null`, a number, or an object (a primary value plus helper metrics, see `--reward-key`). */
export const Reward = Schema.Union([Schema.Null, Schema.Number, Schema.JsonObject])
export type Reward = typeof Reward.Type

/** The implicit form: optional metadata and reward for the unique committed context. */
export const ImplicitOutput = Schema.Struct({
  metadata: Schema.optionalKey(Schema.JsonObject),
  reward: Schema.optionalKey(Reward)
})
export type ImplicitOutput = typeof ImplicitOutput.Type

/** One explicit export record (one JSONL line): a training context selected by name. */
export const ExportRecord = Schema.Struct({
  name: Schema.NonEmptyString,
  messages: Schema.Array(Schema.JsonObject),
  tools: Schema.optionalKey(Schema.Array(Schema.JsonObject)),
  chat_template_kwargs: Schema.optionalKey(Schema.JsonObject),
  metadata: Schema.optionalKey(Schema.JsonObject),
  reward: Schema.optionalKey(Reward)
})
export type ExportRecord = typeof ExportRecord.Type

/** What the rollout consumes: an implicit export, or the explicit records in file order. */
export type AgentOutput =
  | ({ readonly kind: "implicit" } & ImplicitOutput)
  | { readonly kind: "explicit"; readonly records: ReadonlyArray<ExportRecord> }

export interface ParsedOutput {
  readonly output: AgentOutput
  readonly warnings: ReadonlyArray<string>
}

/** The implicit export with no metadata and no reward (no output file, or an empty one). */
export const noOutput: ParsedOutput = { output: { kind: "implicit" }, warnings: [] }

const implicitKeys: ReadonlyArray<string> = ["metadata", "reward"]
const recordKeys: ReadonlyArray<string> = ["name", "messages", "tools", "chat_template_kwargs", "metadata", "reward"]

const isJsonObject = Schema.is(Schema.JsonObject)
const isReward = Schema.is(Reward)

const fail = (line: number, field: string | undefined, reason: string) =>
  Result.fail(new SessionError.SessionOutputError({ line, field, detail: reason }))

const typeName = (value: unknown): string => value === null ? "null" : Array.isArray(value) ? "list" : typeof value

const unknownKeys = (object: Schema.JsonObject, known: ReadonlyArray<string>): ReadonlyArray<string> =>
  Object.keys(object).filter((key) => !known.includes(key)).sort()

const listKeys = (keys: ReadonlyArray<string>): string => `[${keys.map((key) => `'${key}'`).join(", ")}]`

const checkMetadataAndReward = (
  object: Schema.JsonObject,
  line: number,
  prefix: string
): Result.Result<ImplicitOutput, SessionError.SessionOutputError> => {
  const metadata = object["metadata"]
  if (metadata !== undefined && !isJsonObject(metadata)) {
    return fail(line, "metadata", `${prefix} 'metadata' must be a JSON object, got ${typeName(metadata)}`)
  }
  const reward = object["reward"]
  if (reward !== undefined && !isReward(reward)) {
    return fail(line, "reward", `${prefix} 'reward' must be null, number, or JSON object, got ${typeName(reward)}`)
  }
  return Result.succeed({
    ...(metadata === undefined ? {} : { metadata }),
    ...(reward === undefined ? {} : { reward })
  })
}

const parseImplicit = (object: Schema.JsonObject): Result.Result<ParsedOutput, SessionError.SessionOutputError> => {
  const extra = unknownKeys(object, implicitKeys)
  const warnings = extra.length === 0 ? [] : [
    `SessionOutput ignoring unknown top-level keys: ${listKeys(extra)}. ` +
    `Only 'metadata' and 'reward' are consumed by Relax.`
  ]
  return Result.map(
    checkMetadataAndReward(object, 1, "SessionOutput"),
    (fields) => ({ output: { kind: "implicit", ...fields }, warnings })
  )
}

const checkObjectList = (
  value: unknown,
  line: number,
  field: string,
  requireRole: boolean
): Result.Result<ReadonlyArray<Schema.JsonObject>, SessionError.SessionOutputError> => {
  if (!Array.isArray(value)) {
    return fail(line, field, `Session output record '${field}' must be a list, got ${typeName(value)}`)
  }
  const items: Array<Schema.JsonObject> = []
  for (const [index, item] of value.entries()) {
    if (!isJsonObject(item)) {
      return fail(line, `${field}[${index}]`, `Session output record '${field}' items must be JSON objects`)
    }
    if (requireRole && typeof item["role"] !== "string") {
      return fail(line, `${field}[${index}].role`, "Session output record messages need a string 'role'")
    }
    items.push(item)
  }
  return Result.succeed(items)
}

/** Validate one explicit record (line `line`); returns the record and its unknown-key warning, if any. */
export const parseRecord = (
  value: unknown,
  line: number
): Result.Result<{ readonly record: ExportRecord; readonly warning?: string }, SessionError.SessionOutputError> =>
  Result.gen(function*() {
    if (!isJsonObject(value)) {
      return yield* fail(line, undefined, `Session output record must be a JSON object, got ${typeName(value)}`)
    }
    const extra = unknownKeys(value, recordKeys)
    const warning = extra.length === 0 ?
      undefined :
      `Session output record ignoring unknown keys: ${listKeys(extra)}. ` +
      `Only 'name', 'messages', 'tools', 'chat_template_kwargs', 'metadata', and 'reward' are consumed by Relax.`
    if (value["messages"] === undefined) {
      return yield* fail(line, "messages", "Session output record must include 'messages'")
    }
    const name = value["name"]
    if (typeof name !== "string" || name.length === 0) {
      return yield* fail(line, "name", "Session output record must include non-empty string 'name'")
    }
    const messages = yield* checkObjectList(value["messages"], line, "messages", true)
    if (messages.length === 0) {
      return yield* fail(line, "messages", "Session output record 'messages' must not be empty")
    }
    const tools = value["tools"] === undefined || value["tools"] === null
      ? undefined
      : yield* checkObjectList(value["tools"], line, "tools", false)
    const kwargs = value["chat_template_kwargs"]
    if (kwargs !== undefined && kwargs !== null && !isJsonObject(kwargs)) {
      return yield* fail(
        line,
        "chat_template_kwargs",
        `Session output record 'chat_template_kwargs' must be a JSON object, got ${typeName(kwargs)}`
      )
    }
    const fields = yield* checkMetadataAndReward(value, line, "Session output record")
    const record: ExportRecord = {
      name,
      messages,
      ...(tools === undefined ? {} : { tools }),
      ...(kwargs === undefined || kwargs === null ? {} : { chat_template_kwargs: kwargs }),
      ...fields
    }
    return warning === undefined ? { record } : { record, warning }
  })

const parseRecords = (
  entries: ReadonlyArray<{ readonly line: number; readonly value: unknown }>
): Result.Result<ParsedOutput, SessionError.SessionOutputError> =>
  Result.gen(function*() {
    const records: Array<ExportRecord> = []
    const warnings: Array<string> = []
    const seen = new Set<string>()
    for (const { line, value } of entries) {
      const { record, warning } = yield* parseRecord(value, line)
      if (seen.has(record.name)) {
        return yield* fail(
          line,
          "name",
          `Session output record name must be unique within one explicit export: '${record.name}'`
        )
      }
      seen.add(record.name)
      records.push(record)
      if (warning !== undefined) warnings.push(`line ${line}: ${warning}`)
    }
    return { output: { kind: "explicit", records }, warnings }
  })

const tryJson = (text: string): Result.Result<unknown, string> =>
  Result.try({
    try: (): unknown => JSON.parse(text),
    catch: (error) => Thrown.messageOf(error)
  })

/**
 * Parse the text of `RELAX_OUTPUT_JSON` (pass `undefined` when the file does not exist).
 *
 * **Details**
 * The text is first read as one JSON value; only when that fails is it read as JSONL, so a pretty-printed single
 * object is accepted. Line numbers are 1-based physical lines.
 */
export const parse = (text: string | undefined): Result.Result<ParsedOutput, SessionError.SessionOutputError> => {
  if (text === undefined || text.trim().length === 0) return Result.succeed(noOutput)
  const whole = tryJson(text)
  if (Result.isSuccess(whole)) {
    const value = whole.success
    if (Array.isArray(value)) {
      return fail(1, undefined, "Session output explicit records must be written as JSONL, not a JSON array")
    }
    if (!isJsonObject(value)) {
      return fail(1, undefined, `Managed command output must be a JSON object or JSONL records, got ${typeName(value)}`)
    }
    return value["messages"] === undefined ? parseImplicit(value) : parseRecords([{ line: 1, value }])
  }
  const entries: Array<{ line: number; value: unknown }> = []
  const lines = text.split(/\r?\n/)
  for (const [index, raw] of lines.entries()) {
    if (raw.trim().length === 0) continue
    const parsed = tryJson(raw)
    if (Result.isFailure(parsed)) return fail(index + 1, undefined, `not valid JSON (${parsed.failure})`)
    entries.push({ line: index + 1, value: parsed.success })
  }
  return parseRecords(entries)
}

/**
 * Parse a value an in-process agent returned: a string is read exactly like the file, an array is a list of
 * explicit records (one per element), `undefined` means no output, any other value is read as one JSON value.
 */
export const fromValue = (value: unknown): Result.Result<ParsedOutput, SessionError.SessionOutputError> => {
  if (value === undefined) return Result.succeed(noOutput)
  if (typeof value === "string") return parse(value)
  if (Array.isArray(value)) return parseRecords(value.map((item, index) => ({ line: index + 1, value: item })))
  if (!isJsonObject(value)) {
    return fail(1, undefined, `Managed command output must be a JSON object or JSONL records, got ${typeName(value)}`)
  }
  return value["messages"] === undefined ? parseImplicit(value) : parseRecords([{ line: 1, value }])
}

/** The result of one agent run that ended cleanly, as the rollout consumes it (failures are `AgentExecutionError`). */
export interface AgentOutcome {
  readonly sessionId: string
  /** The leader's exit code (0: a clean exit; an in-process agent reports 0). */
  readonly exitCode: number
  readonly output: AgentOutput
  /** Unknown-key warnings from the output file, to be logged. */
  readonly warnings: ReadonlyArray<string>
  /** The last 8 KiB of the agent's stdout+stderr log. */
  readonly logTail: string
}
