/**
 * Export: which committed states of a SessionForest become training samples, with what metadata and reward
 * (docs/sessionforest.md "Export and the training sample"; src/forest/Sample.ts builds the samples).
 *
 * **Details**
 * Without records, the one leaf whose lineage holds a response is exported ({@link exportImplicit}); with records,
 * each record names a committed state by its full conversation ({@link exportExplicit}).
 */
import { Result } from "effect"
import * as Json from "../json/Json.ts"
import * as Canonical from "../protocol/Canonical.ts"
import * as Forest from "./Forest.ts"
import * as ForestError from "./ForestError.ts"
import * as Matching from "./Matching.ts"
import * as StateHash from "./StateHash.ts"
import type * as TrainingSample from "./TrainingSample.ts"

type JsonValue = Canonical.Json
type JsonObject = Canonical.JsonObject

const isObject = (value: JsonValue | undefined): value is JsonObject =>
  value !== null && value !== undefined && typeof value === "object" && !Array.isArray(value)

/** One context selected for training: which state, with which export metadata overlay and reward. */
export interface ExportedContext {
  /** The explicit record's name, or null for an implicit export. */
  readonly name: string | null
  readonly hash: string
  /** Metadata to merge over the Session's metadata in the sample. */
  readonly metadata: JsonObject
  readonly reward: TrainingSample.Reward
}

const hasResponse = (forest: Forest.Forest, hash: string): boolean => {
  for (let at: Forest.Node | null = Forest.node(forest, hash); at !== null; at = at.up) {
    if (at.kind === "resp") return true
  }
  return false
}

const TRACE_KEY = "agentic_trace"

const mergeTrace = (base: JsonValue | undefined, overlay: JsonValue): JsonValue => {
  if (!isObject(base) || !isObject(overlay)) return Json.copy(overlay)
  const out: Record<string, JsonValue> = { ...Json.copy(base) }
  for (const [key, value] of Object.entries(overlay)) out[key] = mergeTrace(out[key], value)
  return out
}

/**
 * Overlay export metadata (reference `_merge_export_metadata`): keys overwrite, except `agentic_trace`, which is
 * merged recursively.
 */
export const mergeMetadata = (target: JsonObject, overlay: JsonObject): JsonObject => {
  const out: Record<string, JsonValue> = { ...Json.copy(target) }
  for (const [key, value] of Object.entries(overlay)) {
    out[key] = key === TRACE_KEY ? mergeTrace(out[key], value) : Json.copy(value)
  }
  return out
}

/**
 * Implicit export (no records): the one leaf whose lineage holds a response.
 *
 * **Details**
 * Exactly one such leaf is required (`"implicit export requires one committed leaf, found N"` otherwise); the
 * output metadata becomes the context's overlay and the output reward (if any) its reward.
 */
export const exportImplicit = (
  forest: Forest.Forest,
  output: { readonly metadata?: JsonObject; readonly reward?: TrainingSample.Reward }
): Result.Result<ReadonlyArray<ExportedContext>, ForestError.ExportError> => {
  const exportable = [...forest.leafSet].filter((leaf) => hasResponse(forest, leaf))
  const [leaf] = exportable
  if (exportable.length !== 1 || leaf === undefined) {
    return Result.fail(
      new ForestError.ExportError({
        reason: "leaf-count",
        message: `implicit export requires one committed leaf, found ${exportable.length}`,
        sessionId: forest.sessionId,
        record: null
      })
    )
  }
  return Result.succeed([{
    name: null,
    hash: leaf,
    metadata: Json.copy(output.metadata ?? {}),
    reward: output.reward ?? null
  }])
}

/**
 * Explicit export: one context per record, each naming a committed state by its full conversation.
 *
 * **Details**
 * A record's state is (its canonical messages, its tools or `[]`, the base kwargs overlaid with its kwargs). It
 * must be committed (`"explicit export does not match a committed Forest state"`) and hold a response in its
 * lineage (`"export leaf has no committed response"`); it need not be a leaf. Unless `strict`, a record whose
 * assistant messages lack the `reasoning_content` the forest committed also selects that state (the same
 * tolerance as `Matching.match`). Metadata = output metadata overlaid with the record's; reward = the record's.
 */
export const exportExplicit = (
  forest: Forest.Forest,
  records: ReadonlyArray<{
    readonly name: string
    readonly messages: unknown
    readonly tools?: unknown
    readonly chat_template_kwargs?: unknown
    readonly metadata?: JsonObject
    readonly reward?: TrainingSample.Reward
  }>,
  outputMetadata?: JsonObject,
  options?: { readonly strict?: boolean }
): Result.Result<ReadonlyArray<ExportedContext>, ForestError.ExportError> => {
  const out: Array<ExportedContext> = []
  for (const [i, record] of records.entries()) {
    const recordKwargs = Canonical.normalizeTemplateKwargs(record.chat_template_kwargs)
    const state = Canonical.canonicalize({
      messages: record.messages,
      tools: record.tools,
      chat_template_kwargs: Result.isSuccess(recordKwargs)
        ? { ...forest.baseKwargs, ...recordKwargs.success }
        : record.chat_template_kwargs
    })
    if (Result.isFailure(state)) {
      return Result.fail(
        new ForestError.ExportError({
          reason: "invalid-record",
          message: `export record ${i} (${record.name}): ${state.failure.message}`,
          sessionId: forest.sessionId,
          record: record.name
        })
      )
    }
    let hash = StateHash.ofState(state.success)
    if (!forest.nodeMap.has(hash) && options?.strict !== true && state.success.messages.length > 0) {
      const tolerant = Matching.match(forest, state.success, { strict: false })
      if (tolerant.tolerated && tolerant.suffix.length === 0) hash = tolerant.parent
    }
    if (!forest.nodeMap.has(hash)) {
      return Result.fail(
        new ForestError.ExportError({
          reason: "no-matching-state",
          message: "explicit export does not match a committed Forest state",
          sessionId: forest.sessionId,
          record: record.name
        })
      )
    }
    if (!hasResponse(forest, hash)) {
      return Result.fail(
        new ForestError.ExportError({
          reason: "no-response",
          message: "export leaf has no committed response",
          sessionId: forest.sessionId,
          record: record.name
        })
      )
    }
    out.push({
      name: record.name,
      hash,
      metadata: mergeMetadata(outputMetadata ?? {}, record.metadata ?? {}),
      reward: record.reward ?? null
    })
  }
  return Result.succeed(out)
}
