/**
 * A SessionForest lineage as a training sample (docs/sessionforest.md "Export and the training sample").
 *
 * **Details**
 * `tokens` is the join of every training delta from the root to the exported state: the inference tokens, except
 * that an observation whose images were expanded by the vision processor contributes its expanded ids (the images and
 * their `image_grid_thw` are then carried in `multimodal_inputs` / `multimodal_train_inputs`). Observations before the first response are the prompt; from the first response on,
 * every token is continuation: generated ids get loss mask 1 and their engine logprob, observation ids get loss
 * mask 0 and logprob 0.0.
 */
import type * as Canonical from "../protocol/Canonical.ts"
import type * as DebugView from "./DebugView.ts"
import * as Export from "./Export.ts"
import * as Forest from "./Forest.ts"
import * as ForestError from "./ForestError.ts"
import * as Nodes from "./Nodes.ts"
import type * as TrainingSample from "./TrainingSample.ts"

type Json = Canonical.Json
type JsonObject = Canonical.JsonObject

const turnsOf = (lineage: ReadonlyArray<Forest.Node>): ReadonlyArray<DebugView.Turn> => {
  const turns: Array<DebugView.Turn> = []
  for (const n of lineage) {
    if (n.kind !== "resp") continue
    turns.push({
      turn_idx: turns.length,
      resp_state_hash: n.hash,
      parent_state_hash: n.parent,
      rollout_id: n.rolloutId,
      request_id: n.requestId,
      abort_count: n.abortCount,
      status: n.status,
      response_length: Forest.tokenLength(n),
      wall_elapsed_s: n.wallElapsedS,
      generation_elapsed_s: n.generationElapsedS,
      weight_versions: [...n.weightVersions],
      ...(n.loraVersions === undefined ? {} : { lora_versions: [...n.loraVersions] }),
      ...(n.cachedTokens !== undefined && n.promptTokens !== undefined
        ? { cached_tokens: n.cachedTokens, prompt_tokens: n.promptTokens }
        : {}),
      ...(n.movedAttempts.length > 0 ? { moved_attempts: n.movedAttempts } : {})
    })
  }
  return turns
}

const terminalStatus = (leaf: Forest.Node): TrainingSample.Status => (leaf.kind === "resp" ? leaf.status : "truncated")

const turnJson = ({ moved_attempts, ...turn }: DebugView.Turn): JsonObject => ({
  ...turn,
  weight_versions: [...turn.weight_versions],
  ...(turn.lora_versions === undefined ? {} : { lora_versions: [...turn.lora_versions] }),
  ...(moved_attempts === undefined
    ? {}
    : { moved_attempts: moved_attempts.map((m) => ({ attempt: m.attempt, worker: m.worker, cause: m.cause })) })
})

/**
 * Build the training sample of a committed state (normally an exported leaf).
 *
 * **Details**
 * `status` is the leaf response's status, or `truncated` when the state ends in an observation. `metadata` =
 * the Session's metadata, overlaid with the export metadata (`agentic_trace` merged), plus `start_rollout_id`
 * (first response's rollout unless given), the subtree's `tools` and `chat_template_kwargs`, `rollout_turns`, and
 * `agentic_trace` with `session_id`, `leaf_state_hash`, `terminal_status`, `turn_count` and per-turn `turns`.
 * `advantage` is null: credit fills it. Throws {@link ForestInvariantError} when the lineage has no response
 * (exports never select such a state).
 */
export const build = (
  forest: Forest.Forest,
  hash: string,
  decode: (ids: ReadonlyArray<number>) => string,
  ctx: {
    readonly rolloutId: number
    readonly exportName: string | null
    readonly reward: TrainingSample.Reward
    readonly metadata: JsonObject
  }
): TrainingSample.TrainingSample => {
  const lineage = Forest.lineage(forest, hash)
  const leaf = lineage[lineage.length - 1]
  const total = leaf?.tokenCount ?? 0
  const tokens = new Array<number>(total)
  const lossMask: Array<number> = []
  const logprobs: Array<number> = []
  const spans: Array<readonly [number, number]> = []
  const weightVersions: Array<string> = []
  // Versioned LoRA: every attempt's adapter version, made only when a response carries them.
  let loraVersions: Array<string> | undefined
  // Routing replay: the rows of every response of the lineage, in order (one per position of the whole sequence but
  // the last), made only when a response carries routing.
  const routed: Array<Array<number>> = []
  let hasRouted = false
  let promptLength = -1
  let offset = 0
  const images: Array<string> = []
  const grids: Array<readonly [number, number, number]> = []
  for (const n of lineage) {
    const train = Forest.unpackTrainTokens(n)
    for (let i = 0; i < train.length; i++) tokens[offset + i] = train[i] ?? 0
    if (n.kind === "resp") {
      if (promptLength < 0) promptLength = offset
      const start = lossMask.length
      const values = n.logprobs
      for (let i = 0; i < train.length; i++) {
        lossMask.push(1)
        logprobs.push(values[i] ?? 0)
      }
      const experts = n.routedExperts
      if (experts !== undefined) {
        hasRouted = true
        const rows = experts.width === 0 ? 0 : experts.ids.length / experts.width
        for (let i = 0; i < rows; i++) routed.push(Nodes.routedExpertsOf(experts, i))
      }
      spans.push([start, lossMask.length])
      weightVersions.push(...n.weightVersions)
      if (n.loraVersions !== undefined) (loraVersions ??= []).push(...n.loraVersions)
    } else {
      images.push(...n.media)
      grids.push(...n.imageGrids)
      if (promptLength >= 0) {
        for (let i = 0; i < train.length; i++) {
          lossMask.push(0)
          logprobs.push(0)
        }
      }
    }
    offset += train.length
  }
  if (leaf === undefined || promptLength < 0) {
    throw new ForestError.ForestInvariantError({
      detail: "A sample export leaf must have at least one resp node in its lineage.",
      sessionId: forest.sessionId
    })
  }
  const turns = turnsOf(lineage)
  const firstTurn = turns[0]
  const subtreeRoot = lineage[1]
  const tools = subtreeRoot?.kind === "obs" ? subtreeRoot.tools ?? [] : []
  const kwargs = subtreeRoot?.kind === "obs" ? subtreeRoot.chatTemplateKwargs ?? {} : {}
  let metadata = forest.metadata
  if (leaf.kind === "resp") metadata = Export.mergeMetadata(metadata, { request_id: leaf.requestId })
  metadata = Export.mergeMetadata(metadata, ctx.metadata)
  const status = terminalStatus(leaf)
  const trace: JsonObject = {
    session_id: forest.sessionId,
    leaf_state_hash: leaf.hash,
    terminal_status: status,
    turn_count: turns.length,
    turns: turns.map(turnJson)
  }
  const finalMetadata: Record<string, Json> = {
    ...Export.mergeMetadata(metadata, { agentic_trace: trace }),
    start_rollout_id: metadata["start_rollout_id"] ?? firstTurn?.rollout_id ?? ctx.rolloutId,
    tools: structuredClone(tools),
    chat_template_kwargs: structuredClone(kwargs),
    rollout_turns: turns.length,
    // The version the Session was bound to (one for its whole life).
    ...(loraVersions === undefined ? {} : { lora_version: loraVersions[loraVersions.length - 1] ?? null })
  }
  const continuation = tokens.slice(promptLength)
  return {
    rollout_id: ctx.rolloutId,
    group_index: forest.groupIndex,
    index: forest.index,
    session_id: forest.sessionId,
    export_name: ctx.exportName,
    tokens,
    response_length: continuation.length,
    loss_mask: lossMask,
    rollout_log_probs: logprobs,
    turn_spans: spans,
    prompt: promptLength === 0 ? "" : decode(tokens.slice(0, promptLength)),
    response: continuation.length === 0 ? "" : decode(continuation),
    reward: ctx.reward,
    advantage: null,
    status,
    weight_versions: weightVersions,
    ...(loraVersions === undefined ? {} : { lora_versions: loraVersions }),
    metadata: finalMetadata,
    label: forest.label,
    ...(images.length === 0 ? {} : { multimodal_inputs: { images } }),
    ...(grids.length === 0 ? {} : { multimodal_train_inputs: { image_grid_thw: grids } }),
    ...(hasRouted ? { rollout_routed_experts: routed } : {})
  }
}

/** The debug view of a committed state: its lineage hashes, terminal status and per-turn timing. */
export const debugView = (forest: Forest.Forest, hash: string): DebugView.DebugView => {
  const lineage = Forest.lineage(forest, hash)
  const turns = turnsOf(lineage)
  const leaf = lineage[lineage.length - 1]
  return {
    session_id: forest.sessionId,
    leaf_state_hash: hash,
    state_hashes: lineage.map((n) => ({ hash: n.hash, kind: n.kind, tokens: Forest.tokenLength(n) })),
    terminal_status: leaf === undefined ? "truncated" : terminalStatus(leaf),
    turn_count: turns.length,
    turns
  }
}
