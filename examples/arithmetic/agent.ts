/**
 * An example agent harness: solves an arithmetic word problem with a calculator tool in a multi-turn tool loop,
 * through the official `openai` client pointed at RELAX_BASE_URL, then writes its reward to RELAX_OUTPUT_JSON.
 *
 * It is an ordinary program: outside relax-agentic, set the same variables by hand and point it at any
 * OpenAI-compatible server.
 */
import { writeFileSync } from "node:fs"
import OpenAI from "openai"
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions"
import * as ChatAgent from "../chatAgent.ts"

interface SessionInput {
  readonly messages?: Array<ChatCompletionMessageParam>
  readonly metadata?: { readonly answer?: number; readonly task_id?: string }
}

const calculatorTool: ChatCompletionTool = {
  type: "function",
  function: {
    name: "calculator",
    description: "Evaluate one binary arithmetic expression such as '12 * 7'.",
    parameters: {
      type: "object",
      properties: { expression: { type: "string", description: "a op b, with op one of + - * /" } },
      required: ["expression"]
    }
  }
}

/** Evaluates `a op b` without eval(). */
export const calculate = (expression: string): string => {
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)\s*$/.exec(expression)
  if (m === null) return `error: cannot evaluate ${JSON.stringify(expression)}; use the form 'a op b'`
  const a = Number(m[1])
  const b = Number(m[3])
  const value = m[2] === "+" ? a + b : m[2] === "-" ? a - b : m[2] === "*" ? a * b : b === 0 ? NaN : a / b
  return Number.isFinite(value) ? String(value) : "error: division by zero"
}

const lastNumber = (text: string): number | undefined => {
  const all = text.match(/-?\d+(?:\.\d+)?/g)
  return all === null ? undefined : Number(all[all.length - 1])
}

const main = async () => {
  const input = ChatAgent.readInput<SessionInput>()
  const client = new OpenAI({
    baseURL: ChatAgent.env("RELAX_BASE_URL"),
    apiKey: ChatAgent.env("RELAX_SESSION_ID"),
    timeout: 9_999_000
  })
  const messages: Array<ChatCompletionMessageParam> = [
    {
      role: "system",
      content: "You are a careful math assistant. Use the calculator tool, then state the final answer."
    },
    ...(input.messages ?? [])
  ]
  let toolCalls = 0
  const final = await ChatAgent.toolLoop({
    client,
    messages,
    tools: [calculatorTool],
    maxTurns: 6,
    answer: (call) => {
      toolCalls++
      let expression = ""
      try {
        expression = String((JSON.parse(call.function.arguments) as { expression?: unknown }).expression ?? "")
      } catch {
        expression = call.function.arguments
      }
      return calculate(expression)
    }
  })
  const answer = lastNumber(final)
  const expected = input.metadata?.answer
  const correct = answer !== undefined && expected !== undefined && Math.abs(answer - expected) < 1e-9
  writeFileSync(
    ChatAgent.env("RELAX_OUTPUT_JSON"),
    JSON.stringify({
      metadata: {
        task_id: input.metadata?.task_id ?? null,
        tool_calls: toolCalls,
        answered: answer !== undefined ? 1 : 0
      },
      reward: { score: correct ? 1 : 0, tool_calls: toolCalls }
    })
  )
}

ChatAgent.runAgent(main)
