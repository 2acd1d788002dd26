/**
 * The debug view of an exported state, as debug dumps (`--save-debug-rollout-data`), the cluster wire and `inspect`
 * carry it: the lineage's state hashes and one row per response turn (src/forest/Sample.ts `debugView` makes it).
 */
import { Schema } from "effect"
import * as TrainingSample from "./TrainingSample.ts"

/** An engine attempt whose SGLang worker died under it: its index among the response's attempts, the worker, why. */
export const MovedAttempt = Schema.Struct({ attempt: Schema.Int, worker: Schema.String, cause: Schema.String })
export type MovedAttempt = typeof MovedAttempt.Type

/** One response turn of a lineage. */
export const Turn = Schema.Struct({
  turn_idx: Schema.Int,
  resp_state_hash: Schema.String,
  parent_state_hash: Schema.NullOr(Schema.String),
  rollout_id: Schema.Int,
  request_id: Schema.String,
  abort_count: Schema.Int,
  status: TrainingSample.Status,
  response_length: Schema.Int,
  wall_elapsed_s: Schema.Number,
  generation_elapsed_s: Schema.Number,
  weight_versions: Schema.Array(Schema.String),
  /** With versioned LoRA: the adapter version of each attempt, beside `weight_versions`. */
  lora_versions: Schema.optionalKey(Schema.Array(Schema.String)),
  /** The engine's prefix-cache hits and prompt tokens for the turn, when it reported them. */
  cached_tokens: Schema.optionalKey(Schema.Int),
  prompt_tokens: Schema.optionalKey(Schema.Int),
  /** Attempts whose SGLang worker died under them (resumed on a live worker), when any did. */
  moved_attempts: Schema.optionalKey(Schema.Array(MovedAttempt))
})
export type Turn = typeof Turn.Type

/** A node's kind: an observation or a response. */
export const NodeKind = Schema.Literals(["obs", "resp"])

/** One state of a lineage: its hash, its kind and how many tokens it added. */
export const LineageState = Schema.Struct({
  hash: Schema.String,
  kind: NodeKind,
  tokens: Schema.Int
})

/** A compact view of a state's lineage. */
export const DebugView = Schema.Struct({
  session_id: Schema.String,
  leaf_state_hash: Schema.String,
  state_hashes: Schema.Array(LineageState),
  terminal_status: TrainingSample.Status,
  turn_count: Schema.Int,
  turns: Schema.Array(Turn)
})
export type DebugView = typeof DebugView.Type
