/**
 * The coding agent the agent server runs for one task: a tool loop over the OpenAI Responses API with `bash`,
 * `read_file` and `apply_patch` tools, run in an isolated working copy of the task's repository.
 *
 * **Details**
 * The model endpoint and key are the Session's (`RELAX_BASE_URL`, `RELAX_SESSION_ID`), handed over by the thin client,
 * so every request lands in the Session's SessionForest although the loop runs in another process. The result is the
 * Session's output (implicit export): metadata with the files the agent changed and its tool counts; the reward comes
 * from the `--custom-rm-path` hook (`reward.ts`), which runs the task's tests on those changes.
 *
 * Cancellation: aborting `signal` aborts the pending model request, kills a running command, and removes the working
 * copy.
 */
import { readFileSync, writeFileSync } from "node:fs"
import OpenAI from "openai"
import * as Repo from "./repo.ts"

/** What the thin client submits: the Session's input file and how to reach its model endpoint. */
export interface TaskRequest {
  readonly input: {
    readonly messages?: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
    readonly metadata?: unknown
  }
  readonly baseUrl: string
  readonly sessionId: string
}

/** The Session's output (RELAX_OUTPUT_JSON): implicit export, no reward (the reward hook scores it). */
export interface TaskOutput {
  readonly metadata: {
    readonly task_id: string
    readonly changes: Record<string, string | null>
    readonly tool_calls: number
    readonly failed_commands: number
    /** Model requests made. */
    readonly turns: number
  }
}

/** What the agent server reports while a task runs. */
export interface Progress {
  /** Called around every model request (true while it is pending). */
  readonly awaitingModel: (pending: boolean) => void
}

const instructions = "You are a coding agent working in a repository. Use the tools to run the tests, read and fix " +
  "the code. When the tests pass, or you cannot fix them, reply with a short summary and no tool call."

const tools: Array<OpenAI.Responses.FunctionTool> = [
  {
    type: "function",
    name: "bash",
    description: "Run a shell command in the repository root; returns its output and exit code.",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    strict: false
  },
  {
    type: "function",
    name: "read_file",
    description: "Read a file of the repository.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    strict: false
  },
  {
    type: "function",
    name: "apply_patch",
    description: "Replace the one occurrence of `search` in the file at `path` with `replace`.",
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, search: { type: "string" }, replace: { type: "string" } },
      required: ["path", "search", "replace"]
    },
    strict: false
  }
]

/** Tool observations are cut to this many characters (the context holds every turn). */
const maxObservation = 1500

const clip = (text: string): string =>
  text.length <= maxObservation
    ? text
    : `${text.slice(0, maxObservation)}\n[... ${text.length - maxObservation} more characters]`

const argument = (args: Record<string, unknown>, name: string): string => {
  const value = args[name]
  if (typeof value !== "string") throw new Error(`missing string argument "${name}"`)
  return value
}

/** Run one tool call in the working copy; a failure is an observation for the model, not an error of the agent. */
const runTool = async (
  root: string,
  name: string,
  rawArguments: string,
  signal: AbortSignal
): Promise<{ readonly output: string; readonly failed: boolean }> => {
  try {
    const args = JSON.parse(rawArguments) as Record<string, unknown>
    if (name === "bash") {
      const result = await Repo.run("bash", ["-c", argument(args, "command")], root, { timeoutMs: 60_000, signal })
      return { output: clip(`${result.output}\nexit code: ${result.exitCode}`), failed: result.exitCode !== 0 }
    }
    if (name === "read_file") {
      return { output: clip(readFileSync(Repo.inside(root, argument(args, "path")), "utf8")), failed: false }
    }
    if (name === "apply_patch") {
      const path = Repo.inside(root, argument(args, "path"))
      const search = argument(args, "search")
      const text = readFileSync(path, "utf8")
      const count = text.split(search).length - 1
      if (count !== 1) {
        return {
          output: `error: the search text occurs ${count} times in ${args["path"]}; it must occur once`,
          failed: true
        }
      }
      writeFileSync(path, text.replace(search, () => argument(args, "replace")))
      return { output: `patched ${args["path"]}`, failed: false }
    }
    return { output: `error: unknown tool ${name}`, failed: true }
  } catch (error) {
    if (signal.aborted) throw error
    return { output: `error: ${error instanceof Error ? error.message : String(error)}`, failed: true }
  }
}

/** Run the agent for one task to its end (at most `maxTurns` model calls). */
export const runTask = async (
  request: TaskRequest,
  signal: AbortSignal,
  progress: Progress,
  maxTurns = 12
): Promise<TaskOutput> => {
  const task = Repo.taskOf(request.input.metadata)
  const copy = Repo.workingCopy(task.files)
  try {
    // The first request waits until the Session's Group gets its Runtime lease: no client timeout.
    const client = new OpenAI({
      baseURL: request.baseUrl,
      apiKey: request.sessionId,
      timeout: 9_999_000,
      maxRetries: 0
    })
    const conversation: Array<OpenAI.Responses.ResponseInputItem> = (request.input.messages ?? []).map((message) => ({
      role: message.role === "assistant" ? "assistant" : "user",
      content: typeof message.content === "string" ? message.content : JSON.stringify(message.content)
    }))
    let toolCalls = 0
    let failedCommands = 0
    let requests = 0
    while (requests < maxTurns) {
      requests++
      progress.awaitingModel(true)
      const response = await client.responses.create({ model: "policy", instructions, input: conversation, tools }, {
        signal
      })
        .finally(() => progress.awaitingModel(false))
      const items = response.output.filter((item) =>
        item.type === "reasoning" || item.type === "message" || item.type === "function_call"
      )
      // The complete output goes back with the next request, so it matches the committed conversation state.
      conversation.push(...items)
      const calls = items.filter((item) => item.type === "function_call")
      if (calls.length === 0) break
      for (const call of calls) {
        toolCalls++
        const result = await runTool(copy.root, call.name, call.arguments, signal)
        if (result.failed) failedCommands++
        conversation.push({ type: "function_call_output", call_id: call.call_id, output: result.output })
      }
    }
    return {
      metadata: {
        task_id: task.task_id,
        changes: Repo.changedFiles(copy.root, task.files),
        tool_calls: toolCalls,
        failed_commands: failedCommands,
        turns: requests
      }
    }
  } finally {
    copy.remove()
  }
}
