/**
 * Synthetic agent conversations for the benchmarks: a system prompt, a task, then tool-calling turns
 * (assistant with reasoning and one `read_file` call, tool result), deterministic and canonical.
 */
import { Result } from "effect"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"

const words = [
  "the",
  "function",
  "returns",
  "value",
  "when",
  "parser",
  "token",
  "stream",
  "buffer",
  "index",
  "error",
  "handler",
  "session",
  "forest",
  "branch",
  "commit",
  "request",
  "result",
  "module",
  "export",
  "config",
  "state",
  "match",
  "node"
]

/** Deterministic word salad of about `bytes` bytes (ASCII, so bytes = characters). */
export const text = (seed: number, bytes: number): string => {
  let state = (seed * 2654435761 + 1) >>> 0
  let out = ""
  while (out.length < bytes) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    out += (out.length === 0 ? "" : " ") + (words[state % words.length] ?? "x")
  }
  return out.slice(0, bytes)
}

/** The one tool the conversations call. */
export const tools: ReadonlyArray<Canonical.Tool> = [{
  type: "function",
  function: {
    name: "read_file",
    description: "Read a file of the repository.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }
  }
}]

/**
 * A canonical conversation of exactly `count` messages: system, user, then alternating assistant (reasoning,
 * content, one tool call) and tool result; each message carries about `messageBytes` bytes of text.
 */
export const conversation = (count: number, messageBytes = 300): ReadonlyArray<Canonical.Message> => {
  const raw: Array<Record<string, unknown>> = []
  for (let i = 0; i < count; i++) {
    if (i === 0) raw.push({ role: "system", content: text(i, messageBytes) })
    else if (i === 1) raw.push({ role: "user", content: text(i, messageBytes) })
    else if (i % 2 === 0) {
      raw.push({
        role: "assistant",
        reasoning_content: text(i * 7, Math.floor(messageBytes / 3)),
        content: text(i, messageBytes - Math.floor(messageBytes / 3) - 60),
        tool_calls: [{
          id: `call_${i.toString(16).padStart(24, "0")}`,
          type: "function",
          function: { name: "read_file", arguments: JSON.stringify({ path: `src/file${i}.ts` }) }
        }]
      })
    } else {
      raw.push({
        role: "tool",
        tool_call_id: `call_${(i - 1).toString(16).padStart(24, "0")}`,
        content: text(i, messageBytes)
      })
    }
  }
  const canonical = Canonical.canonicalizeMessages(raw)
  if (Result.isFailure(canonical)) throw new Error(`bench conversation is not canonical: ${canonical.failure.message}`)
  return canonical.success
}

/** A fresh forest with no base template kwargs. */
export const emptyForest = (sessionId = "bench"): Forest.Forest =>
  Forest.make({ sessionId, groupIndex: 0, index: 0, label: null, metadata: {} })

/**
 * Commit `messages` the way the generation core does (system+user as one observation, then one response per
 * assistant message and one observation per tool message), `tokensPerNode` fake token ids each, with `logprob(i)`
 * as the i-th logprob of each response (default: multiples of 1/8, exact in 32 bits as SGLang's are); returns the leaf.
 */
export const commitConversation = (
  forest: Forest.Forest,
  messages: ReadonlyArray<Canonical.Message>,
  tokensPerNode: number,
  logprob: (i: number) => number = (i) => -(i % 17) / 8
): string => {
  const tokens = Array.from({ length: tokensPerNode }, (_, i) => (i * 7919) % 150_000)
  const logprobs = tokens.map((_, i) => logprob(i))
  let parent = forest.root
  let pending: Array<Canonical.Message> = []
  const flush = () => {
    if (pending.length === 0) return
    parent = ForestCommit.commitObservation(forest, {
      parent,
      messages: pending,
      tokens,
      tools,
      chatTemplateKwargs: {},
      rolloutId: 0
    })
    pending = []
  }
  for (const [i, message] of messages.entries()) {
    if (message.role !== "assistant") {
      pending.push(message)
      continue
    }
    flush()
    parent = ForestCommit.commitResponse(forest, {
      parent,
      message,
      tokens,
      logprobs,
      weightVersions: ["0"],
      status: "completed",
      rolloutId: 0,
      requestId: `rid-${i}`,
      abortCount: 0,
      wallElapsedS: 0,
      generationElapsedS: 0
    })
  }
  flush()
  return parent
}
