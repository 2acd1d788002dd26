/**
 * The SessionForest's matching index: every committed message boundary, per tools/kwargs context.
 *
 * **Details**
 * Beside the tree of states (src/forest/Forest.ts), each tools/kwargs context has a tree of {@link Vertex}es, one per
 * distinct committed message prefix; the vertex where a node's messages end points at that node. `Matching.match` walks
 * it one message at a time, comparing each message structurally with the committed one ({@link StateHash.equalJson}: no
 * serializing, no hashing); a vertex with many children looks its candidates up by a bucket key.
 */
import * as Canonical from "../protocol/Canonical.ts"
import type * as Forest from "./Forest.ts"
import * as ForestError from "./ForestError.ts"
import * as StateHash from "./StateHash.ts"

/**
 * One message boundary of committed history, in one tools/kwargs context: the matching index.
 *
 * **Details**
 * A vertex stands for (context, messages[:k]) up to {@link StateHash.equalJson}, so it is shared by every committed state
 * with that prefix and its children are the distinct messages committed after it. Equal (context, messages) means an
 * equal state hash, so a vertex carries at most one state: the node whose messages end there.
 */
export interface Vertex {
  /** The message on the edge into this vertex (null for a context's root). */
  readonly message: Canonical.Message | null
  /** The committed state ending here, if any. */
  state: Forest.Node | undefined
  /**
   * Child vertices in creation order: none, the only one (most vertices: a conversation continues one way), an
   * array once there are two, and a {@link Fanout} once there are many (sampled alternatives). No empty array is
   * kept per vertex: an array that grows by `push` reserves many slots for its first element
   * (docs/performance.md, "Figures behind code comments").
   */
  children: Vertex | Array<Vertex> | Fanout | undefined
}

/** The children of a vertex with many of them, also grouped by {@link bucketKey}. */
export class Fanout {
  readonly all: Array<Vertex>
  readonly index: Map<string, Array<Vertex>>

  constructor(all: Array<Vertex>, index: Map<string, Array<Vertex>>) {
    this.all = all
    this.index = index
  }
}

/** The root vertex of one tools/kwargs context (each context starts its own subtrees). */
export interface ContextRoot {
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly kwargs: Canonical.TemplateKwargs
  readonly vertex: Vertex
}

/** A forest's contexts: context fingerprint → the contexts' root vertices (see {@link findContext}). */
export type Contexts = Map<string, Array<ContextRoot>>

/** Children a vertex scans directly; above this many it keeps a {@link bucketKey} index. */
const SCAN_LIMIT = 8

export const newVertex = (message: Canonical.Message | null): Vertex => ({
  message,
  state: undefined,
  children: undefined
})

/** Cheap grouping of a context (tool names and kwargs); equal contexts have equal fingerprints. */
const contextFingerprint = (tools: ReadonlyArray<Canonical.Tool>, kwargs: Canonical.TemplateKwargs): string =>
  `${tools.map((tool) => tool.function.name).join("\u0000")}\u0001${StateHash.pythonJson(kwargs)}`

/** Up to this many fingerprints, {@link findContext} compares every context instead of printing a fingerprint. */
const CONTEXT_SCAN_LIMIT = 4

/**
 * The root vertex of a tools/kwargs context, if any state was committed in it.
 *
 * **Details**
 * Most forests hold one context, which the request's must equal in full anyway: while there are few, they are
 * compared directly (a difference usually shows in the first tool), without printing the request's fingerprint.
 */
export const findContext = (
  contexts: Contexts,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Vertex | undefined => {
  const sameContext = (c: ContextRoot) => StateHash.equalJson(c.tools, tools) && StateHash.equalJson(c.kwargs, kwargs)
  if (contexts.size <= CONTEXT_SCAN_LIMIT) {
    for (const group of contexts.values()) for (const c of group) if (sameContext(c)) return c.vertex
    return undefined
  }
  return contexts.get(contextFingerprint(tools, kwargs))?.find(sameContext)?.vertex
}

/** The root vertex of a tools/kwargs context, created on first use. */
export const contextVertex = (
  contexts: Contexts,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): Vertex => {
  const found = findContext(contexts, tools, kwargs)
  if (found !== undefined) return found
  const context: ContextRoot = { tools, kwargs, vertex: newVertex(null) }
  const fingerprint = contextFingerprint(tools, kwargs)
  const group = contexts.get(fingerprint)
  if (group === undefined) contexts.set(fingerprint, [context])
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
export const child = (vertex: Vertex, message: Canonical.Message): Vertex | undefined => {
  const children = vertex.children
  if (children === undefined) return undefined
  if (!Array.isArray(children) && !(children instanceof Fanout)) {
    return StateHash.equalJson(children.message, message) ? children : undefined
  }
  for (const c of candidates(vertex, message)) if (StateHash.equalJson(c.message, message)) return c
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
export const extendVertex = (vertex: Vertex, messages: ReadonlyArray<Canonical.Message>): Vertex =>
  messages.reduce((at, message) => child(at, message) ?? addChild(at, message), vertex)

/** Mark `n` as the state ending at `vertex` (a different state already there is an invariant break). */
export const markState = (sessionId: string, vertex: Vertex, n: Forest.Node): void => {
  if (vertex.state !== undefined && vertex.state.hash !== n.hash) {
    throw new ForestError.ForestInvariantError({
      detail: `states ${vertex.state.hash} and ${n.hash} have equal messages, tools and kwargs but differ in hash`,
      sessionId
    })
  }
  vertex.state = n
}

/**
 * The response child of the state at `vertex` that equals `message` but for the `reasoning_content` the request
 * dropped; the latest committed one if several differ only in reasoning (the agent continues from the response
 * it received last).
 */
export const toleratedResponse = (
  vertex: Vertex,
  message: Canonical.Message
): { readonly vertex: Vertex; readonly state: string } | undefined => {
  let best: { readonly vertex: Vertex; readonly state: string; readonly committed: number } | undefined
  for (const c of candidates(vertex, message)) {
    const state = c.state
    if (state === undefined || c.message?.reasoning_content === undefined) continue
    if (best !== undefined && best.committed > state.committed) continue
    if (state.kind !== "resp") continue
    if (StateHash.equalJson(Canonical.withoutReasoning(c.message), message)) {
      best = { vertex: c, state: state.hash, committed: state.committed }
    }
  }
  return best
}
