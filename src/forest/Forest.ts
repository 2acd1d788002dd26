/**
 * The SessionForest: every committed conversation state of one Session, token-exact (docs/sessionforest.md).
 *
 * **Details**
 * A forest is a tree of nodes keyed by state hash. The root is an empty observation. An observation node holds the
 * messages a request added and the token ids the chat template adds for them (loss mask 0); a response node holds
 * one assistant message with the exact ids, logprobs and weight versions the engine produced (loss mask 1).
 * A node stores only its own delta (ids packed in 3 bytes each, src/forest/PackedIds.ts; a response's logprobs in
 * the same buffer); histories are joined along the lineage on demand. Nodes are a Session's bulk in memory, so they
 * are kept lean (docs/performance.md, section 3): nothing stored twice, no empty arrays of their own, and a running
 * hash state only on leaves.
 *
 * Matching walks a message-level index beside the tree (see {@link match}): every committed message boundary is a
 * {@link Vertex}, and the vertex where a node's messages end points at that node.
 *
 * All functions are synchronous, so a Session's concurrent requests are serialized by construction. Hash
 * collisions across kinds, unknown parents and tools/template changes inside a subtree are invariant breaks and
 * throw {@link ForestInvariantError} (callers treat them as defects).
 */
import { Result } from "effect"
import * as Canonical from "../protocol/canonical.ts"
import type * as ImageGrid from "../template/ImageGrid.ts"
import type { Reward } from "./TrainingSample.ts"
import { ContextLengthError, ExportError, ForestInvariantError } from "./errors.ts"
import * as Hash from "./hash.ts"
import * as PackedIds from "./PackedIds.ts"
import { copy as copyJson } from "../json/Json.ts"

type Json = Canonical.Json
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
   * Token ids this node added, as the engine sees them (the inference view): a copy of its own on every read (the
   * node keeps them packed, see `ids`; {@link tokenLength} counts them without a copy).
   */
  readonly tokens: Int32Array
  /**
   * Token ids this node added for training: `tokens` itself, except in an observation with images under a vision
   * processor, where each image placeholder is expanded as the processor does (src/template/ImageGrid.ts). A copy
   * of its own on every read, like `tokens`.
   */
  readonly trainTokens: Int32Array
  /** @internal `tokens` packed in 3 bytes an id (src/forest/PackedIds.ts): what the node keeps. */
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
   * that goes on linearly keeps one state per leaf instead of one per node (~400 bytes each, most of it OpenSSL's).
   */
  running: Hash.State | undefined
  /** @internal Creation order in the forest (the reasoning tolerance prefers the latest response). */
  readonly committed: number
  /** @internal where this state ends in the matching index. */
  readonly vertex: Vertex
}

/**
 * @internal One message boundary of committed history, in one tools/kwargs context: the matching index.
 *
 * **Details**
 * A vertex stands for (context, messages[:k]) up to {@link Hash.equalJson}, so it is shared by every committed state
 * with that prefix and its children are the distinct messages committed after it. Equal (context, messages) means an
 * equal state hash, so a vertex carries at most one state: the node whose messages end there.
 */
export interface Vertex {
  /** The message on the edge into this vertex (null for a context's root). */
  readonly message: Canonical.Message | null
  /** The committed state ending here, if any. */
  state: Node | undefined
  /**
   * Child vertices in creation order: none, the only one (most vertices: a conversation continues one way), an
   * array once there are two, and a {@link Fanout} once there are many (sampled alternatives). No empty array is
   * kept per vertex: an array that grows by `push` reserves 17 slots (~150 bytes) for its first element.
   */
  children: Vertex | Array<Vertex> | Fanout | undefined
}

/** @internal The children of a vertex with many of them, also grouped by {@link bucketKey}. */
class Fanout {
  constructor(readonly all: Array<Vertex>, readonly index: Map<string, Array<Vertex>>) {}
}

/** @internal The root vertex of one tools/kwargs context (each context starts its own subtrees). */
interface ContextRoot {
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly kwargs: Canonical.TemplateKwargs
  readonly vertex: Vertex
}

/** An observation: messages sent by the agent (or the empty root), tokenized as a template delta. */
export interface ObservationNode extends NodeBase {
  readonly kind: "obs"
  /** Image URLs of `image_url` parts in this node's messages. */
  readonly media: ReadonlyArray<string>
  /** `image_grid_thw` of each image of `media` when its placeholder was expanded for training; empty otherwise. */
  readonly imageGrids: ReadonlyArray<ImageGrid.Grid>
  /** Set on the root (base kwargs only) and on subtree roots. */
  readonly tools: ReadonlyArray<Canonical.Tool> | null
  readonly chatTemplateKwargs: Canonical.TemplateKwargs | null
}

/** A response: one generated assistant message with the exact engine output. */
export interface ResponseNode extends NodeBase {
  readonly kind: "resp"
  readonly message: Canonical.Message
  /**
   * The engine's logprob of each token. A `Float32Array` when every value is exactly a 32-bit float (what SGLang
   * returns: its logprobs are float32 tensors), else a `Float64Array`: either way each value reads back exactly as
   * committed. It shares one buffer with `tokens` ({@link responseArrays}).
   */
  readonly logprobs: Float32Array | Float64Array
  readonly weightVersions: ReadonlyArray<string>
  /**
   * The token count of each engine attempt when the request was resumed after an abort (two or more), else empty:
   * where the aborts fall in `tokens` (read by `inspect`).
   */
  readonly attemptLengths: ReadonlyArray<number>
  readonly status: "completed" | "truncated"
  readonly requestId: string
  readonly wallElapsedS: number
  readonly generationElapsedS: number
}

export type Node = ObservationNode | ResponseNode

/**
 * @internal The stored form of an observation node. Nodes are the forest's bulk, so they are kept lean: `kind`,
 * `tokens` and `trainTokens` are read from the prototype (the ids unpacked on read), and nothing is kept twice.
 */
class Observation implements ObservationNode {
  readonly hash: string
  readonly up: Node | null
  readonly rolloutId: number
  readonly abortCount: number
  readonly messages: ReadonlyArray<Canonical.Message>
  readonly ids: PackedIds.PackedIds
  /** The training ids when they differ from `ids` (images expanded for training). */
  readonly trainIds: PackedIds.PackedIds | undefined
  readonly top: ObservationNode | null
  readonly tokenCount: number
  readonly messageCount: number
  running: Hash.State | undefined
  readonly committed: number
  readonly vertex: Vertex
  readonly media: ReadonlyArray<string>
  readonly imageGrids: ReadonlyArray<ImageGrid.Grid>
  readonly tools: ReadonlyArray<Canonical.Tool> | null
  readonly chatTemplateKwargs: Canonical.TemplateKwargs | null
  /** `init.top` undefined: this observation is a subtree root (its own `top`). */
  constructor(init: Omit<ObservationNode, "kind" | "tokens" | "trainTokens" | "parent" | "subtree" | "top"> & {
    readonly trainIds: PackedIds.PackedIds | undefined
    readonly top: ObservationNode | null | undefined
  }) {
    this.hash = init.hash
    this.up = init.up
    this.rolloutId = init.rolloutId
    this.abortCount = init.abortCount
    this.messages = init.messages
    this.ids = init.ids
    this.trainIds = init.trainIds
    this.top = init.top === undefined ? this : init.top
    this.tokenCount = init.tokenCount
    this.messageCount = init.messageCount
    this.running = init.running
    this.committed = init.committed
    this.vertex = init.vertex
    this.media = init.media
    this.imageGrids = init.imageGrids
    this.tools = init.tools
    this.chatTemplateKwargs = init.chatTemplateKwargs
  }
  get kind(): "obs" {
    return "obs"
  }
  get parent(): string | null {
    return this.up === null ? null : this.up.hash
  }
  get subtree(): string | null {
    return this.top === null ? null : this.top.hash
  }
  get tokens(): Int32Array {
    return PackedIds.unpack(this.ids)
  }
  get trainTokens(): Int32Array {
    return PackedIds.unpack(this.trainIds ?? this.ids)
  }
}

/** @internal The stored form of a response node (see {@link Observation}); `messages` is `[message]`, made on read. */
class Response implements ResponseNode {
  readonly hash: string
  readonly up: Node
  readonly rolloutId: number
  readonly abortCount: number
  readonly message: Canonical.Message
  readonly ids: PackedIds.PackedIds
  readonly logprobs: Float32Array | Float64Array
  readonly top: ObservationNode | null
  readonly tokenCount: number
  readonly messageCount: number
  running: Hash.State | undefined
  readonly committed: number
  readonly vertex: Vertex
  readonly weightVersions: ReadonlyArray<string>
  readonly attemptLengths: ReadonlyArray<number>
  readonly status: "completed" | "truncated"
  readonly requestId: string
  readonly wallElapsedS: number
  readonly generationElapsedS: number
  constructor(init: Omit<ResponseNode, "kind" | "tokens" | "trainTokens" | "messages" | "parent" | "subtree" | "up"> & {
    readonly up: Node
  }) {
    this.hash = init.hash
    this.up = init.up
    this.rolloutId = init.rolloutId
    this.abortCount = init.abortCount
    this.message = init.message
    this.ids = init.ids
    this.logprobs = init.logprobs
    this.top = init.top
    this.tokenCount = init.tokenCount
    this.messageCount = init.messageCount
    this.running = init.running
    this.committed = init.committed
    this.vertex = init.vertex
    this.weightVersions = init.weightVersions
    this.attemptLengths = init.attemptLengths
    this.status = init.status
    this.requestId = init.requestId
    this.wallElapsedS = init.wallElapsedS
    this.generationElapsedS = init.generationElapsedS
  }
  get kind(): "resp" {
    return "resp"
  }
  get parent(): string {
    return this.up.hash
  }
  get subtree(): string | null {
    return this.top === null ? null : this.top.hash
  }
  get messages(): ReadonlyArray<Canonical.Message> {
    return [this.message]
  }
  get tokens(): Int32Array {
    return PackedIds.unpack(this.ids)
  }
  get trainTokens(): Int32Array {
    return PackedIds.unpack(this.ids)
  }
}

/**
 * One Session's SessionForest.
 *
 * **Details**
 * The read-only views (`nodes`, `leaves`) are live; mutation happens only through {@link commitObservation} and
 * {@link commitResponse}.
 */
export class Forest {
  readonly sessionId: string
  readonly groupIndex: number
  readonly index: number
  readonly label: Json | null
  /** The Session's static metadata (deep copy of what it was created with). */
  readonly metadata: JsonObject
  /** Template kwargs of the root: the dataset's / config's `chat_template_kwargs`, normalized. */
  readonly baseKwargs: Canonical.TemplateKwargs
  readonly root: string
  /** @internal */
  readonly nodeMap = new Map<string, Node>()
  /** @internal */
  readonly leafSet = new Set<string>()
  /** @internal context fingerprint → the contexts' root vertices */
  readonly contexts = new Map<string, Array<ContextRoot>>()
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

  constructor(init: {
    readonly sessionId: string
    readonly groupIndex: number
    readonly index: number
    readonly label: Json | null
    readonly metadata: JsonObject
    readonly baseKwargs: Canonical.TemplateKwargs
  }) {
    this.sessionId = init.sessionId
    this.groupIndex = init.groupIndex
    this.index = init.index
    this.label = init.label
    this.metadata = init.metadata
    this.baseKwargs = init.baseKwargs
    const vertex = contextVertex(this, [], init.baseKwargs)
    const root = new Observation({
      hash: Hash.finishState(Hash.startState(), [], init.baseKwargs),
      up: null,
      rolloutId: 0,
      abortCount: 0,
      messages: [],
      ids: noIds,
      trainIds: undefined,
      top: null,
      tokenCount: 0,
      messageCount: 0,
      running: undefined,
      committed: ++this.commits,
      vertex,
      media: noStrings,
      imageGrids: noGrids,
      tools: null,
      chatTemplateKwargs: init.baseKwargs
    })
    this.root = root.hash
    this.nodeMap.set(root.hash, root)
    markState(this, vertex, root)
  }

  get nodes(): ReadonlyMap<string, Node> {
    return this.nodeMap
  }

  /** Leaf states: every non-root node without children. Several leaves = branching. */
  get leaves(): ReadonlySet<string> {
    return this.leafSet
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Matching index

/** Children a vertex scans directly; above this many it keeps a {@link bucketKey} index. */
const SCAN_LIMIT = 8

const newVertex = (message: Canonical.Message | null): Vertex => ({
  message,
  state: undefined,
  children: undefined
})

/** Cheap grouping of a context (tool names and kwargs); equal contexts have equal fingerprints. */
const contextFingerprint = (tools: ReadonlyArray<Canonical.Tool>, kwargs: Canonical.TemplateKwargs): string =>
  `${tools.map((tool) => tool.function.name).join("\u0000")}\u0001${Hash.pythonJson(kwargs)}`

/** Up to this many fingerprints, {@link findContext} compares every context instead of printing a fingerprint. */
const CONTEXT_SCAN_LIMIT = 4

/**
 * The root vertex of a tools/kwargs context, if any state was committed in it.
 *
 * **Details**
 * Most forests hold one context, which the request's must equal in full anyway: while there are few, they are
 * compared directly (a difference usually shows in the first tool), without printing the request's fingerprint.
 */
const findContext = (
  forest: Forest,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Vertex | undefined => {
  const sameContext = (c: ContextRoot) => Hash.equalJson(c.tools, tools) && Hash.equalJson(c.kwargs, kwargs)
  if (forest.contexts.size <= CONTEXT_SCAN_LIMIT) {
    for (const group of forest.contexts.values()) for (const c of group) if (sameContext(c)) return c.vertex
    return undefined
  }
  return forest.contexts.get(contextFingerprint(tools, kwargs))?.find(sameContext)?.vertex
}

/** The root vertex of a tools/kwargs context, created on first use. */
const contextVertex = (
  forest: Forest,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Vertex => {
  const found = findContext(forest, tools, kwargs)
  if (found !== undefined) return found
  const context: ContextRoot = { tools, kwargs, vertex: newVertex(null) }
  const fingerprint = contextFingerprint(tools, kwargs)
  const group = forest.contexts.get(fingerprint)
  if (group === undefined) forest.contexts.set(fingerprint, [context])
  else group.push(context)
  return context.vertex
}

/**
 * Groups messages that are equal up to `reasoning_content`, so both the exact and the tolerant lookup of a
 * message find their candidates in one bucket.
 */
const bucketKey = (message: Canonical.Message): string => {
  const content = typeof message.content === "string"
    ? message.content
    : message.content.map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join("\u0000")
  const calls = message.tool_calls?.map((call) => `${call.function.name ?? ""}\u0000${call.function.arguments}`) ?? []
  return `${message.role}\u0001${message.tool_call_id ?? ""}\u0001${content}\u0001${calls.join("\u0001")}`
}

const noVertices: ReadonlyArray<Vertex> = []

/** The children of `vertex` that may equal `message` up to its reasoning (all of them while few). */
const candidates = (vertex: Vertex, message: Canonical.Message): ReadonlyArray<Vertex> => {
  const children = vertex.children
  if (children === undefined) return noVertices
  if (children instanceof Fanout) return children.index.get(bucketKey(message)) ?? noVertices
  return Array.isArray(children) ? children : [children]
}

/** The child of `vertex` whose edge message equals `message` exactly. */
const child = (vertex: Vertex, message: Canonical.Message): Vertex | undefined => {
  const children = vertex.children
  if (children === undefined) return undefined
  if (!Array.isArray(children) && !(children instanceof Fanout)) {
    return Hash.equalJson(children.message, message) ? children : undefined
  }
  for (const c of candidates(vertex, message)) if (Hash.equalJson(c.message, message)) return c
  return undefined
}

const indexChild = (index: Map<string, Array<Vertex>>, c: Vertex, message: Canonical.Message): void => {
  const key = bucketKey(message)
  const bucket = index.get(key)
  if (bucket === undefined) index.set(key, [c])
  else bucket.push(c)
}

const addChild = (vertex: Vertex, message: Canonical.Message): Vertex => {
  const c = newVertex(message)
  const children = vertex.children
  if (children === undefined) vertex.children = c
  else if (children instanceof Fanout) {
    children.all.push(c)
    indexChild(children.index, c, message)
  } else if (!Array.isArray(children)) vertex.children = [children, c]
  else if (children.length < SCAN_LIMIT) children.push(c)
  else {
    const all = [...children, c]
    const index = new Map<string, Array<Vertex>>()
    for (const existing of all) if (existing.message !== null) indexChild(index, existing, existing.message)
    vertex.children = new Fanout(all, index)
  }
  return c
}

/** The vertex after `messages` from `vertex`, creating the missing ones. */
const extendVertex = (vertex: Vertex, messages: ReadonlyArray<Canonical.Message>): Vertex =>
  messages.reduce((at, message) => child(at, message) ?? addChild(at, message), vertex)

const markState = (forest: Forest, vertex: Vertex, n: Node): void => {
  if (vertex.state !== undefined && vertex.state.hash !== n.hash) {
    invariant(forest, `states ${vertex.state.hash} and ${n.hash} have equal messages, tools and kwargs but differ in hash`)
  }
  vertex.state = n
}

/**
 * The response child of the state at `vertex` that equals `message` but for the `reasoning_content` the request
 * dropped; the latest committed one if several differ only in reasoning (the agent continues from the response
 * it received last).
 */
const toleratedResponse = (
  forest: Forest,
  vertex: Vertex,
  message: Canonical.Message
): { readonly vertex: Vertex; readonly state: string } | undefined => {
  let best: { readonly vertex: Vertex; readonly state: string; readonly committed: number } | undefined
  for (const c of candidates(vertex, message)) {
    const state = c.state
    if (state === undefined || c.message?.reasoning_content === undefined) continue
    if (best !== undefined && best.committed > state.committed) continue
    if (state.kind !== "resp") continue
    if (Hash.equalJson(Canonical.withoutReasoning(c.message), message)) best = { vertex: c, state: state.hash, committed: state.committed }
  }
  return best
}

/** The forest's own copy of a committed JSON value (messages, tools, kwargs, metadata): no caller can change it later. */
const deepCopy = <A>(value: A): A => copyJson(value)

const isObject = (value: Json | undefined): value is JsonObject =>
  value !== null && value !== undefined && typeof value === "object" && !Array.isArray(value)

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
  readonly label: Json | null
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

const invariant = (forest: Forest, message: string): never => {
  throw new ForestInvariantError({ message, sessionId: forest.sessionId })
}

/** The node of a state hash (throws {@link ForestInvariantError} when unknown). */
export const node = (forest: Forest, hash: string): Node =>
  forest.nodeMap.get(hash) ?? invariant(forest, `unknown SessionForest state ${hash} in session ${forest.sessionId}`)

/** Whether `hash` is the forest's root (an empty observation: the next observation renders the full prompt). */
export const isRoot = (forest: Forest, hash: string): boolean => hash === forest.root

/** The current leaf states (a copy). */
export const leaves = (forest: Forest): ReadonlyArray<string> => [...forest.leafSet]

/** How many nodes lead from the root to `n` (the root's depth is 1). */
const depth = (n: Node): number => {
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

/** The full canonical conversation of a state (concatenated message deltas). */
export const fullMessages = (forest: Forest, hash: string): ReadonlyArray<Canonical.Message> => {
  const leaf = node(forest, hash)
  const out = new Array<Canonical.Message>(leaf.messageCount)
  let end = out.length
  for (let at: Node | null = leaf; at !== null; at = at.up) {
    if (at instanceof Response) out[--end] = at.message
    else {
      const messages = at.messages
      for (let i = messages.length - 1; i >= 0; i--) out[--end] = messages[i] as Canonical.Message
    }
  }
  return out
}

/** How many token ids a node added (its inference view: the length of `tokens`, without copying them). */
export const tokenLength = (n: Node): number => PackedIds.length(n.ids)

/** Tools of the state's subtree (`[]` at the root). */
export const subtreeTools = (forest: Forest, hash: string): ReadonlyArray<Canonical.Tool> =>
  toolsOf(node(forest, hash))

/** Template kwargs of the state's subtree (the base kwargs at the root). */
export const subtreeKwargs = (forest: Forest, hash: string): Canonical.TemplateKwargs =>
  kwargsOf(forest, node(forest, hash))

const toolsOf = (n: Node): ReadonlyArray<Canonical.Tool> => n.top?.tools ?? noTools

const kwargsOf = (forest: Forest, n: Node): Canonical.TemplateKwargs => n.top?.chatTemplateKwargs ?? forest.baseKwargs

/** Total training tokens from the root through `hash` (O(1)). */
export const trainTokenCount = (forest: Forest, hash: string): number => node(forest, hash).tokenCount

/**
 * The token ids the engine continues from at `hash`: every delta along the lineage, in order.
 *
 * **Details**
 * One packed array of the prefix's length ({@link PackedIds.concat} of the nodes' ids).
 */
export const inferencePrefix = (forest: Forest, hash: string): ReadonlyArray<number> => {
  const leaf = node(forest, hash)
  const parts = new Array<PackedIds.PackedIds>(depth(leaf))
  let i = parts.length
  for (let at: Node | null = leaf; at !== null; at = at.up) parts[--i] = at.ids
  return PackedIds.concat(parts)
}

/**
 * The media the engine needs with {@link inferencePrefix} at `hash` (SGLang `image_data`): the `image_url` URLs of
 * every observation along the lineage, in prompt order (the reference's `backend_image_data` of the execution prefix).
 */
export const inferenceMedia = (forest: Forest, hash: string): ReadonlyArray<string> => {
  const leaf = node(forest, hash)
  let count = 0
  for (let at: Node | null = leaf; at !== null; at = at.up) if (at instanceof Observation) count += at.media.length
  if (count === 0) return noStrings
  const out = new Array<string>(count)
  for (let at: Node | null = leaf; at !== null; at = at.up) {
    if (!(at instanceof Observation)) continue
    const media = at.media
    for (let i = media.length - 1; i >= 0; i--) out[--count] = media[i] as string
  }
  return out
}

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

/**
 * The context check before committing an observation (docs/sessionforest.md "Context limits and the turn budget"): the
 * parent's tokens plus the observation's must stay below `maxContextLen` (null = unlimited), else nothing may be
 * committed.
 */
export const checkObservationContext = (
  forest: Forest,
  parent: string,
  observationTokens: number,
  maxContextLen: number | null
): Result.Result<void, ContextLengthError> => {
  if (maxContextLen === null) return Result.void
  const prompt = trainTokenCount(forest, parent) + observationTokens
  return prompt >= maxContextLen
    ? Result.fail(new ContextLengthError({ limit: maxContextLen, promptTokens: prompt }))
    : Result.void
}

/**
 * The generation budget at a state (docs/sessionforest.md "Context limits and the turn budget"): `min(maxNewTokens,
 * maxContextLen - prompt)`, or a context error when nothing is left.
 */
export const generationBudget = (
  forest: Forest,
  hash: string,
  maxContextLen: number | null,
  maxNewTokens: number
): Result.Result<number, ContextLengthError> => {
  if (maxContextLen === null) return Result.succeed(maxNewTokens)
  const prompt = trainTokenCount(forest, hash)
  const remaining = maxContextLen - prompt
  if (remaining <= 0) return Result.fail(new ContextLengthError({ limit: maxContextLen, promptTokens: prompt }))
  return Result.succeed(Math.min(maxNewTokens, remaining))
}

// ---------------------------------------------------------------------------------------------------------------
// Matching

/** Where a request attaches: the parent state and the messages after it (the new observation). */
export interface Match {
  /** The state hash the request continues from. */
  readonly parent: string
  /** The request's messages after the matched prefix: the observation delta to commit (may be empty). */
  readonly suffix: ReadonlyArray<Canonical.Message>
  /** True when at least one assistant message matched only by ignoring its missing `reasoning_content`. */
  readonly tolerated: boolean
  /** How many assistant messages matched that way. */
  readonly toleratedTurns: number
}

/**
 * Longest committed prefix of a request's canonical state (docs/sessionforest.md "Matching a request"), with the
 * reasoning tolerance.
 *
 * **Details**
 * Exact rule: the longest k such that (messages[:k], tools, kwargs) is a committed state; nothing → the root.
 * Changed tools or kwargs therefore never match a deeper node and start a new subtree under the root.
 *
 * Tolerance (on unless `strict`): many clients do not send `reasoning_content` back. Where the exact prefix ends
 * just before an assistant message without reasoning that equals a committed response child in everything but
 * its `reasoning_content`, that response is matched and matching continues from it with the committed history
 * (repeatedly, for later turns). Exact matches always win; each tolerated message adds to
 * `forest.toleratedMatches`.
 *
 * Cost: linear in the request's bytes. The request walks down the matching index one message at a time, each
 * message compared structurally with the committed one ({@link Hash.equalJson}: no serializing, no hashing); a
 * vertex with many children looks its candidates up by {@link bucketKey}. A tolerated turn resumes right after the
 * tolerated message, and no index vertex is visited twice in one match. Two bounded exceptions: candidates that
 * share role, text and tool calls are all compared (in practice: responses sampled at one state that differ only
 * in reasoning), and messages are read again after a tolerated turn only when the exact walk had run past the
 * matched state into a longer committed observation repeating that same reasoning-less message (a history
 * committed under strict matching), at most that observation's length.
 */
export const match = (forest: Forest, state: Canonical.State, options: { readonly strict: boolean }): Match => {
  const messages = state.messages
  let parent = forest.root
  let position = 0
  let toleratedTurns = 0
  // `at`: the vertex of `parent` (the context's root vertex until a state matches), `position` messages in.
  let at = findContext(forest, state.tools, state.chat_template_kwargs)
  while (at !== undefined) {
    // Exact rule: follow committed history as far as the request continues it; the deepest state reached wins.
    let vertex = at
    let next = position
    for (let message = messages[next]; message !== undefined; message = messages[next]) {
      const c = child(vertex, message)
      if (c === undefined) break
      vertex = c
      next++
      if (c.state !== undefined) {
        at = c
        parent = c.state.hash
        position = next
      }
    }
    if (options.strict) break
    const message = messages[position]
    if (message?.role !== "assistant" || message.reasoning_content !== undefined) break
    const response = toleratedResponse(forest, at, message)
    if (response === undefined) break
    toleratedTurns++
    at = response.vertex
    parent = response.state
    position++
  }
  forest.toleratedMatches += toleratedTurns
  return { parent, suffix: messages.slice(position), tolerated: toleratedTurns > 0, toleratedTurns }
}

// ---------------------------------------------------------------------------------------------------------------
// Commits

const register = (forest: Forest, n: Node): string => {
  forest.nodeMap.set(n.hash, n)
  markState(forest, n.vertex, n)
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
      if (part["type"] !== "image_url" || !isObject(image)) continue
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
const takeRunning = (forest: Forest, parent: Node): Hash.State => {
  const kept = parent.running
  if (kept !== undefined) {
    parent.running = undefined
    return kept
  }
  const rebuilt = Hash.startState()
  Hash.append(rebuilt, 0, fullMessages(forest, parent.hash))
  return rebuilt
}

// Small shared values: a node keeps no empty array or object of its own, nor a copy of the weight-version list that
// most responses of a process share. All are frozen, so no holder can change them for the others.
const noStrings: ReadonlyArray<string> = Object.freeze([])
const noNumbers: ReadonlyArray<number> = Object.freeze([])
const noIds: PackedIds.PackedIds = new Uint8Array(0)
const noGrids: ReadonlyArray<ImageGrid.Grid> = Object.freeze([])
const noTools: ReadonlyArray<Canonical.Tool> = Object.freeze([])
const noKwargs: Canonical.TemplateKwargs = Object.freeze({})

const orNone = <A>(values: ReadonlyArray<A>): ReadonlyArray<A> =>
  values.length === 0 ? (noStrings as ReadonlyArray<never>) : values

const copyKwargs = (kwargs: Canonical.TemplateKwargs): Canonical.TemplateKwargs =>
  Object.keys(kwargs).length === 0 ? noKwargs : deepCopy(kwargs)

/** Distinct weight-version lists kept for sharing; past this many the table starts over (they change rarely). */
const VERSION_LISTS = 256
const versionLists = new Map<string, ReadonlyArray<string>>()

/** A frozen weight-version list equal to `versions`, shared with every response that has an equal one. */
const sharedVersions = (versions: ReadonlyArray<string>): ReadonlyArray<string> => {
  if (versions.length === 0) return noStrings
  const key = versions.join("\u0000")
  const found = versionLists.get(key)
  if (found !== undefined && found.length === versions.length && found.every((v, i) => v === versions[i])) return found
  if (versionLists.size >= VERSION_LISTS) versionLists.clear()
  const list = Object.freeze([...versions])
  versionLists.set(key, list)
  return list
}

/** Whether every value is exactly a 32-bit float (`-0` and `NaN` included). */
const singles = (values: ReadonlyArray<number>): boolean => {
  for (let i = 0; i < values.length; i++) {
    const x = values[i]!
    if (Math.fround(x) !== x && !Number.isNaN(x)) return false
  }
  return true
}

/**
 * A response's ids and logprobs in one buffer (one allocation, one `ArrayBuffer` instead of two): the logprobs
 * first, as 32-bit floats when every one is exactly a 32-bit float (SGLang's are), else as 64-bit floats, then the
 * ids, packed (src/forest/PackedIds.ts). Either way `logprobs[i]` reads back exactly the number committed (`-0` and
 * `NaN` included) and the ids read back as an `Int32Array` copy of them would.
 */
export const responseArrays = (
  ids: ReadonlyArray<number>,
  logprobs: ReadonlyArray<number>
): { readonly ids: PackedIds.PackedIds; readonly logprobs: Float32Array | Float64Array } => {
  const n = ids.length
  const single = singles(logprobs)
  const width = single ? 4 : 8
  const narrow = PackedIds.fits(ids)
  const buffer = new ArrayBuffer(n * width + PackedIds.byteLength(n, narrow))
  const values = single ? new Float32Array(buffer, 0, n) : new Float64Array(buffer, 0, n)
  values.set(logprobs)
  return { ids: PackedIds.packInto(buffer, n * width, narrow, [ids]), logprobs: values }
}

const existing = (forest: Forest, hash: string, kind: Node["kind"]): string | undefined => {
  const found = forest.nodeMap.get(hash)
  if (found === undefined) return undefined
  if (found.kind !== kind) invariant(forest, `State hash collision with mismatched kinds: ${found.kind} vs ${kind}`)
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
  readonly status: "completed" | "truncated"
  readonly rolloutId: number
  readonly requestId: string
  readonly abortCount: number
  readonly wallElapsedS: number
  readonly generationElapsedS: number
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
 * ({@link checkObservationContext}) first: nothing here rejects a long observation.
 */
export const commitObservation = (forest: Forest, o: ObservationCommit): string => {
  const parent = node(forest, o.parent)
  if (o.messages.length === 0) return parent.hash
  const atRoot = parent.up === null
  if (!atRoot) {
    if (!Hash.equalJson(toolsOf(parent), o.tools)) {
      invariant(forest, `tools changed inside session subtree: ${forest.sessionId}`)
    }
    if (!Hash.equalJson(kwargsOf(forest, parent), o.chatTemplateKwargs)) {
      invariant(forest, `chat template changed inside session subtree: ${forest.sessionId}`)
    }
  }
  const running = takeRunning(forest, parent)
  Hash.append(running, parent.messageCount, o.messages)
  // Deeper than the root, the subtree's own tools and kwargs print as the request's (checked above) and are kept.
  const hash = Hash.finishWith(
    running,
    atRoot
      ? Hash.closing(o.tools, o.chatTemplateKwargs)
      : Hash.closingOfSubtree(toolsOf(parent), kwargsOf(forest, parent))
  )
  const found = existing(forest, hash, "obs")
  if (found !== undefined) return found
  const messages = deepCopy(o.messages)
  const start = atRoot ? contextVertex(forest, o.tools, o.chatTemplateKwargs) : parent.vertex
  const n = new Observation({
    hash,
    up: parent,
    rolloutId: o.rolloutId,
    abortCount: atRoot ? 0 : parent.abortCount,
    messages,
    ids: PackedIds.pack(o.tokens),
    trainIds: o.train === undefined ? undefined : PackedIds.pack(o.train.tokens),
    top: parent.top ?? undefined,
    tokenCount: parent.tokenCount + observationTrainLength(o),
    messageCount: parent.messageCount + messages.length,
    running,
    committed: ++forest.commits,
    vertex: extendVertex(start, messages),
    media: orNone(mediaOf(messages)),
    imageGrids: orNone(o.train?.imageGrids ?? noGrids),
    tools: atRoot ? orNone(deepCopy(o.tools)) : null,
    chatTemplateKwargs: atRoot ? copyKwargs(o.chatTemplateKwargs) : null
  })
  return register(forest, n)
}

/**
 * Commit a finished generation (the assistant message parsed from it and the exact engine output); returns its
 * state hash. Re-committing the same message under the same parent returns the existing response.
 */
export const commitResponse = (forest: Forest, r: ResponseCommit): string => {
  const parent = node(forest, r.parent)
  if (r.logprobs.length !== r.tokens.length) {
    invariant(forest, `response ${r.requestId} has ${r.tokens.length} tokens but ${r.logprobs.length} logprobs`)
  }
  const running = takeRunning(forest, parent)
  Hash.append(running, parent.messageCount, [r.message])
  const hash = Hash.finishWith(running, Hash.closingOfSubtree(toolsOf(parent), kwargsOf(forest, parent)))
  const found = existing(forest, hash, "resp")
  if (found !== undefined) {
    const committed = node(forest, found)
    if (committed.kind === "resp" && committed.requestId !== r.requestId) {
      forest.retries ??= new Map()
      forest.retries.set(r.requestId, found)
    } else forest.retries?.delete(r.requestId)
    return found
  }
  const message = deepCopy(r.message)
  // Generated ids are trained as they are.
  const { ids, logprobs } = responseArrays(r.tokens, r.logprobs)
  const n = new Response({
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
    vertex: extendVertex(parent.vertex, [message]),
    message,
    logprobs,
    weightVersions: sharedVersions(r.weightVersions),
    attemptLengths: r.attemptLengths !== undefined && r.attemptLengths.length > 1 ? [...r.attemptLengths] : noNumbers,
    status: r.status,
    requestId: r.requestId,
    wallElapsedS: r.wallElapsedS,
    generationElapsedS: r.generationElapsedS
  })
  forest.retries?.delete(r.requestId)
  return register(forest, n)
}

// ---------------------------------------------------------------------------------------------------------------
// Export

/** One context selected for training: which state, with which export metadata overlay and reward. */
export interface ExportedContext {
  /** The explicit record's name, or null for an implicit export. */
  readonly name: string | null
  readonly hash: string
  /** Metadata to merge over the Session's metadata in the sample. */
  readonly metadata: JsonObject
  readonly reward: Reward
}

const hasResponse = (forest: Forest, hash: string): boolean => {
  for (let at: Node | null = node(forest, hash); at !== null; at = at.up) if (at.kind === "resp") return true
  return false
}

const TRACE_KEY = "agentic_trace"

const mergeTrace = (base: Json | undefined, overlay: Json): Json => {
  if (!isObject(base) || !isObject(overlay)) return deepCopy(overlay)
  const out: Record<string, Json> = { ...deepCopy(base) }
  for (const [key, value] of Object.entries(overlay)) out[key] = mergeTrace(out[key], value)
  return out
}

/**
 * Overlay export metadata (reference `_merge_export_metadata`): keys overwrite, except `agentic_trace`, which is
 * merged recursively.
 */
export const mergeMetadata = (target: JsonObject, overlay: JsonObject): JsonObject => {
  const out: Record<string, Json> = { ...deepCopy(target) }
  for (const [key, value] of Object.entries(overlay)) {
    out[key] = key === TRACE_KEY ? mergeTrace(out[key], value) : deepCopy(value)
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
  forest: Forest,
  output: { readonly metadata?: JsonObject; readonly reward?: Reward }
): Result.Result<ReadonlyArray<ExportedContext>, ExportError> => {
  const exportable = [...forest.leafSet].filter((leaf) => hasResponse(forest, leaf))
  const [leaf] = exportable
  if (exportable.length !== 1 || leaf === undefined) {
    return Result.fail(
      new ExportError({
        reason: "leaf-count",
        message: `implicit export requires one committed leaf, found ${exportable.length}`,
        sessionId: forest.sessionId,
        record: null
      })
    )
  }
  return Result.succeed([{ name: null, hash: leaf, metadata: deepCopy(output.metadata ?? {}), reward: output.reward ?? null }])
}

/**
 * Explicit export: one context per record, each naming a committed state by its full conversation.
 *
 * **Details**
 * A record's state is (its canonical messages, its tools or `[]`, the base kwargs overlaid with its kwargs). It
 * must be committed (`"explicit export does not match a committed Forest state"`) and hold a response in its
 * lineage (`"export leaf has no committed response"`); it need not be a leaf. Unless `strict`, a record whose
 * assistant messages lack the `reasoning_content` the forest committed also selects that state (the same
 * tolerance as {@link match}). Metadata = output metadata overlaid with the record's; reward = the record's.
 */
export const exportExplicit = (
  forest: Forest,
  records: ReadonlyArray<{
    readonly name: string
    readonly messages: unknown
    readonly tools?: unknown
    readonly chat_template_kwargs?: unknown
    readonly metadata?: JsonObject
    readonly reward?: Reward
  }>,
  outputMetadata?: JsonObject,
  options?: { readonly strict?: boolean }
): Result.Result<ReadonlyArray<ExportedContext>, ExportError> => {
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
      return Result.fail(new ExportError({
        reason: "invalid-record",
        message: `export record ${i} (${record.name}): ${state.failure.message}`,
        sessionId: forest.sessionId,
        record: record.name
      }))
    }
    let hash = Hash.ofState(state.success)
    if (!forest.nodeMap.has(hash) && options?.strict !== true && state.success.messages.length > 0) {
      const tolerant = match(forest, state.success, { strict: false })
      if (tolerant.tolerated && tolerant.suffix.length === 0) hash = tolerant.parent
    }
    if (!forest.nodeMap.has(hash)) {
      return Result.fail(new ExportError({
        reason: "no-matching-state",
        message: "explicit export does not match a committed Forest state",
        sessionId: forest.sessionId,
        record: record.name
      }))
    }
    if (!hasResponse(forest, hash)) {
      return Result.fail(new ExportError({
        reason: "no-response",
        message: "export leaf has no committed response",
        sessionId: forest.sessionId,
        record: record.name
      }))
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
