/**
 * Dataset rows and how a rollout samples them: JSONL or JSON-array files, seeded shuffling per epoch, epochs that
 * wrap, and Groups of `n_samples_per_prompt` Sessions that share one Group id.
 *
 * **Details**
 * Pure: the caller reads the file; this module parses the text and plans which row each Group takes. Group ids follow
 * the reference: `train:prepare_group_<seq>` for training and `eval:<name>:<rollout>:prepare_group_<seq>` for Eval.
 */
import { Data, Result, Schema } from "effect"
import * as Json from "../json/Json.ts"
import * as Thrown from "../Thrown.ts"

/** One dataset row: a JSON object (the prompt under `--input-key`, metadata under `--metadata-key`, ...). */
export const Row = Schema.Record(Schema.String, Schema.Json)
export type Row = typeof Row.Type

/** Why a dataset cannot become rows. */
export type DatasetErrorReason = "unreadable" | "invalid-json" | "not-an-array" | "not-an-object" | "empty"

/** A dataset file that cannot be read as rows (names the file, the line and what to fix). */
export class DatasetError extends Data.TaggedError("DatasetError")<{
  readonly path: string
  /** 1-based line (JSONL) or 1-based element position (JSON array). */
  readonly line?: number | undefined
  readonly reason: DatasetErrorReason
  /** What was wrong, in words. */
  readonly detail: string
  /** The error of reading or parsing, when there is one. */
  readonly cause?: unknown
}> {
  override get message(): string {
    if (this.reason === "unreadable") return `cannot load dataset ${this.path}: ${this.detail}`
    const where = this.line === undefined ? this.path : `${this.path}:${this.line}`
    return `dataset ${where}: ${this.detail}`
  }
}

const decodeRow = Schema.decodeUnknownResult(Row)

/** The JSON value of `text` (the whole file, or line `line` of JSONL), or why it is not JSON. */
const parseJson = (text: string, path: string, line: number | undefined): Result.Result<unknown, DatasetError> =>
  Result.try({
    try: (): unknown => JSON.parse(text),
    catch: (error) =>
      new DatasetError({
        path,
        line,
        reason: "invalid-json",
        detail: `not valid JSON: ${Thrown.messageOf(error)}`,
        cause: error
      })
  })

/**
 * Parse a dataset: a JSON array of objects (when the text starts with `[`), otherwise JSONL with one object per
 * non-blank line.
 */
export const parse = (text: string, path: string): Result.Result<ReadonlyArray<Row>, DatasetError> => {
  const trimmed = text.trimStart()
  if (trimmed.startsWith("[")) {
    const json = parseJson(trimmed, path, undefined)
    if (Result.isFailure(json)) return Result.fail(json.failure)
    const parsed = json.success
    if (!Array.isArray(parsed)) {
      return Result.fail(new DatasetError({ path, reason: "not-an-array", detail: "expected a JSON array of objects" }))
    }
    const rows: Array<Row> = []
    for (const [i, element] of parsed.entries()) {
      const row = toRow(element)
      if (row === undefined) {
        return Result.fail(
          new DatasetError({ path, line: i + 1, reason: "not-an-object", detail: "array element is not a JSON object" })
        )
      }
      rows.push(row)
    }
    return nonEmpty(rows, path)
  }
  const rows: Array<Row> = []
  const lines = text.split("\n")
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim()
    if (line.length === 0) continue
    const parsed = parseJson(line, path, i + 1)
    if (Result.isFailure(parsed)) return Result.fail(parsed.failure)
    const row = toRow(parsed.success)
    if (row === undefined) {
      return Result.fail(
        new DatasetError({
          path,
          line: i + 1,
          reason: "not-an-object",
          detail: "each JSONL line must be a JSON object"
        })
      )
    }
    rows.push(row)
  }
  return nonEmpty(rows, path)
}

const toRow = (value: unknown): Row | undefined => {
  if (!Json.isObject(value)) return undefined
  const decoded = decodeRow(value)
  return Result.isSuccess(decoded) ? decoded.success : undefined
}

const nonEmpty = (rows: ReadonlyArray<Row>, path: string): Result.Result<ReadonlyArray<Row>, DatasetError> =>
  rows.length === 0
    ? Result.fail(
      new DatasetError({ path, reason: "empty", detail: "the dataset has no rows; give at least one JSON object" })
    )
    : Result.succeed(rows)

/**
 * A deterministic generator of numbers in [0, 1) (mulberry32): the same seed gives the same sequence on every machine
 * (the dataset's shuffle; tests' seeded scenarios).
 */
export const seededRandom = (seed: number): () => number => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The row order of one epoch: identity, or a Fisher-Yates permutation seeded with `seed + epoch`. */
export const epochOrder = (size: number, shuffle: boolean, seed: number, epoch: number): ReadonlyArray<number> => {
  const order = Array.from({ length: size }, (_, i) => i)
  if (!shuffle) return order
  const next = seededRandom(seed + epoch)
  for (let i = size - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1))
    const a = order[i]!
    order[i] = order[j]!
    order[j] = a
  }
  return order
}

/** Where sampling stands: which epoch and how far into its order. */
export interface Cursor {
  readonly size: number
  readonly shuffle: boolean
  readonly seed: number
  readonly epoch: number
  readonly position: number
  readonly order: ReadonlyArray<number>
}

export const cursor = (size: number, options: { readonly shuffle: boolean; readonly seed: number }): Cursor => ({
  size,
  shuffle: options.shuffle,
  seed: options.seed,
  epoch: 0,
  position: 0,
  order: epochOrder(size, options.shuffle, options.seed, 0)
})

/** A drawn row: its index in the dataset and the epoch it was drawn in. */
export interface Draw {
  readonly row: number
  readonly epoch: number
}

/** Take the next `count` rows; at the end of an epoch the next one starts (reshuffled with `seed + epoch`). */
export const take = (from: Cursor, count: number): readonly [ReadonlyArray<Draw>, Cursor] => {
  const draws: Array<Draw> = []
  let { epoch, order, position } = from
  while (draws.length < count) {
    if (position >= from.size) {
      epoch += 1
      order = epochOrder(from.size, from.shuffle, from.seed, epoch)
      position = 0
    }
    draws.push({ row: order[position]!, epoch })
    position += 1
  }
  return [draws, { ...from, epoch, order, position }]
}

/** The scope part of a Group id: `train`, or `eval:<name>:<rollout>`. */
export type Scope = { readonly _tag: "train" } | {
  readonly _tag: "eval"
  readonly name: string
  readonly rolloutId: number
}

export const trainScope: Scope = { _tag: "train" }
export const evalScope = (name: string, rolloutId: number): Scope => ({ _tag: "eval", name, rolloutId })

/** `train:prepare_group_<seq>` or `eval:<name>:<rollout>:prepare_group_<seq>`. */
export const groupId = (scope: Scope, seq: number): string =>
  scope._tag === "train" ? `train:prepare_group_${seq}` : `eval:${scope.name}:${scope.rolloutId}:prepare_group_${seq}`

/** One prompt Group: the dataset row every one of its `size` Sessions starts from. */
export interface GroupInput {
  readonly groupId: string
  /** Sequence number of the Group in its scope (0-based, never reused). */
  readonly seq: number
  /** Index of the dataset row. */
  readonly row: number
  readonly data: Row
  /** Sessions in the Group (`--n-samples-per-prompt`, or 1 for Eval singleton Groups). */
  readonly size: number
}

/** Build the Group for a drawn row. */
export const group = (
  scope: Scope,
  seq: number,
  rows: ReadonlyArray<Row>,
  row: number,
  size: number
): GroupInput => ({ groupId: groupId(scope, seq), seq, row, data: rows[row] ?? {}, size })
