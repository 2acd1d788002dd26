/**
 * The embedded engine's policy for the arithmetic example (`--embedded-policy examples/arithmetic/policy.ts#policy`).
 *
 * It plays a model that reasons, calls the calculator, and then answers, but picks the wrong operation for about
 * three Sessions in ten (decided by a hash of the question and the request's sampling seed, which is `--rollout-seed` plus
 * the Session's position in its Group), so rewards and advantages vary inside a Group and the same seed gives the same
 * samples.
 * The text uses the Qwen3 formats the `qwen3` reasoning parser and the `qwen25` tool-call parser read.
 */
import { createHash } from "node:crypto"
import type * as Engine from "../../layers/engine/Engine.ts"

const textOf = (content: Engine.PolicyRequest["messages"][number]["content"]): string =>
  typeof content === "string"
    ? content
    : content.map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join("")

const operationFor = (question: string): "+" | "-" | "*" | "/" =>
  /equally among/.test(question) ? "/" : /each/.test(question) ? "*" : /gives away|left/.test(question) ? "-" : "+"

const wrongOperation = { "+": "-", "-": "+", "*": "+", "/": "*" } as const

/** Deterministic per question and seed: true for roughly 30% of Sessions. */
const errs = (question: string, seed: number | string): boolean =>
  createHash("sha256").update(`${seed}\n${question}`).digest()[0]! % 10 < 3

export const policy = (request: Engine.PolicyRequest): string => {
  const last = request.messages[request.messages.length - 1]
  if (last?.role === "tool") {
    const result = textOf(last.content).trim()
    return `<think>\nThe calculator returned ${result}.\n</think>\n\nThe answer is ${result}.`
  }
  const question = textOf([...request.messages].reverse().find((m) => m.role === "user")?.content ?? "")
  const numbers = question.match(/\d+/g) ?? []
  if (numbers.length < 2) return "I cannot find two numbers in this problem, so I cannot answer."
  const right = operationFor(question)
  const op = errs(question, request.seed ?? request.sessionId) ? wrongOperation[right] : right
  const expression = `${numbers[0]} ${op} ${numbers[1]}`
  return `<think>\nI need to compute ${expression}. I will use the calculator.\n</think>\n\n` +
    `<tool_call>\n{"name": "calculator", "arguments": {"expression": "${expression}"}}\n</tool_call>`
}

export default policy
