/**
 * A SessionForest as the debug dump writes it: every committed node with its messages and token ids, so `inspect`
 * can draw the whole tree, not only the exported lineages (docs/outputs.md "The debug dump", `forest`).
 *
 * **Details**
 * The dump is plain JSON in commit order (a parent always before its children). An observation carries its messages
 * and inference token ids (`train_tokens` too when the vision processor expanded its images); a response carries its
 * one message, ids, logprobs, weight versions (one per engine attempt), the token count of each attempt when there
 * were several (`attempt_lengths`: where a resumed request's aborts fall), and the request's facts. The Schema is what
 * `inspect` decodes; {@link ofForest} is what the rollout writes.
 */
import { Schema } from "effect"
import * as DebugView from "../forest/DebugView.ts"
import * as Forest from "../forest/Forest.ts"
import * as TrainingSample from "../forest/TrainingSample.ts"
import * as Canonical from "../protocol/Canonical.ts"
import * as DumpArrays from "./DumpArrays.ts"

/** One committed node of a forest dump. */
export const DumpNode = Schema.Struct({
  hash: Schema.String,
  parent: Schema.NullOr(Schema.String),
  kind: DebugView.NodeKind,
  /** The canonical messages this node added (a response: its one assistant message). */
  messages: Schema.Array(Canonical.Message),
  /** The token ids this node added (inference view). */
  tokens: DumpArrays.Ints,
  /** An observation whose images were expanded for training: its training ids. */
  train_tokens: Schema.optionalKey(DumpArrays.Ints),
  rollout_id: Schema.Int,
  abort_count: Schema.Int,
  /** Responses: the engine's logprob of each token. */
  logprobs: Schema.optionalKey(DumpArrays.Numbers),
  /** Responses: the weight version of every engine attempt, in order. */
  weight_versions: Schema.optionalKey(Schema.Array(Schema.String)),
  /** Responses resumed after an engine abort: the token count each attempt added, in order. */
  attempt_lengths: Schema.optionalKey(Schema.Array(Schema.Int)),
  /** Responses with an attempt whose SGLang worker died under it: which attempt, the worker, the cause. */
  moved_attempts: Schema.optionalKey(Schema.Array(DebugView.MovedAttempt)),
  status: Schema.optionalKey(TrainingSample.Status),
  request_id: Schema.optionalKey(Schema.String),
  wall_elapsed_s: Schema.optionalKey(Schema.Number),
  generation_elapsed_s: Schema.optionalKey(Schema.Number)
})
export type DumpNode = typeof DumpNode.Type

/** A Session's SessionForest in the debug dump. */
export const ForestDump = Schema.Struct({
  root: Schema.String,
  /** Every node, root first, in commit order. */
  nodes: Schema.Array(DumpNode),
  /** The leaf states (non-root nodes without children). */
  leaves: Schema.Array(Schema.String)
})
export type ForestDump = typeof ForestDump.Type

const nodeOf = (n: Forest.Node): DumpNode => {
  const base = {
    hash: n.hash,
    parent: n.parent,
    kind: n.kind,
    messages: n.messages,
    tokens: Array.from(Forest.unpackTokens(n)),
    rollout_id: n.rolloutId,
    abort_count: n.abortCount
  }
  if (n.kind === "obs") {
    return n.trainIds === undefined ? base : { ...base, train_tokens: Array.from(Forest.unpackTrainTokens(n)) }
  }
  return {
    ...base,
    logprobs: Array.from(n.logprobs),
    weight_versions: [...n.weightVersions],
    ...(n.attemptLengths.length > 1 ? { attempt_lengths: [...n.attemptLengths] } : {}),
    ...(n.movedAttempts.length > 0 ? { moved_attempts: n.movedAttempts.map((m) => ({ ...m })) } : {}),
    status: n.status,
    request_id: n.requestId,
    wall_elapsed_s: n.wallElapsedS,
    generation_elapsed_s: n.generationElapsedS
  }
}

/** The whole forest as the debug dump writes it (nodes in commit order). */
export const ofForest = (forest: Forest.Forest): ForestDump => ({
  root: forest.root,
  // The node map holds the nodes in commit order.
  nodes: Array.from(forest.nodes.values(), nodeOf),
  leaves: Forest.leaves(forest)
})
