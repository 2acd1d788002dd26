/**
 * The coding example's per-Session agent command: a thin client of the agent server (the guide's thin-client pattern).
 *
 * **Details**
 * It submits the Session's input and model endpoint (`RELAX_INPUT_JSON`, `RELAX_BASE_URL`, `RELAX_SESSION_ID`) to the
 * server at `CODING_AGENT_SERVER`, waits for the task's end, and writes the result to `RELAX_OUTPUT_JSON`. When
 * relax-agentic stops the Session (SIGTERM to the agent's process group) it cancels the task on the server first, so
 * the slot is freed and the agent stops generating; the server also cancels a task whose client disconnects.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { request } from "node:http"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value.length === 0) {
    throw new Error(
      `${name} is not set; run this client through relax-agentic with the agent server's URL in CODING_AGENT_SERVER`
    )
  }
  return value
}

/** One HTTP exchange without a timeout (the result of a queued task can take as long as the run). */
const call = (
  method: string,
  url: string,
  body?: unknown
): Promise<{ readonly status: number; readonly json: unknown }> =>
  new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { "content-type": "application/json" } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        try {
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString("utf8")) })
        } catch (error) {
          reject(error)
        }
      })
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })

const main = async () => {
  const server = env("CODING_AGENT_SERVER").replace(/\/$/, "")
  const input = JSON.parse(readFileSync(env("RELAX_INPUT_JSON"), "utf8")) as unknown

  // Forward cancellation: when the Session is stopped (agent timeout, a dropped Group, the rollout ending), cancel the
  // task on the server (once it has an id) before exiting.
  let id: string | undefined
  let stopping: NodeJS.Signals | undefined
  const cancelAndExit = (signal: NodeJS.Signals) => {
    const cancelled = id === undefined ? Promise.resolve() : call("DELETE", `${server}/tasks/${id}`)
    cancelled.finally(() => process.exit(signal === "SIGTERM" ? 143 : 130))
  }
  const stop = (signal: NodeJS.Signals) => {
    stopping = signal
    // Still submitting: the handler below cancels as soon as the server answers with the task's id.
    if (id !== undefined) cancelAndExit(signal)
  }
  process.once("SIGTERM", stop)
  process.once("SIGINT", stop)

  const submitted = await call("POST", `${server}/tasks`, {
    input,
    baseUrl: env("RELAX_BASE_URL"),
    sessionId: env("RELAX_SESSION_ID")
  })
  if (submitted.status !== 202) throw new Error(`the agent server refused the task: ${JSON.stringify(submitted.json)}`)
  id = (submitted.json as { readonly id: string }).id
  if (stopping !== undefined) return cancelAndExit(stopping)

  const result = (await call("GET", `${server}/tasks/${id}`)).json as {
    readonly status: string
    readonly output?: unknown
    readonly error?: string
  }
  // Stopped meanwhile: the cancellation in flight exits the process.
  if (result.status === "cancelled" && stopping !== undefined) return
  if (result.status !== "completed") {
    throw new Error(
      `task ${id} ${result.status} on the agent server${result.error === undefined ? "" : `: ${result.error}`}`
    )
  }
  writeFileSync(env("RELAX_OUTPUT_JSON"), JSON.stringify(result.output))
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack ?? error.message : String(error))
  process.exit(1)
})
