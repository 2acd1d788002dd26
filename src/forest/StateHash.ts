/**
 * SessionForest state hashes, identical to the reference, and the state identity that makes matching linear.
 *
 * **Details**
 * A state hash is SHA-256 hex of Python's
 * `json.dumps({"messages": M, "tools": T, "template_kwargs": K}, ensure_ascii=False, separators=(",", ":"),
 * sort_keys=True)` (docs/sessionforest.md "State hashes"). With sorted keys the payload is
 * `{"messages":[m1,…,mk],"template_kwargs":K,"tools":T}`, so a running SHA-256 over `{"messages":[m1,…,mk` can be
 * copied and finished for any prefix: {@link prefixHashes} yields the hash of every prefix in one pass over the bytes.
 *
 * Matching a request needs no hash at all: the hash is a function of the Python JSON text of (M, T, K), and
 * {@link equalJson} decides "same Python JSON text" structurally, without serializing. The forest compares a
 * request's messages against its committed ones with it, one message at a time (see `Matching.match`).
 */
import { createHash, type Hash } from "node:crypto"
import * as PythonJson from "../json/PythonJson.ts"
import type * as Canonical from "../protocol/Canonical.ts"

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")

/** Python `json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`. */
export const pythonJson = (value: Canonical.Json): string => PythonJson.dumpsJs(value)

const messageJson = (message: Canonical.Message): string => PythonJson.dumpsJs(message)

/** What follows the messages in a state's hashed text: `],"template_kwargs":K,"tools":T}`. */
export const closing = (tools: ReadonlyArray<Canonical.Tool>, kwargs: Canonical.TemplateKwargs): string =>
  `],"template_kwargs":${PythonJson.dumpsJs(kwargs)},"tools":${PythonJson.dumpsJs(tools)}}`

/**
 * Printed closings of tool lists, by the list (a subtree's own copy, which never changes) and its kwargs object: a
 * Session's commits print the same tools again and again, and a tool list is often kilobytes. Only lists with tools
 * are kept, and only while their list is alive.
 */
const closings = new WeakMap<object, { readonly kwargs: Canonical.TemplateKwargs; readonly text: string }>()

/**
 * {@link closing} of a subtree's own tools and kwargs (objects that are never changed), printed once per list and
 * kept while the list lives.
 */
export const closingOfSubtree = (tools: ReadonlyArray<Canonical.Tool>, kwargs: Canonical.TemplateKwargs): string => {
  if (tools.length === 0) return closing(tools, kwargs)
  const kept = closings.get(tools)
  if (kept !== undefined && kept.kwargs === kwargs) return kept.text
  const text = closing(tools, kwargs)
  closings.set(tools, { kwargs, text })
  return text
}

/**
 * A running reference hash: SHA-256 over `{"messages":[m1,…,mk` for a committed message list.
 * Never mutated after creation; {@link extend} and {@link finish} work on copies.
 */
export interface Running {
  readonly hash: Hash
  readonly count: number
}

/** The running hash of the empty message list. */
export const start = (): Running => ({ hash: startState(), count: 0 })

/** The running hash after appending `messages`. */
export const extend = (running: Running, messages: ReadonlyArray<Canonical.Message>): Running => {
  const hash = running.hash.copy()
  append(hash, running.count, messages)
  return { hash, count: running.count + messages.length }
}

/** The reference state hash of the running messages with these tools and template kwargs. */
export const finish = (
  running: Running,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): string => finishState(running.hash, tools, kwargs)

/** A SHA-256 state over `{"messages":[m1,…,mk`, owned by whoever holds it and extended in place by {@link append}. */
export type State = Hash

/** A bare SHA-256 state over `{"messages":[` (no message yet), for {@link append}. */
export const startState = (): State => createHash("sha256").update("{\"messages\":[", "utf8")

/**
 * Append `messages` to a SHA-256 state over `{"messages":[m1,…,mk` that already holds `count` messages, in place:
 * the caller owns `state` (the forest keeps one per leaf and hands it on to the leaf's child).
 */
export const append = (state: State, count: number, messages: ReadonlyArray<Canonical.Message>): void => {
  let k = count
  for (const message of messages) {
    state.update(k === 0 ? messageJson(message) : `,${messageJson(message)}`, "utf8")
    k++
  }
}

/** The reference state hash of a SHA-256 state over `{"messages":[m1,…,mk` with these tools and kwargs; `state` is left as it was. */
export const finishState = (
  state: State,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): string => finishWith(state, closing(tools, kwargs))

/** {@link finishState} with the {@link closing} text already printed. */
export const finishWith = (state: State, closingText: string): string =>
  state.copy().update(closingText, "utf8").digest("hex")

/** The reference state hash of a canonical state (docs/sessionforest.md "State hashes"). */
export const ofState = (state: Canonical.State): string =>
  sha256(`{"messages":[${state.messages.map(messageJson).join(",")}${closing(state.tools, state.chat_template_kwargs)}`)

/**
 * The reference hash of `messages[:k]` (with the state's tools and kwargs) for k = 1..n, in one pass.
 *
 * **Details**
 * Cost: every message byte is hashed once, plus one tools+kwargs tail per prefix.
 */
export const prefixHashes = (state: Canonical.State): ReadonlyArray<string> => {
  const tail = closing(state.tools, state.chat_template_kwargs)
  const running = createHash("sha256").update("{\"messages\":[", "utf8")
  return state.messages.map((message, k) => {
    running.update(k === 0 ? messageJson(message) : `,${messageJson(message)}`, "utf8")
    return running.copy().update(tail, "utf8").digest("hex")
  })
}

/**
 * Whether two JSON values print the same {@link pythonJson} text, decided without printing them.
 *
 * **Details**
 * Python JSON text is injective up to what `json.dumps` cannot tell apart, and so is this: key order, keys whose
 * value is `undefined` (dropped), `-0` and `0`, and `null` / `undefined` elsewhere. Equal text means equal state
 * hashes. The cost is at most the size of the smaller value, and a difference usually shows at its first key.
 */
export const equalJson = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a === "object" && typeof b === "object" && a !== null && b !== null) {
    if (Array.isArray(a)) {
      if (!Array.isArray(b) || a.length !== b.length) return false
      for (let i = 0; i < a.length; i++) if (!equalJson(a[i], b[i])) return false
      return true
    }
    if (Array.isArray(b)) return false
    return equalObjects(a as Readonly<Record<string, unknown>>, b as Readonly<Record<string, unknown>>)
  }
  if (a === null || a === undefined) return b === null || b === undefined
  if (b === null || b === undefined) return false
  if (typeof a === "number" && typeof b === "number") return Number.isNaN(a) && Number.isNaN(b)
  if (typeof a === "string" || typeof a === "boolean" || typeof a === "number") {
    return typeof b === "object" || typeof b === "string" || typeof b === "boolean" || typeof b === "number"
      ? false
      : PythonJson.dumpsJs(a) === PythonJson.dumpsJs(b)
  }
  if (typeof a !== "object" || typeof b !== "object") return PythonJson.dumpsJs(a) === PythonJson.dumpsJs(b)
  return false
}

/** Inside `for … in`, V8 answers `hasOwnProperty.call(object, key)` from the enum cache (not `Object.hasOwn`). */
const hasOwnProperty = Object.prototype.hasOwnProperty

/**
 * The object case of {@link equalJson}: the own enumerable keys with a defined value, walked with `for … in` (no
 * key arrays; the own-property check keeps out inherited keys, as `Object.keys` would).
 */
const equalObjects = (a: Readonly<Record<string, unknown>>, b: Readonly<Record<string, unknown>>): boolean => {
  let keys = 0
  for (const key in a) {
    if (!hasOwnProperty.call(a, key)) continue
    const value = a[key]
    if (value === undefined) continue
    keys++
    const other = b[key]
    if (other === undefined || !hasOwnProperty.call(b, key) || !equalJson(value, other)) return false
  }
  for (const key in b) if (hasOwnProperty.call(b, key) && b[key] !== undefined) keys--
  return keys === 0
}
