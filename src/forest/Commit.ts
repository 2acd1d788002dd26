/**
 * The SessionForest's commits: an observation (the request's new messages, rendered) and a response (the generated
 * turn) become nodes of a Forest (src/forest/Forest.ts holds the Forest, its queries and `match`).
 *
 * **Details**
 * A commit extends the running hash of its parent, reuses an existing node of the same state, and otherwise creates
 * and registers the node (leaves, the match index). Tools and template kwargs are fixed per subtree.
 */
import * as PackedIds from "../ids/PackedIds.ts"
import * as Json from "../json/Json.ts"
import * as Canonical from "../protocol/Canonical.ts"
import type * as ImageGrid from "../template/ImageGrid.ts"
import * as Forest from "./Forest.ts"
import * as MatchIndex from "./MatchIndex.ts"
import * as Nodes from "./Nodes.ts"
import * as StateHash from "./StateHash.ts"
const register = (forest: Forest.Forest, n: Forest.Node): string => {
  forest.nodeMap.set(n.hash, n)
  MatchIndex.markState(forest.sessionId, n.vertex, n)
  if (n.up !== null) {
    forest.leafSet.add(n.hash)
    forest.leafSet.delete(n.up.hash)
  }
  return n.hash
}

/** The `image_url` URLs of `messages`' content parts, in order (what an observation node stores as its media). */
export const mediaOf = (messages: ReadonlyArray<Canonical.Message>): ReadonlyArray<string> => {
  const urls: Array<string> = []
  for (const message of messages) {
    if (typeof message.content === "string") continue
    for (const part of message.content) {
      const image = part["image_url"]
      if (part["type"] !== "image_url" || !Json.isObject(image)) continue
      const url = image["url"]
      if (typeof url === "string") urls.push(url)
    }
  }
  return urls
}

/**
 * The running hash state of `parent` for hashing a new child, taken from it: a node gives its state to its first
 * child (the child extends it in place), so a later child of the same node (a branch, a second sample at one state,
 * a retry) rebuilds it from the lineage's messages, once per such commit: O(history), like the request itself.
 */
const takeRunning = (forest: Forest.Forest, parent: Forest.Node): StateHash.State => {
  const kept = parent.running
  if (kept !== undefined) {
    parent.running = undefined
    return kept
  }
  const rebuilt = StateHash.startState()
  StateHash.append(rebuilt, 0, Forest.fullMessages(forest, parent.hash))
  return rebuilt
}

const existing = (forest: Forest.Forest, hash: string, kind: Forest.Node["kind"]): string | undefined => {
  const found = forest.nodeMap.get(hash)
  if (found === undefined) return undefined
  if (found.kind !== kind) {
    Forest.invariant(forest, `State hash collision with mismatched kinds: ${found.kind} vs ${kind}`)
  }
  return hash
}

/** An observation's training view when its images were expanded by the vision processor. */
export interface ExpandedObservation {
  readonly tokens: ReadonlyArray<number>
  /** `image_grid_thw` of each image, in message order. */
  readonly imageGrids: ReadonlyArray<ImageGrid.Grid>
}

/** An observation to commit: the messages after `parent` and their template-delta tokens. */
export interface ObservationCommit {
  readonly parent: string
  readonly messages: ReadonlyArray<Canonical.Message>
  readonly tokens: ReadonlyArray<number>
  /**
   * `PackedIds.pack(tokens)`, where the caller packed a long observation's ids apart from the commit (a 1 MB message's
   * ~250,000 ids: layers/generation/Observation.ts); absent: the commit packs them.
   */
  readonly packed?: PackedIds.PackedIds | undefined
  /** The processor-expanded training view of `tokens` and each image's grid; absent: training uses `tokens`. */
  readonly train?: ExpandedObservation | undefined
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly chatTemplateKwargs: Canonical.TemplateKwargs
  readonly rolloutId: number
}

/** A finished generation to commit: the assistant message parsed from it and the exact engine output. */
export interface ResponseCommit {
  readonly parent: string
  readonly message: Canonical.Message
  readonly tokens: ReadonlyArray<number>
  readonly logprobs: ReadonlyArray<number>
  readonly weightVersions: ReadonlyArray<string>
  /** The token count of each engine attempt, in order; kept only when there were two or more. */
  readonly attemptLengths?: ReadonlyArray<number> | undefined
  /** The attempts whose SGLang worker died under them (they resumed on a live worker). */
  readonly movedAttempts?: ReadonlyArray<Forest.MovedAttempt> | undefined
  /**
   * With routing replay: one row of MoE expert ids per sequence position the request's last attempt went through
   * (row `p`: the forward step that processed token `p`); the node keeps the rows no earlier response of its lineage
   * holds (see {@link Forest.ResponseNode.routedExperts}).
   */
  readonly routedExperts?: ReadonlyArray<ReadonlyArray<number>> | undefined
  /** Versioned LoRA: the adapter version of each engine attempt. */
  readonly loraVersions?: ReadonlyArray<string> | undefined
  readonly status: "completed" | "truncated"
  readonly rolloutId: number
  readonly requestId: string
  readonly abortCount: number
  readonly wallElapsedS: number
  readonly generationElapsedS: number
  /** The engine's prefix-cache report of the last attempt (SGLang's `cached_tokens` and `prompt_tokens`). */
  readonly cachedTokens?: number | undefined
  readonly promptTokens?: number | undefined
}

/** How many training tokens an observation adds (its expanded length when its images were expanded). */
export const observationTrainLength = (o: ObservationCommit): number => (o.train?.tokens ?? o.tokens).length

/**
 * Commit an observation (the messages after `parent` and their template-delta tokens); returns its state hash.
 *
 * **Details**
 * Under the root the observation starts a subtree and stores the request's tools and kwargs; deeper, they must
 * equal the subtree's (the reference's "tools changed inside session subtree" failure otherwise). Re-committing an
 * existing state returns it unchanged (idempotent retry); an empty delta returns `parent`. Run the context check
 * ({@link ContextLimit.checkObservation}) first: nothing here rejects a long observation.
 */
export const commitObservation = (forest: Forest.Forest, o: ObservationCommit): string => {
  const parent = Forest.node(forest, o.parent)
  if (o.messages.length === 0) return parent.hash
  const atRoot = parent.up === null
  if (!atRoot) {
    if (!StateHash.equalJson(Forest.toolsOf(parent), o.tools)) {
      Forest.invariant(forest, `tools changed inside session subtree: ${forest.sessionId}`)
    }
    if (!StateHash.equalJson(Forest.kwargsOf(forest, parent), o.chatTemplateKwargs)) {
      Forest.invariant(forest, `chat template changed inside session subtree: ${forest.sessionId}`)
    }
  }
  const running = takeRunning(forest, parent)
  StateHash.append(running, parent.messageCount, o.messages)
  // Deeper than the root, the subtree's own tools and kwargs print as the request's (checked above) and are kept.
  const hash = StateHash.finishWith(
    running,
    atRoot
      ? StateHash.closing(o.tools, o.chatTemplateKwargs)
      : StateHash.closingOfSubtree(Forest.toolsOf(parent), Forest.kwargsOf(forest, parent))
  )
  const found = existing(forest, hash, "obs")
  if (found !== undefined) return found
  const messages = Forest.deepCopy(o.messages)
  const start = atRoot ? MatchIndex.contextVertex(forest.contexts, o.tools, o.chatTemplateKwargs) : parent.vertex
  const n = new Nodes.Observation({
    hash,
    up: parent,
    rolloutId: o.rolloutId,
    abortCount: atRoot ? 0 : parent.abortCount,
    messages,
    ids: o.packed ?? PackedIds.pack(o.tokens),
    trainIds: o.train === undefined ? undefined : PackedIds.pack(o.train.tokens),
    top: parent.top ?? undefined,
    tokenCount: parent.tokenCount + observationTrainLength(o),
    messageCount: parent.messageCount + messages.length,
    running,
    committed: ++forest.commits,
    vertex: MatchIndex.extendVertex(start, messages),
    media: Nodes.orNone(mediaOf(messages)),
    imageGrids: Nodes.orNone(o.train?.imageGrids ?? Nodes.noGrids),
    tools: atRoot ? Nodes.orNone(Forest.deepCopy(o.tools)) : null,
    chatTemplateKwargs: atRoot ? Forest.copyKwargs(o.chatTemplateKwargs) : null
  })
  return register(forest, n)
}

/**
 * The first sequence position whose routing a response under `parent` keeps: the rows of earlier positions are held
 * by the responses before it in the lineage (the previous response's request went through every position but its own
 * last token, whose row comes from the next request).
 */
const routedFrom = (parent: Forest.Node): number => {
  for (let at: Forest.Node | null = parent; at !== null; at = at.up) {
    if (at.kind === "resp") return at.tokenCount - 1
  }
  return 0
}

/**
 * Commit a finished generation (the assistant message parsed from it and the exact engine output); returns its
 * state hash. Re-committing the same message under the same parent returns the existing response.
 */
export const commitResponse = (forest: Forest.Forest, r: ResponseCommit): string => {
  const parent = Forest.node(forest, r.parent)
  if (r.logprobs.length !== r.tokens.length) {
    Forest.invariant(forest, `response ${r.requestId} has ${r.tokens.length} tokens but ${r.logprobs.length} logprobs`)
  }
  const running = takeRunning(forest, parent)
  StateHash.append(running, parent.messageCount, [r.message])
  const hash = StateHash.finishWith(
    running,
    StateHash.closingOfSubtree(Forest.toolsOf(parent), Forest.kwargsOf(forest, parent))
  )
  const found = existing(forest, hash, "resp")
  if (found !== undefined) {
    const committed = Forest.node(forest, found)
    if (committed.kind === "resp" && committed.requestId !== r.requestId) {
      forest.retries ??= new Map()
      forest.retries.set(r.requestId, found)
    } else forest.retries?.delete(r.requestId)
    return found
  }
  const message = Forest.deepCopy(r.message)
  // Generated ids are trained as they are.
  const ids = PackedIds.pack(r.tokens)
  const n = new Nodes.Response({
    hash,
    up: parent,
    rolloutId: r.rolloutId,
    abortCount: r.abortCount,
    ids,
    top: parent.top,
    tokenCount: parent.tokenCount + r.tokens.length,
    messageCount: parent.messageCount + 1,
    running,
    committed: ++forest.commits,
    vertex: MatchIndex.extendVertex(parent.vertex, [message]),
    message,
    logprobText: Nodes.packLogprobs(r.logprobs),
    weightVersions: Nodes.sharedVersions(r.weightVersions),
    attemptLengths: r.attemptLengths !== undefined && r.attemptLengths.length > 1
      ? [...r.attemptLengths]
      : Nodes.noNumbers,
    movedAttempts: r.movedAttempts !== undefined && r.movedAttempts.length > 0 ? [...r.movedAttempts] : Nodes.noMoves,
    ...(r.routedExperts === undefined
      ? {}
      : { routedExperts: Nodes.packRoutedExperts(r.routedExperts.slice(routedFrom(parent))) }),
    ...(r.loraVersions === undefined ? {} : { loraVersions: Nodes.sharedVersions(r.loraVersions) }),
    status: r.status,
    requestId: r.requestId,
    wallElapsedS: r.wallElapsedS,
    generationElapsedS: r.generationElapsedS,
    cachedTokens: r.cachedTokens,
    promptTokens: r.promptTokens
  })
  forest.retries?.delete(r.requestId)
  return register(forest, n)
}
