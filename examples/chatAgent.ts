/**
 * What the two Chat Completions example agents share (examples/arithmetic, examples/multimodal-tools): the RELAX_*
 * variables, the Session input, and the multi-turn tool loop through the official `openai` client.
 *
 * **Details**
 * The loop keeps every assistant message exactly as the server returned it (`reasoning_content` and tool calls
 * included), so each next request repeats the committed conversation and matches it; each function tool call is
 * answered by the agent's own tool as a `tool` message. The loop ends at the first answer without tool calls, or after
 * `maxTurns` requests.
 */
import { readFileSync } from "node:fs"
import type OpenAI from "openai"
import type {
  ChatCompletionContentPart,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionTool
} from "openai/resources/chat/completions"

/** A RELAX_* variable (an agent run outside relax-agentic says which is missing). */
export const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value.length === 0) {
    throw new Error(`${name} is not set; run this agent through relax-agentic`)
  }
  return value
}

/** The Session's input (RELAX_INPUT_JSON): its messages and metadata. */
export const readInput = <Input>(): Input => JSON.parse(readFileSync(env("RELAX_INPUT_JSON"), "utf8")) as Input

/**
 * A tool's answer: text, or content parts (the openai SDK types tool messages as text only; relax-agentic, like the
 * guide's deepeyes example, accepts images in tool observations).
 */
export type ToolAnswer = string | Array<ChatCompletionContentPart>

/**
 * Run the tool loop on `messages` (extended in place with every assistant and tool message) and return the final
 * answer's text ("" when the model still called tools at the last turn).
 */
export const toolLoop = async (options: {
  readonly client: OpenAI
  readonly messages: Array<ChatCompletionMessageParam>
  readonly tools: Array<ChatCompletionTool>
  readonly maxTurns: number
  readonly answer: (call: ChatCompletionMessageFunctionToolCall) => ToolAnswer | Promise<ToolAnswer>
}): Promise<string> => {
  const { client, messages, tools } = options
  for (let turn = 0; turn < options.maxTurns; turn++) {
    const response = await client.chat.completions.create({ model: "policy", messages, tools })
    const message = response.choices[0]?.message
    if (message === undefined) throw new Error("the model returned no choices")
    messages.push(message as ChatCompletionMessageParam)
    if (message.tool_calls === undefined || message.tool_calls.length === 0) return message.content ?? ""
    for (const call of message.tool_calls) {
      if (call.type !== "function") continue
      const content = await options.answer(call)
      messages.push({ role: "tool", tool_call_id: call.id, content } as ChatCompletionMessageParam)
    }
  }
  return ""
}

/** Run the agent; a failure is printed (its stack) and exits 1, as the Session's failure. */
export const runAgent = (main: () => Promise<void>): void => {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.stack ?? error.message : String(error))
    process.exit(1)
  })
}
