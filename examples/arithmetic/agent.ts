/**
 * An example agent harness: solves an arithmetic word problem with a calculator tool in a multi-turn tool loop,
 * through the official `openai` client pointed at RELAX_BASE_URL, then writes its reward to RELAX_OUTPUT_JSON.
 *
 * It is an ordinary program: outside relax-agentic, set the same variables by hand and point it at any
 * OpenAI-compatible server.
 */
import { readFileSync, writeFileSync } from "node:fs"
import OpenAI from "openai"
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions"

interface SessionInput {
  readonly messages?: Array<ChatCompletionMessageParam>
  readonly metadata?: { readonly answer?: number; readonly task_id?: string }
}

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value.length === 0) {
    throw new Error(`${name} is not set; run this agent through relax-agentic`)
  }
  return value
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
  const input = JSON.parse(readFileSync(env("RELAX_INPUT_JSON"), "utf8")) as SessionInput
  const client = new OpenAI({ baseURL: env("RELAX_BASE_URL"), apiKey: env("RELAX_SESSION_ID"), timeout: 9_999_000 })
  const messages: Array<ChatCompletionMessageParam> = [
    {
      role: "system",
      content: "You are a careful math assistant. Use the calculator tool, then state the final answer."
    },
    ...(input.messages ?? [])
  ]
  let toolCalls = 0
  let final = ""
  for (let turn = 0; turn < 6; turn++) {
    const response = await client.chat.completions.create({ model: "policy", messages, tools: [calculatorTool] })
    const message = response.choices[0]?.message
    if (message === undefined) throw new Error("the model returned no choices")
    // Keep the complete assistant message (reasoning_content and tool calls) so the next request matches the
    // committed conversation state.
    messages.push(message as ChatCompletionMessageParam)
    if (message.tool_calls === undefined || message.tool_calls.length === 0) {
      final = message.content ?? ""
      break
    }
    for (const call of message.tool_calls) {
      if (call.type !== "function") continue
      toolCalls++
      let expression = ""
      try {
        expression = String((JSON.parse(call.function.arguments) as { expression?: unknown }).expression ?? "")
      } catch {
        expression = call.function.arguments
      }
      messages.push({ role: "tool", tool_call_id: call.id, content: calculate(expression) })
    }
  }
  const answer = lastNumber(final)
  const expected = input.metadata?.answer
  const correct = answer !== undefined && expected !== undefined && Math.abs(answer - expected) < 1e-9
  writeFileSync(
    env("RELAX_OUTPUT_JSON"),
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

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack ?? error.message : String(error))
  process.exit(1)
})
