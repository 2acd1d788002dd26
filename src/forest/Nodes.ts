/**
 * The SessionForest's node classes and the shared values they point at.
 *
 * **Details**
 * Nodes are a Session's bulk in memory (docs/performance.md, section 3), so they are kept lean: getters on the
 * prototype for what can be derived (`kind`, `parent`, `subtree`, a response's `messages`), ids packed in 3 bytes
 * of a one-byte string (src/ids/PackedIds.ts) and read through `Forest.unpackTokens` / `Forest.unpackTrainTokens`, a
 * response's logprobs as the bytes of a one-byte string too ({@link packLogprobs}, the array made on read), and empty
 * values and weight-version lists shared between nodes.
 */
import { Buffer } from "node:buffer"
import * as PackedIds from "../ids/PackedIds.ts"
import type * as Canonical from "../protocol/Canonical.ts"
import type * as ImageGrid from "../template/ImageGrid.ts"
import type * as Forest from "./Forest.ts"
import type * as MatchIndex from "./MatchIndex.ts"
import type * as StateHash from "./StateHash.ts"

/** The fields every node stores, as a node's constructor receives them. */
type SharedInit = Pick<
  Forest.ObservationNode,
  "hash" | "rolloutId" | "abortCount" | "ids" | "tokenCount" | "messageCount" | "running" | "committed" | "vertex"
>

/**
 * What both node classes share: the fields every node stores, copied one by one (a class with fixed fields, not a
 * spread: nodes are the forest's bulk), and `subtree`, read from the prototype.
 */
abstract class StoredNode {
  readonly hash: string
  readonly rolloutId: number
  readonly abortCount: number
  readonly ids: PackedIds.PackedIds
  readonly tokenCount: number
  readonly messageCount: number
  running: StateHash.State | undefined
  readonly committed: number
  readonly vertex: MatchIndex.Vertex
  abstract readonly top: Forest.ObservationNode | null
  constructor(init: SharedInit) {
    this.hash = init.hash
    this.rolloutId = init.rolloutId
    this.abortCount = init.abortCount
    this.ids = init.ids
    this.tokenCount = init.tokenCount
    this.messageCount = init.messageCount
    this.running = init.running
    this.committed = init.committed
    this.vertex = init.vertex
  }
  get subtree(): string | null {
    return this.top === null ? null : this.top.hash
  }
}

/**
 * The stored form of an observation node. Nodes are the forest's bulk, so they are kept lean: `kind`, `parent` and
 * `subtree` are read from the prototype, the ids stay packed (`Forest.unpackTokens` copies them out), and nothing is
 * kept twice.
 */
export class Observation extends StoredNode implements Forest.ObservationNode {
  readonly up: Forest.Node | null
  readonly messages: ReadonlyArray<Canonical.Message>
  /** The training ids when they differ from `ids` (images expanded for training). */
  readonly trainIds: PackedIds.PackedIds | undefined
  readonly top: Forest.ObservationNode | null
  readonly media: ReadonlyArray<string>
  readonly imageGrids: ReadonlyArray<ImageGrid.Grid>
  readonly tools: ReadonlyArray<Canonical.Tool> | null
  readonly chatTemplateKwargs: Canonical.TemplateKwargs | null
  /** `init.top` undefined: this observation is a subtree root (its own `top`). */
  constructor(
    init: Omit<Forest.ObservationNode, "kind" | "parent" | "subtree" | "top"> & {
      readonly top: Forest.ObservationNode | null | undefined
    }
  ) {
    super(init)
    this.up = init.up
    this.messages = init.messages
    this.trainIds = init.trainIds
    this.top = init.top === undefined ? this : init.top
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
}

/** The stored form of a response node (see {@link Observation}); `messages` is `[message]`, made on read. */
export class Response extends StoredNode implements Forest.ResponseNode {
  readonly up: Forest.Node
  readonly message: Canonical.Message
  /** The logprobs' bytes ({@link packLogprobs}); {@link logprobs} reads them. */
  readonly logprobText: string
  readonly top: Forest.ObservationNode | null
  readonly weightVersions: ReadonlyArray<string>
  readonly attemptLengths: ReadonlyArray<number>
  readonly movedAttempts: ReadonlyArray<Forest.MovedAttempt>
  /** Set only with routing replay (see {@link Forest.ResponseNode.routedExperts}): other nodes carry no slot for it. */
  declare readonly routedExperts?: RoutedExperts
  /** Set only with versioned LoRA: other nodes carry no slot for it. */
  declare readonly loraVersions?: ReadonlyArray<string>
  readonly status: "completed" | "truncated"
  readonly requestId: string
  readonly wallElapsedS: number
  readonly generationElapsedS: number
  readonly cachedTokens: number | undefined
  readonly promptTokens: number | undefined
  constructor(
    init: Omit<Forest.ResponseNode, "kind" | "messages" | "parent" | "subtree" | "up" | "logprobs"> & {
      readonly up: Forest.Node
      readonly logprobText: string
    }
  ) {
    super(init)
    this.up = init.up
    this.message = init.message
    this.logprobText = init.logprobText
    this.top = init.top
    this.weightVersions = init.weightVersions
    this.attemptLengths = init.attemptLengths
    this.movedAttempts = init.movedAttempts
    if (init.routedExperts !== undefined) {
      Object.defineProperty(this, "routedExperts", { value: init.routedExperts, enumerable: true })
    }
    if (init.loraVersions !== undefined) {
      Object.defineProperty(this, "loraVersions", { value: init.loraVersions, enumerable: true })
    }
    this.status = init.status
    this.requestId = init.requestId
    this.wallElapsedS = init.wallElapsedS
    this.generationElapsedS = init.generationElapsedS
    this.cachedTokens = init.cachedTokens
    this.promptTokens = init.promptTokens
  }
  get kind(): "resp" {
    return "resp"
  }
  get parent(): string {
    return this.up.hash
  }
  get messages(): ReadonlyArray<Canonical.Message> {
    return [this.message]
  }
  /** The logprobs ({@link packLogprobs}), an array made on read: read it once. */
  get logprobs(): Float32Array | Float64Array {
    return logprobsOf(this.logprobText, PackedIds.length(this.ids))
  }
}

// Small shared values: a node keeps no empty array or object of its own, nor a copy of the weight-version list that
// most responses of a process share. All are frozen, so no holder can change them for the others.
export const noStrings: ReadonlyArray<string> = Object.freeze([])
export const noNumbers: ReadonlyArray<number> = Object.freeze([])

/** The moved attempts of a response none of whose attempts moved (shared). */
export const noMoves: ReadonlyArray<Forest.MovedAttempt> = Object.freeze([])
export const noIds: PackedIds.PackedIds = ""
export const noGrids: ReadonlyArray<ImageGrid.Grid> = Object.freeze([])
export const noTools: ReadonlyArray<Canonical.Tool> = Object.freeze([])
export const noKwargs: Canonical.TemplateKwargs = Object.freeze({})

export const orNone = <A>(values: ReadonlyArray<A>): ReadonlyArray<A> =>
  values.length === 0 ? (noStrings as ReadonlyArray<never>) : values

/** Distinct weight-version lists kept for sharing; past this many the table starts over (they change rarely). */
const VERSION_LISTS = 256
const versionLists = new Map<string, ReadonlyArray<string>>()

/** A frozen weight-version list equal to `versions`, shared with every response that has an equal one. */
export const sharedVersions = (versions: ReadonlyArray<string>): ReadonlyArray<string> => {
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
 * A response's logprobs as a one-byte string of their bytes: 32-bit floats (4 chars each) when every one is exactly a
 * 32-bit float (SGLang's are), else 64-bit floats (8 chars). A string's header is 16 bytes, a typed array's objects
 * ~184 (src/ids/PackedIds.ts). {@link logprobsOf} reads back exactly the numbers committed (`-0` and `NaN` included).
 */
export const packLogprobs = (logprobs: ReadonlyArray<number>): string => {
  const n = logprobs.length
  if (n === 0) return ""
  const width = singles(logprobs) ? 4 : 8
  const bytes = n * width
  if (bytes > floats.bytes.length) {
    const grown = floatViews(Math.max(bytes, 2 * floats.bytes.length))
    if (grown.bytes.length > FLOATS_LIMIT) return writeFloats(grown, logprobs, width)
    floats = grown
  }
  return writeFloats(floats, logprobs, width)
}

/** The floats written into `views` as `width`-byte floats, read out as a one-byte string of their bytes. */
const writeFloats = (views: FloatViews, logprobs: ReadonlyArray<number>, width: 4 | 8): string => {
  const n = logprobs.length
  const values = width === 4 ? views.single : views.double
  for (let i = 0; i < n; i++) values[i] = logprobs[i]!
  return views.bytes.toString("latin1", 0, n * width)
}

/** One buffer seen as 32-bit floats, 64-bit floats and bytes. */
interface FloatViews {
  readonly single: Float32Array
  readonly double: Float64Array
  readonly bytes: Buffer
}

const floatViews = (byteLength: number): FloatViews => {
  const buffer = new ArrayBuffer(byteLength)
  return { single: new Float32Array(buffer), double: new Float64Array(buffer), bytes: Buffer.from(buffer) }
}

// Where packLogprobs writes the floats before they become a string: reused (grown up to this size), so packing a
// response's logprobs allocates only the string, not a typed array, its buffer and two views as before (~0.8 µs of a
// request; docs/performance.md, "Issue 41, seventh pass"). A longer response's floats get a buffer of their own.
const FLOATS_LIMIT = 1 << 20
let floats = floatViews(4096)

/** The `count` logprobs {@link packLogprobs} wrote in `text` (4 chars each, or 8). */
export const logprobsOf = (text: string, count: number): Float32Array | Float64Array => {
  // A buffer of its own (not the pool's slices): its offset 0 is aligned for the floats.
  const bytes = Buffer.allocUnsafeSlow(text.length)
  bytes.write(text, 0, text.length, "latin1")
  return count > 0 && text.length === count * 8
    ? new Float64Array(bytes.buffer, 0, count)
    : new Float32Array(bytes.buffer, 0, text.length / 4)
}

/** A response's MoE routing: `width` (`layers × topk`) expert ids per token, token after token. */
export interface RoutedExperts {
  readonly width: number
  readonly ids: Int32Array
}

/** Pack one row of expert ids per token into {@link RoutedExperts} (rows of one width, as SGLang returns them). */
export const packRoutedExperts = (rows: ReadonlyArray<ReadonlyArray<number>>): RoutedExperts => {
  const width = rows[0]?.length ?? 0
  const ids = new Int32Array(rows.length * width)
  rows.forEach((row, i) => ids.set(row, i * width))
  return { width, ids }
}

/** Token `i`'s expert ids. */
export const routedExpertsOf = (routed: RoutedExperts, i: number): Array<number> =>
  Array.from(routed.ids.subarray(i * routed.width, (i + 1) * routed.width))
