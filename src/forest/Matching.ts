/**
 * Matching a request against a SessionForest (docs/sessionforest.md "Matching a request"): the longest committed
 * prefix of its canonical state, with the reasoning tolerance.
 *
 * **Details**
 * {@link match} walks the forest's message-level index (src/forest/MatchIndex.ts) one request message at a time from
 * the root vertex of the request's context (its tools and template kwargs), or from a state the request is known to
 * repeat ({@link KnownState}, src/protocol/RawEcho.ts). The forest itself (nodes, queries) is src/forest/Forest.ts;
 * the commits that add to the index are src/forest/Commit.ts.
 */
import type * as Canonical from "../protocol/Canonical.ts"
import * as Forest from "./Forest.ts"
import * as MatchIndex from "./MatchIndex.ts"
import * as StateHash from "./StateHash.ts"

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
 * message compared structurally with the committed one ({@link StateHash.equalJson}: no serializing, no hashing); a
 * vertex with many children looks its candidates up by a bucket key (src/forest/MatchIndex.ts). A tolerated turn resumes right after the
 * tolerated message, and no index vertex is visited twice in one match. Two bounded exceptions: candidates that
 * share role, text and tool calls are all compared (in practice: responses sampled at one state that differ only
 * in reasoning), and messages are read again after a tolerated turn only when the exact walk had run past the
 * matched state into a longer committed observation repeating that same reasoning-less message (a history
 * committed under strict matching), at most that observation's length.
 *
 * `known` (a request that repeated the previous one's history byte for byte, src/protocol/RawEcho.ts): the request's
 * first messages are a committed state's own message objects, so the walk begins at that state instead of the
 * context's root, with the same result; anything else about it (another state, other objects, another context) is
 * ignored and the walk begins at the root.
 */
export const match = (
  forest: Forest.Forest,
  state: Canonical.State,
  options: { readonly strict: boolean; readonly known?: KnownState | undefined }
): Match => {
  const messages = state.messages
  let parent = forest.root
  let position = 0
  let toleratedTurns = 0
  // `at`: the vertex of `parent` (the context's root vertex until a state matches), `position` messages in.
  let at = MatchIndex.findContext(forest.contexts, state.tools, state.chat_template_kwargs)
  const start = at === undefined || options.known === undefined ? undefined : knownStart(forest, state, options.known)
  if (start !== undefined) {
    // The exact walk from the context's root would follow these messages to `start` (they are its own): begin there.
    at = start.vertex
    parent = start.hash
    position = start.messageCount
  }
  while (at !== undefined) {
    // Exact rule: follow committed history as far as the request continues it; the deepest state reached wins.
    let vertex = at
    let next = position
    for (let message = messages[next]; message !== undefined; message = messages[next]) {
      const c = MatchIndex.child(vertex, message)
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
    const response = MatchIndex.toleratedResponse(at, message)
    if (response === undefined) break
    toleratedTurns++
    at = response.vertex
    parent = response.state
    position++
  }
  forest.toleratedMatches += toleratedTurns
  return { parent, suffix: messages.slice(position), tolerated: toleratedTurns > 0, toleratedTurns }
}

/**
 * A committed state whose full messages the request's first `messages` messages are known to be (src/protocol/RawEcho.ts:
 * the request repeated the previous one's history byte for byte, and reused that state's messages).
 */
export interface KnownState {
  readonly state: string
  readonly messages: number
}

/**
 * The node `known` names, when the request's first `known.messages` messages are that node's full messages, the very
 * objects (checked one by one along the lineage: no comparing, no hashing), and its context is the request's; otherwise
 * `undefined` and matching walks from the context's root.
 */
const knownStart = (forest: Forest.Forest, state: Canonical.State, known: KnownState): Forest.Node | undefined => {
  const n = forest.nodeMap.get(known.state)
  if (n === undefined || n.messageCount !== known.messages || known.messages > state.messages.length) return undefined
  if (
    !StateHash.equalJson(Forest.toolsOf(n), state.tools) ||
    !StateHash.equalJson(Forest.kwargsOf(forest, n), state.chat_template_kwargs)
  ) {
    return undefined
  }
  return Forest.startsWithMessagesOf(forest, n, state.messages) ? n : undefined
}
