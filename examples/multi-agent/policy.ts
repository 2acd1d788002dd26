/**
 * The embedded engine's policy for the multi-agent example (`--embedded-policy examples/multi-agent/policy.ts#policy`).
 *
 * It plays two roles, told apart by the system prompt. The lead researcher delegates two searches (the question's
 * subject, and the generic noun after "Which"), then answers from what the searchers report. A searcher calls
 * `search_notes` once and reports the result. About three Sessions in ten misspell the subject (decided by the question
 * and the request's sampling seed, so the same seed gives the same samples): their searches find nothing and the answer
 * is wrong. The text uses the Qwen3 formats the `qwen3` reasoning parser and the `qwen25` tool-call parser read.
 */
import { createHash } from "node:crypto"
import type * as Engine from "../../layers/engine/Engine.ts"

const textOf = (content: Engine.PolicyRequest["messages"][number]["content"]): string =>
  typeof content === "string"
    ? content
    : content.map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join("")

const toolCall = (name: string, args: unknown): string =>
  `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`

/** The capitalized words after the first one: "Which city is home to the Louvre museum?" → "Louvre". */
const subjectOf = (question: string): string =>
  question.replace(/[?.!]/g, "").split(/\s+/).slice(1).filter((word) => /^[A-Z]/.test(word)).join(" ")

const errs = (question: string, seed: number | string): boolean =>
  createHash("sha256").update(`${seed}\n${question}`).digest()[0]! % 10 < 3

const lead = (request: Engine.PolicyRequest): string => {
  const last = request.messages[request.messages.length - 1]
  if (last?.role === "tool") {
    const found = textOf(last.content).split("\n").map((line) => line.replace(/^searcher_\d+: /, ""))
      .find((line) => !line.startsWith("No notes"))
    return found === undefined
      ? "<think>\nThe searchers found nothing.\n</think>\n\nI could not find the answer."
      : `<think>\nA searcher found a note.\n</think>\n\nBased on the notes: ${found}`
  }
  const question = textOf(request.messages.find((m) => m.role === "user")?.content ?? "")
  const subject = subjectOf(question)
  const noun = question.split(/\s+/)[1] ?? "topic"
  const query = errs(question, request.seed ?? request.sessionId) ? subject.slice(0, -1) : subject
  return `<think>\nI will ask one searcher about ${query} and one about ${noun}.\n</think>\n\n` +
    toolCall("delegate_search", { queries: [query, noun] })
}

const searcher = (request: Engine.PolicyRequest): string => {
  const last = request.messages[request.messages.length - 1]
  if (last?.role === "tool") return textOf(last.content)
  const query = textOf(last?.content ?? "").replace(/^Search the notes for: /, "")
  return `<think>\nI will search the notes for ${query}.\n</think>\n\n` + toolCall("search_notes", { query })
}

export const policy = (request: Engine.PolicyRequest): string => {
  const system = request.messages[0]?.role === "system" ? textOf(request.messages[0].content) : ""
  return system.startsWith("You are a searcher") ? searcher(request) : lead(request)
}

export default policy
