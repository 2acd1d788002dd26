/**
 * The multi-agent example's harness: a lead researcher on the OpenAI Responses API delegates searches to searcher
 * sub-agents on the Anthropic Messages API, all through the same RELAX_BASE_URL and Session, then exports three
 * training contexts (main, searcher_0, searcher_1) as explicit records with the metadata the custom advantage reads.
 *
 * Explicit records are Chat-shaped whichever API the agent called (docs/agent-contract.md, "Explicit export"), so each
 * agent keeps its conversation twice: in its SDK's own shape to send, and as canonical Chat messages to export.
 */
import Anthropic from "@anthropic-ai/sdk"
import { readFileSync, writeFileSync } from "node:fs"
import OpenAI from "openai"

interface SessionInput {
  readonly messages?: ReadonlyArray<{ readonly role: string; readonly content: string }>
  readonly metadata?: { readonly answer?: string; readonly task_id?: string }
}

/** One message of an explicit export record: the Chat Completions shape. */
interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly content: string
  readonly reasoning_content?: string
  readonly tool_calls?: ReadonlyArray<{
    readonly id: string
    readonly type: "function"
    readonly function: { readonly name: string; readonly arguments: string }
  }>
  readonly tool_call_id?: string
}

/** A tool of an explicit export record: the nested Chat Completions shape. */
interface ChatTool {
  readonly type: "function"
  readonly function: {
    readonly name: string
    readonly description: string
    readonly parameters: Record<string, unknown>
  }
}

interface ExportRecord {
  readonly name: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools: ReadonlyArray<ChatTool>
  readonly metadata: Record<string, unknown>
  readonly reward?: number
}

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value.length === 0) {
    throw new Error(`${name} is not set; run this agent through relax-agentic`)
  }
  return value
}

const notes = JSON.parse(readFileSync(new URL("./data/notes.json", import.meta.url), "utf8")) as ReadonlyArray<{
  readonly title: string
  readonly text: string
}>

/** The notes whose title the query names. */
const searchNotes = (query: string): string => {
  const hits = notes.filter((note) => query.toLowerCase().includes(note.title.toLowerCase()))
  return hits.length === 0 ? "No notes found." : hits.map((note) => note.text).join(" ")
}

const contains = (text: string, answer: string | undefined): boolean =>
  answer !== undefined && text.toLowerCase().includes(answer.toLowerCase())

// ---------------------------------------------------------------------------------------------------------------
// A searcher: Anthropic Messages

const searcherSystem = "You are a searcher. Search the notes with search_notes and report what you found."
const searchParameters = {
  type: "object",
  properties: { query: { type: "string", description: "what to look up" } },
  required: ["query"]
}
const searchTool: Anthropic.Tool = {
  name: "search_notes",
  description: "Look up notes by title.",
  input_schema: { type: "object", properties: searchParameters.properties, required: searchParameters.required }
}
const searchChatTool: ChatTool = {
  type: "function",
  function: { name: "search_notes", description: "Look up notes by title.", parameters: searchParameters }
}

/** An Anthropic assistant turn as a Chat message: text blocks joined, thinking → reasoning_content, tool_use → tool_calls. */
const chatFromAnthropic = (blocks: ReadonlyArray<Anthropic.ContentBlock>): ChatMessage => {
  const text = blocks.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("")
  const thinking = blocks.flatMap((
    block
  ) => (block.type === "thinking" && block.thinking !== "" ? [block.thinking] : []))
  const calls = blocks.flatMap((block) =>
    block.type === "tool_use"
      ? [{
        id: block.id,
        type: "function" as const,
        function: { name: block.name, arguments: JSON.stringify(block.input) }
      }]
      : []
  )
  return {
    role: "assistant",
    content: text,
    ...(thinking.length > 0 ? { reasoning_content: thinking.join("\n\n") } : {}),
    ...(calls.length > 0 ? { tool_calls: calls } : {})
  }
}

const runSearcher = async (client: Anthropic, name: string, query: string, answer: string | undefined) => {
  const question = `Search the notes for: ${query}`
  const messages: Array<Anthropic.MessageParam> = [{ role: "user", content: question }]
  const chat: Array<ChatMessage> = [{ role: "system", content: searcherSystem }, { role: "user", content: question }]
  let finding = ""
  for (let turn = 0; turn < 4; turn++) {
    const response = await client.messages.create({
      model: "policy",
      max_tokens: 256,
      system: searcherSystem,
      messages,
      tools: [searchTool]
    })
    messages.push({ role: "assistant", content: response.content })
    chat.push(chatFromAnthropic(response.content))
    const uses = response.content.filter((block) => block.type === "tool_use")
    if (uses.length === 0) {
      finding = chat[chat.length - 1]!.content
      break
    }
    const results = uses.map((use) => ({
      type: "tool_result" as const,
      tool_use_id: use.id,
      content: searchNotes(String((use.input as { query?: unknown }).query ?? ""))
    }))
    messages.push({ role: "user", content: results })
    for (const result of results) chat.push({ role: "tool", tool_call_id: result.tool_use_id, content: result.content })
  }
  const record: ExportRecord = {
    name,
    messages: chat,
    tools: [searchChatTool],
    metadata: { role: "searcher", query, usefulness: contains(finding, answer) ? 1 : 0 }
  }
  return { finding, record }
}

// ---------------------------------------------------------------------------------------------------------------
// The lead researcher: OpenAI Responses

const leadInstructions =
  "You are the lead researcher. Delegate searches with delegate_search, then answer in one sentence."
const delegateParameters = {
  type: "object",
  properties: { queries: { type: "array", items: { type: "string" }, description: "one query per searcher" } },
  required: ["queries"]
}
const delegateTool: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "delegate_search",
  description: "Ask one searcher per query and get their findings.",
  parameters: delegateParameters,
  strict: false
}
const delegateChatTool: ChatTool = {
  type: "function",
  function: {
    name: "delegate_search",
    description: "Ask one searcher per query and get their findings.",
    parameters: delegateParameters
  }
}

/** Responses output items as one Chat assistant message: texts joined, reasoning → reasoning_content, calls → tool_calls. */
const chatFromResponses = (items: ReadonlyArray<OpenAI.Responses.ResponseOutputItem>): ChatMessage => {
  const texts: Array<string> = []
  const reasoning: Array<string> = []
  const calls: Array<NonNullable<ChatMessage["tool_calls"]>[number]> = []
  for (const item of items) {
    if (item.type === "message") {
      texts.push(item.content.flatMap((part) => (part.type === "output_text" ? [part.text] : [])).join(""))
    } else if (item.type === "reasoning") {
      const summary = item.summary.map((part) => part.text).filter((text) => text !== "")
      const content = (item.content ?? []).map((part) => part.text).filter((text) => text !== "")
      const text = (summary.length > 0 ? summary : content).join("\n\n")
      if (text !== "") reasoning.push(text)
    } else if (item.type === "function_call") {
      calls.push({ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } })
    }
  }
  return {
    role: "assistant",
    content: texts.join(""),
    ...(reasoning.length > 0 ? { reasoning_content: reasoning.join("\n\n") } : {}),
    ...(calls.length > 0 ? { tool_calls: calls } : {})
  }
}

const main = async () => {
  const input = JSON.parse(readFileSync(env("RELAX_INPUT_JSON"), "utf8")) as SessionInput
  const baseURL = env("RELAX_BASE_URL")
  const apiKey = env("RELAX_SESSION_ID")
  // Long timeouts: the first request waits until the Group gets its Runtime lease.
  const openai = new OpenAI({ baseURL, apiKey, timeout: 9_999_000, maxRetries: 0 })
  const anthropic = new Anthropic({ baseURL, apiKey, timeout: 9_999_000, maxRetries: 0 })
  const answer = input.metadata?.answer
  const question = input.messages?.find((m) => m.role === "user")?.content ?? ""

  const conversation: Array<OpenAI.Responses.ResponseInputItem> = [{ role: "user", content: question }]
  const chat: Array<ChatMessage> = [{ role: "system", content: leadInstructions }, { role: "user", content: question }]
  const searchers: Array<ExportRecord> = []
  let final = ""
  for (let turn = 0; turn < 4; turn++) {
    const response = await openai.responses.create({
      model: "policy",
      instructions: leadInstructions,
      input: conversation,
      tools: [delegateTool]
    })
    const items = response.output.filter((item) =>
      item.type === "reasoning" || item.type === "message" || item.type === "function_call"
    )
    conversation.push(...items)
    chat.push(chatFromResponses(items))
    const calls = items.filter((item) => item.type === "function_call")
    if (calls.length === 0) {
      final = response.output_text
      break
    }
    for (const call of calls) {
      const queries = (JSON.parse(call.arguments) as { queries?: ReadonlyArray<string> }).queries ?? []
      // The searchers run at once, each its own context in the Session's forest.
      const found = await Promise.all(
        queries.map((query, k) => runSearcher(anthropic, `searcher_${searchers.length + k}`, query, answer))
      )
      searchers.push(...found.map((f) => f.record))
      const output = found.map((f, k) => `searcher_${k}: ${f.finding}`).join("\n")
      conversation.push({ type: "function_call_output", call_id: call.call_id, output })
      chat.push({ role: "tool", tool_call_id: call.call_id, content: output })
    }
  }
  const outcome = contains(final, answer) ? 1 : 0
  const records: Array<ExportRecord> = [
    {
      name: "main",
      messages: chat,
      tools: [delegateChatTool],
      metadata: { role: "main", outcome, task_id: input.metadata?.task_id ?? null },
      reward: outcome
    },
    ...searchers
  ]
  writeFileSync(env("RELAX_OUTPUT_JSON"), records.map((record) => JSON.stringify(record)).join("\n") + "\n")
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack ?? error.message : String(error))
  process.exit(1)
})
