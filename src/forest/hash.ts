/**
 * SessionForest state hashes, identical to the reference, and the incremental keys that make matching linear.
 *
 * **Details**
 * A state hash is SHA-256 hex of Python's
 * `json.dumps({"messages": M, "tools": T, "template_kwargs": K}, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`
 * (relax-behaviour §5.3). With sorted keys the payload is `{"messages":[m1,…,mk],"template_kwargs":K,"tools":T}`,
 * so a running SHA-256 over `{"messages":[m1,…,mk` can be copied and finished for any prefix: {@link prefixHashes}
 * yields the hash of every prefix in one pass over the bytes.
 *
 * Matching a request needs no reference hash at all: the forest also keys every committed state by
 * ({@link contextKey} of T,K, {@link chainStep} chain over per-message digests). A request hashes each of its
 * messages once (O(total bytes)); extending the chain from any node costs O(1) per message, so even the
 * reasoning-tolerant match, which restarts from a committed response, stays linear in the request's bytes.
 * Both keys are functions of (messages[:k], T, K) exactly as the reference hash is, so "prefix k is committed"
 * has the same answer under either (tests check the equivalence).
 */
import { createHash, type Hash } from "node:crypto"
import type * as Canonical from "../protocol/canonical.ts"
import * as PythonJson from "./PythonJson.ts"

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")

/** Python `json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`. */
export const pythonJson = (value: Canonical.Json): string => PythonJson.dumpsJs(value)

const messageJson = (message: Canonical.Message): string => PythonJson.dumpsJs(message)

const closing = (tools: ReadonlyArray<Canonical.Tool>, kwargs: Canonical.TemplateKwargs): string =>
  `],"template_kwargs":${PythonJson.dumpsJs(kwargs)},"tools":${PythonJson.dumpsJs(tools)}}`

/**
 * A running reference hash: SHA-256 over `{"messages":[m1,…,mk` for a committed message list.
 * Never mutated after creation; {@link extend} and {@link finish} work on copies.
 */
export interface Running {
  readonly hash: Hash
  readonly count: number
}

/** The running hash of the empty message list. */
export const start = (): Running => ({ hash: createHash("sha256").update("{\"messages\":[", "utf8"), count: 0 })

/** The running hash after appending `messages`. */
export const extend = (running: Running, messages: ReadonlyArray<Canonical.Message>): Running => {
  const hash = running.hash.copy()
  let count = running.count
  for (const message of messages) {
    hash.update(count === 0 ? messageJson(message) : `,${messageJson(message)}`, "utf8")
    count++
  }
  return { hash, count }
}

/** The reference state hash of the running messages with these tools and template kwargs. */
export const finish = (
  running: Running,
  tools: ReadonlyArray<Canonical.Tool>,
  kwargs: Canonical.TemplateKwargs
): string => running.hash.copy().update(closing(tools, kwargs), "utf8").digest("hex")

/** The reference state hash of a canonical state (relax-behaviour §5.3). */
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

/** SHA-256 of one message's Python JSON: the unit of the matching chain. */
export const messageDigest = (message: Canonical.Message): string => sha256(messageJson(message))

/** Digest of (tools, template kwargs): which subtree a state can belong to. */
export const contextKey = (tools: ReadonlyArray<Canonical.Tool>, kwargs: Canonical.TemplateKwargs): string =>
  sha256(`{"template_kwargs":${PythonJson.dumpsJs(kwargs)},"tools":${PythonJson.dumpsJs(tools)}}`)

/** The chain value of the empty message list. */
export const chainRoot: string = sha256("")

/** The chain value after one more message (given by its {@link messageDigest}); constant cost. */
export const chainStep = (chain: string, digest: string): string => sha256(`${chain}${digest}`)
