/**
 * The lines `inspect` reads: debug-dump records (`--save-debug-rollout-data`) and training samples
 * (`rollout_<id>.jsonl`, `eval_<after>_<name>.jsonl`), as Schemas, and how one file's text becomes records.
 *
 * **Details**
 * A line with `state_hashes` is a debug record, any other a training sample. Debug records written before `inspect`
 * existed lack the training view (`loss_mask`, `rollout_log_probs`, `turn_spans`), the parser counts and the `forest`:
 * those keys are optional, and the model falls back on what the record has (docs/inspect.md "What it reads").
 * Unknown keys are ignored, so newer writers stay readable. {@link withoutArrays} gives the cheap view of a line that
 * the list of a large run is built from (token arrays are decoded only when a Session is opened).
 */
import { Data, Schema } from "effect"
import * as DebugView from "../forest/DebugView.ts"
import * as TrainingSample from "../forest/TrainingSample.ts"
import * as DumpArrays from "./DumpArrays.ts"
import * as ForestDump from "./ForestDump.ts"

/** One line of a debug dump (docs/outputs.md "The debug dump"). */
export const DebugRecord = Schema.Struct({
  rollout_id: Schema.Union([Schema.Int, Schema.String]),
  session_id: Schema.String,
  group_index: Schema.Int,
  index: Schema.Int,
  export_name: Schema.NullOr(Schema.String),
  terminal_status: TrainingSample.Status,
  turn_count: Schema.Int,
  leaf_state_hash: Schema.NullOr(Schema.String),
  state_hashes: Schema.Array(DebugView.LineageState),
  turns: Schema.Array(DebugView.Turn),
  abort_count: Schema.Int,
  request_count: Schema.Int,
  generation_count: Schema.Int,
  weight_versions: Schema.Array(Schema.String),
  reward: TrainingSample.Reward,
  advantage: TrainingSample.Advantage,
  response_length: Schema.Int,
  tokens: DumpArrays.Ints,
  prompt: Schema.String,
  response: Schema.String,
  label: Schema.NullOr(Schema.Json),
  metadata: DumpArrays.JsonObject,
  status: Schema.optionalKey(TrainingSample.Status),
  loss_mask: Schema.optionalKey(DumpArrays.Ints),
  rollout_log_probs: Schema.optionalKey(DumpArrays.Numbers),
  turn_spans: Schema.optionalKey(Schema.Array(Schema.Tuple([Schema.Int, Schema.Int]))),
  parser_failures: Schema.optionalKey(Schema.Int),
  parser_failures_by_request: Schema.optionalKey(Schema.Record(Schema.String, Schema.Int)),
  admission_wait_s: Schema.optionalKey(Schema.Finite),
  forest: Schema.optionalKey(ForestDump.ForestDump)
})
export type DebugRecord = typeof DebugRecord.Type

/** A training sample as `inspect` decodes it: the sample's Schema, its long arrays checked in one pass each. */
export const SampleLine = Schema.Struct({
  ...TrainingSample.TrainingSample.fields,
  tokens: DumpArrays.Ints,
  loss_mask: DumpArrays.Ints,
  rollout_log_probs: DumpArrays.Numbers,
  metadata: DumpArrays.JsonObject
})

/** A line `inspect` read: a debug record or a training sample, with the step it belongs to. */
export type Line =
  | { readonly _tag: "Debug"; readonly step: string; readonly record: DebugRecord }
  | { readonly _tag: "Sample"; readonly step: string; readonly sample: TrainingSample.TrainingSample }

/** A line that is not a debug record or a training sample. */
export class DumpLineError extends Data.TaggedError("DumpLineError")<{
  readonly reason: "not-json" | "not-a-record"
  readonly file: string
  readonly line: number
  readonly detail: string
}> {
  override get message() {
    return `${this.file}:${this.line}: not a debug-dump record or a training sample (${this.detail}); ` +
      "inspect reads the files of --output-dir and --save-debug-rollout-data (docs/inspect.md)"
  }
}

const decodeDebug = Schema.decodeUnknownExit(DebugRecord)
const decodeSample = Schema.decodeUnknownExit(SampleLine)

/** An Eval file's step: `eval_<after>_<name>` (as the Eval debug dump names it); otherwise the record's own step. */
const evalStep = (file: string): string | undefined => {
  const base = file.split(/[\\/]/).at(-1) ?? file
  const m = /^(eval_\d+_.+)\.jsonl$/.exec(base)
  return m?.[1]
}

/**
 * Read one JSONL file's text into lines. Fails with {@link DumpLineError} naming the first line that is neither a
 * debug record nor a training sample.
 */
export const readFile = (file: string, text: string): ReadonlyArray<Line> | DumpLineError =>
  readLines(file, text.split("\n"))

/** {@link readFile} of a file's text already split into its lines (blank ones included, so line numbers hold). */
export const readLines = (file: string, lines: ReadonlyArray<string>): ReadonlyArray<Line> | DumpLineError => {
  const out: Array<Line> = []
  const stepOfFile = evalStep(file)
  let lineNo = 0
  for (const raw of lines) {
    lineNo++
    if (raw.trim() === "") continue
    let value: unknown
    try {
      value = JSON.parse(raw)
    } catch (error) {
      return new DumpLineError({ reason: "not-json", file, line: lineNo, detail: String(error) })
    }
    const isDebug = typeof value === "object" && value !== null && "state_hashes" in value
    if (isDebug) {
      const decoded = decodeDebug(value)
      if (decoded._tag === "Failure") {
        return new DumpLineError({ reason: "not-a-record", file, line: lineNo, detail: String(decoded.cause) })
      }
      out.push({ _tag: "Debug", step: String(decoded.value.rollout_id), record: decoded.value })
    } else {
      const decoded = decodeSample(value)
      if (decoded._tag === "Failure") {
        return new DumpLineError({ reason: "not-a-record", file, line: lineNo, detail: String(decoded.cause) })
      }
      out.push({ _tag: "Sample", step: stepOfFile ?? String(decoded.value.rollout_id), sample: decoded.value })
    }
  }
  return out
}

/** Whether a file name is one `inspect` reads from an output directory (every `.jsonl` except the metric files). */
export const isReadable = (name: string): boolean =>
  name.endsWith(".jsonl") && name !== "metrics.jsonl" && name !== "eval_metrics.jsonl"

/** The long number arrays of a line: token ids, loss masks and logprobs (the bulk of a dump). */
const bulky = /"(tokens|train_tokens|loss_mask|rollout_log_probs|logprobs)":\[[^\]]*\]/g

/**
 * Lines (one or a whole file's text) with their long number arrays emptied (`"tokens":[]`, ...): everything a
 * Session's summary row reads, at a part of the cost of decoding them whole. Inside a JSON string a quote is escaped,
 * so only keys match; the arrays hold no newline, so the lines stay where they were.
 */
export const withoutArrays = (line: string): string => line.replace(bulky, "\"$1\":[]")
