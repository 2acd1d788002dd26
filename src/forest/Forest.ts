/**
 * The SessionForest: every committed conversation state of one Session, token-exact (docs/sessionforest.md).
 *
 * **Details**
 * A forest is a tree of nodes keyed by state hash. The root is an empty observation. An observation node holds the
 * messages a request added and the token ids the chat template adds for them (loss mask 0); a response node holds
 * one assistant message with the exact ids, logprobs and weight versions the engine produced (loss mask 1).
 * A node stores only its own delta (ids packed in 3 bytes each, src/ids/PackedIds.ts; a response's logprobs in
 * the same buffer); histories are joined along the lineage on demand. Nodes are a Session's bulk in memory, so they
 * are kept lean (docs/performance.md, section 3): nothing stored twice, no empty arrays of their own, and a running
 * hash state only on leaves.
 *
 * Matching a request (src/forest/Matching.ts) walks a message-level index beside the tree (src/forest/MatchIndex.ts):
 * every committed message boundary is a vertex, and the vertex where a node's messages end points at that node. The
 * node classes are in src/forest/Nodes.ts, the commits in src/forest/Commit.ts, export (which states become samples)
 * in src/forest/Export.ts.
 *
 * All functions are synchronous, so a Session's concurrent requests are serialized by construction. Hash
 * collisions across kinds, unknown parents and tools/template changes inside a subtree are invariant breaks and
 * throw {@link ForestInvariantError} (callers treat them as defects).
 */
import { Result } from "effect"
import * as PackedIds from "../ids/PackedIds.ts"
import * as Json from "../json/Json.ts"
import * as Canonical from "../protocol/Canonical.ts"
import type * as ImageGrid from "../template/ImageGrid.ts"
import type * as DebugView from "./DebugView.ts"
import * as ForestError from "./ForestError.ts"
import type * as InferencePrefix from "./InferencePrefix.ts"
import * as MatchIndex from "./MatchIndex.ts"
import * as Nodes from "./Nodes.ts"
import * as StateHash from "./StateHash.ts"

type JsonValue = Canonical.Json
type JsonObject = Canonical.JsonObject

interface NodeBase {
  readonly hash: string
  /** Parent state hash; null only for the root. */
  readonly parent: string | null
  /** @internal The parent node (what `parent` names); null only for the root. */
  readonly up: Node | null
  readonly rolloutId: number
  readonly abortCount: number
  /** The canonical messages this node added. */
  readonly messages: ReadonlyArray<Canonical.Message>
  /**
   * The token ids this node added, as the engine sees them (the inference view), packed in 3 bytes an id
   * (src/ids/PackedIds.ts). {@link unpackTokens} copies them out, {@link tokenLength} counts them.
   */
  readonly ids: PackedIds.PackedIds
  /** Hash of the subtree root (lineage[1]); null for the root. */
  readonly subtree: string | null
  /** @internal The subtree root node (what `subtree` names; itself for a subtree root); null for the root. */
  readonly top: ObservationNode | null
  /** Training tokens from the root through this node (what context limits count). */
  readonly tokenCount: number
  /** Messages from the root through this node. */
  readonly messageCount: number
  /**
   * @internal SHA-256 state over the full messages (`{"messages":[m1,…,mk`), to hash a child without re-serializing
   * the history. Only a node without children keeps one: committing a child hands the state on to it (extended in
   * place), and a later child of an inner node rebuilds it from the lineage ({@link takeRunning}). A conversation
   * that goes on linearly keeps one state per leaf instead of one per node (a state is mostly OpenSSL's memory;
   * docs/performance.md, "Figures behind code comments").
   */
  running: StateHash.State | undefined
  /** @internal Creation order in the forest (the reasoning tolerance prefers the latest response). */
  readonly committed: number
  /** @internal where this state ends in the matching index. */
  readonly vertex: MatchIndex.Vertex
}

/** An observation: messages sent by the agent (or the empty root), tokenized as a template delta. */
export interface ObservationNode extends NodeBase {
  readonly kind: "obs"
  /**
   * The training ids when they differ from `ids`: an observation with images under a vision processor, each image
   * placeholder expanded as the processor does (src/template/ImageGrid.ts). {@link unpackTrainTokens} reads them.
   */
  readonly trainIds: PackedIds.PackedIds | undefined
  /** Image URLs of `image_url` parts in this node's messages. */
  readonly media: ReadonlyArray<string>
  /** `image_grid_thw` of each image of `media` when its placeholder was expanded for training; empty otherwise. */
  readonly imageGrids: ReadonlyArray<ImageGrid.Grid>
  /** Set on the root (base kwargs only) and on subtree roots. */
  readonly tools: ReadonlyArray<Canonical.Tool> | null
  readonly chatTemplateKwargs: Canonical.TemplateKwargs | null
}

/** An engine attempt whose worker died under it: its index among the response's attempts, the worker, the cause. */
export type MovedAttempt = DebugView.MovedAttempt

/** A response: one generated assistant message with the exact engine output. */
export interface ResponseNode extends NodeBase {
  readonly kind: "resp"
  readonly message: Canonical.Message
  /**
   * The engine's logprob of each token. A `Float32Array` when every value is exactly a 32-bit float (what SGLang
   * returns: its logprobs are float32 tensors), else a `Float64Array`: either way each value reads back exactly as
   * committed. The node keeps their bytes as a one-byte string (`packLogprobs` in src/forest/Nodes.ts); this array is
   * made on each read: read it once per loop.
   */
  readonly logprobs: Float32Array | Float64Array
  readonly weightVersions: ReadonlyArray<string>
  /**
   * The token count of each engine attempt when the request was resumed after an abort (two or more), else empty:
   * where the aborts fall in the response's ids (read by `inspect`).
   */
  readonly attemptLengths: ReadonlyArray<number>
  /** The attempts whose SGLang worker died under them (no token; resumed on a live worker), else empty. */
  readonly movedAttempts: ReadonlyArray<MovedAttempt>
  /**
   * With `--use-rollout-routing-replay`: the MoE expert ids of the sequence positions this response's request went
   * through that no earlier response of its lineage holds (from the previous response's last token, or from position
   * 0 for the first response, to this response's last token but one), `width` (`layers × topk`) ids per position in
   * one array; the lineage's rows concatenated are one row per position of the whole sequence but the last. Absent
   * without the flag.
   */
  readonly routedExperts?: Nodes.RoutedExperts | undefined
  /** With versioned LoRA (docs/lora.md): the adapter version of each engine attempt, as `weightVersions`. */
  readonly loraVersions?: ReadonlyArray<string> | undefined
  readonly status: "completed" | "truncated"
  readonly requestId: string
  readonly wallElapsedS: number
  readonly generationElapsedS: number
  /** The prompt tokens the engine found in its prefix cache (SGLang's `cached_tokens`), when it reported them. */
  readonly cachedTokens?: number | undefined
  /** The prompt tokens of the request's last engine attempt, reported with `cachedTokens`. */
  readonly promptTokens?: number | undefined
}

export type Node = ObservationNode | ResponseNode

/**
 * One Session's SessionForest.
 *
 * **Details**
 * The read-only views (`nodes`, `leaves`) are live; mutation happens only through `commitObservation` and
 * `commitResponse` (src/forest/Commit.ts).
 */
export class Forest {
  readonly sessionId: string
  readonly groupIndex: number
  readonly index: number
  readonly label: JsonValue | null
  /** The Session's static metadata (deep copy of what it was created with). */
  readonly metadata: JsonObject
  /** Template kwargs of the root: the dataset's / config's `chat_template_kwargs`, normalized. */
  readonly baseKwargs: Canonical.TemplateKwargs
  readonly root: string
  /** @internal */
  readonly nodeMap = new Map<string, Node>()
  /** @internal */
  readonly leafSet = new Set<string>()
  /** @internal context fingerprint → the contexts' root vertices (src/forest/MatchIndex.ts) */
  readonly contexts: MatchIndex.Contexts = new Map()
  /** @internal states committed so far (orders `Node.committed`) */
  commits = 0
  /**
   * @internal request id → response hash, for the request ids that re-committed an existing response (a retry):
   * made on first use. A committed response's own request id is on its node ({@link responseOfRequest}), so the
   * forest keeps no map entry per response.
   */
  retries: Map<string, string> | undefined = undefined
  /** Number of matches that used the reasoning tolerance (one per tolerated assistant message). */
  toleratedMatches = 0
  /**
   * @internal The inference prefix last asked for (`InferencePrefix.ids`, src/forest/InferencePrefix.ts), kept (weakly) for the next request to
   * extend in place: owned by the newest state asked for, made when first asked.
   */
  prefix: InferencePrefix.PrefixCache | undefined = undefined
  /**
   * @internal The full message list last asked for ({@link fullMessages}), kept for the next request: a conversation
   * going on asks for the same state again or for a state below it.
   */
  keptMessages: MessagesCache | undefined = undefined
  /**
   * @internal The last state `InferencePrefix.media` found no image along (a text conversation's every request asks for
   * a state below it), so the next request looks at the nodes under it only.
   */
  mediaFree: Node | undefined = undefined

  constructor(
    { baseKwargs, groupIndex, index, label, metadata, sessionId }: Pick<
      Forest,
      "sessionId" | "groupIndex" | "index" | "label" | "metadata" | "baseKwargs"
    >
  ) {
    this.sessionId = sessionId
    this.groupIndex = groupIndex
    this.index = index
    this.label = label
    this.metadata = metadata
    this.baseKwargs = baseKwargs
    const vertex = MatchIndex.contextVertex(this.contexts, [], baseKwargs)
    const root = new Nodes.Observation({
      hash: StateHash.finishState(StateHash.startState(), [], baseKwargs),
      up: null,
      rolloutId: 0,
      abortCount: 0,
      messages: [],
      ids: Nodes.noIds,
      trainIds: undefined,
      top: null,
      tokenCount: 0,
      messageCount: 0,
      running: undefined,
      committed: ++this.commits,
      vertex,
      media: Nodes.noStrings,
      imageGrids: Nodes.noGrids,
      tools: null,
      chatTemplateKwargs: baseKwargs
    })
    this.root = root.hash
    this.nodeMap.set(root.hash, root)
    MatchIndex.markState(this.sessionId, vertex, root)
  }

  get nodes(): ReadonlyMap<string, Node> {
    return this.nodeMap
  }

  /** Leaf states: every non-root node without children. Several leaves = branching. */
  get leaves(): ReadonlySet<string> {
    return this.leafSet
  }
}

/** The forest's own copy of a committed JSON value (messages, tools, kwargs, metadata): no caller can change it later. */
export const deepCopy = <A>(value: A): A => Json.copy(value)

/** The forest's copy of template kwargs (the shared empty object when there are none). */
export const copyKwargs = (kwargs: Canonical.TemplateKwargs): Canonical.TemplateKwargs =>
  Object.keys(kwargs).length === 0 ? Nodes.noKwargs : deepCopy(kwargs)

/**
 * Create a SessionForest holding only its root observation (no messages, no tokens).
 *
 * **Details**
 * The dataset prompt is not pre-committed: the agent sends the full conversation. The root's template kwargs are
 * `chatTemplateKwargs` if given, else `metadata.chat_template_kwargs`, normalized (a non-object is ignored).
 */
export const make = (init: {
  readonly sessionId: string
  readonly groupIndex: number
  readonly index: number
  readonly label: JsonValue | null
  readonly metadata: JsonObject
  readonly chatTemplateKwargs?: Canonical.TemplateKwargs
}): Forest => {
  const kwargs = Canonical.normalizeTemplateKwargs(init.chatTemplateKwargs ?? init.metadata["chat_template_kwargs"])
  return new Forest({
    sessionId: init.sessionId,
    groupIndex: init.groupIndex,
    index: init.index,
    label: init.label === null ? null : deepCopy(init.label),
    metadata: deepCopy(init.metadata),
    baseKwargs: Result.isSuccess(kwargs) ? kwargs.success : {}
  })
}

/** Throw a `ForestInvariantError` (a bug: the forest broke one of its own rules). */
export const invariant = (forest: Forest, message: string): never => {
  throw new ForestError.ForestInvariantError({ detail: message, sessionId: forest.sessionId })
}

/** The node of a state hash (throws {@link ForestInvariantError} when unknown). */
export const node = (forest: Forest, hash: string): Node =>
  forest.nodeMap.get(hash) ?? invariant(forest, `unknown SessionForest state ${hash} in session ${forest.sessionId}`)

/** Whether `hash` is the forest's root (an empty observation: the next observation renders the full prompt). */
export const isRoot = (forest: Forest, hash: string): boolean => hash === forest.root

/** The current leaf states (a copy). */
export const leaves = (forest: Forest): ReadonlyArray<string> => [...forest.leafSet]

/** How many nodes lead from the root to `n` (the root's depth is 1). */
export const depth = (n: Node): number => {
  let count = 0
  for (let at: Node | null = n; at !== null; at = at.up) count++
  return count
}

/** The nodes from the root to `hash`, root first. */
export const lineage = (forest: Forest, hash: string): ReadonlyArray<Node> => {
  const leaf = node(forest, hash)
  const out = new Array<Node>(depth(leaf))
  let i = out.length
  for (let at: Node | null = leaf; at !== null; at = at.up) out[--i] = at
  return out
}

/**
 * The full canonical conversation of a state (concatenated message deltas).
 *
 * **Details**
 * The forest keeps the list it last gave ({@link MessagesCache}) and gives the same array again for the same state:
 * read it, never write into it (copy it for code that might).
 */
export const fullMessages = (forest: Forest, hash: string): ReadonlyArray<Canonical.Message> => {
  const leaf = node(forest, hash)
  const kept = forest.keptMessages
  if (kept !== undefined && kept.end === leaf) return kept.list
  // Below the kept state (one or two nodes for a conversation going on): its list, then the nodes' messages under it.
  let above: Node | null = leaf
  if (kept !== undefined) { while (above !== null && above.messageCount > kept.end.messageCount) above = above.up }
  const shared = kept !== undefined && above === kept.end ? kept : undefined
  const out = new Array<Canonical.Message>(leaf.messageCount)
  let end = out.length
  for (let at: Node | null = leaf; at !== null && at !== shared?.end; at = at.up) {
    if (at instanceof Nodes.Response) out[--end] = at.message
    else {
      const messages = at.messages
      for (let i = messages.length - 1; i >= 0; i--) out[--end] = messages[i] as Canonical.Message
    }
  }
  if (shared !== undefined) { for (let i = 0; i < end; i++) out[i] = shared.list[i] as Canonical.Message }
  forest.keptMessages = { end: leaf, list: out }
  return out
}

/**
 * Whether `messages` begins with the full messages of `n`, the very objects (no comparing, no hashing): checked
 * against {@link fullMessages}, the kept list itself when it is `n`'s (the echo scan just asked for it).
 */
export const startsWithMessagesOf = (
  forest: Forest,
  n: Node,
  messages: ReadonlyArray<Canonical.Message>
): boolean => {
  if (n.messageCount > messages.length) return false
  const list = fullMessages(forest, n.hash)
  for (let i = 0; i < list.length; i++) if (messages[i] !== list[i]) return false
  return true
}

/**
 * @internal A forest's full message list of one state, kept between requests ({@link fullMessages}): the previous
 * request's state is asked for again (the gateway's echo scan), and the next state is a child of a child of it, so its
 * list is the kept one and two nodes' messages instead of a walk up the whole lineage.
 */
export interface MessagesCache {
  readonly end: Node
  readonly list: ReadonlyArray<Canonical.Message>
}

/** How many token ids a node added (its inference view), without copying them out. */
export const tokenLength = (n: Node): number => PackedIds.length(n.ids)

/** The token ids a node added, as the engine sees them (the inference view): a fresh copy on every call. */
export const unpackTokens = (n: Node): Int32Array => PackedIds.unpack(n.ids)

/**
 * The token ids a node added for training: {@link unpackTokens}, except in an observation with images under a vision
 * processor, where each image placeholder is expanded as the processor does. A fresh copy on every call.
 */
export const unpackTrainTokens = (n: Node): Int32Array =>
  PackedIds.unpack(n.kind === "obs" ? (n.trainIds ?? n.ids) : n.ids)

/** Tools of the state's subtree (`[]` at the root). */
export const subtreeTools = (forest: Forest, hash: string): ReadonlyArray<Canonical.Tool> => toolsOf(node(forest, hash))

/** Template kwargs of the state's subtree (the base kwargs at the root). */
export const subtreeKwargs = (forest: Forest, hash: string): Canonical.TemplateKwargs =>
  kwargsOf(forest, node(forest, hash))

/** The tools of the subtree `n` belongs to. */
export const toolsOf = (n: Node): ReadonlyArray<Canonical.Tool> => n.top?.tools ?? Nodes.noTools

/** The template kwargs of the subtree `n` belongs to. */
export const kwargsOf = (forest: Forest, n: Node): Canonical.TemplateKwargs =>
  n.top?.chatTemplateKwargs ?? forest.baseKwargs

/** Total training tokens from the root through `hash` (O(1)). */
export const trainTokenCount = (forest: Forest, hash: string): number => node(forest, hash).tokenCount

/**
 * The response committed for an engine request id, if any (the existing response for a request that re-committed
 * it). Cost: a scan of the forest's nodes (a look-up for inspection and tests, not for a request's path).
 */
export const responseOfRequest = (forest: Forest, requestId: string): string | undefined => {
  const retried = forest.retries?.get(requestId)
  if (retried !== undefined) return retried
  // The latest response committed with this id, as a map set on every commit would say.
  let latest: string | undefined
  for (const n of forest.nodeMap.values()) if (n.kind === "resp" && n.requestId === requestId) latest = n.hash
  return latest
}
