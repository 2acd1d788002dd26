/**
 * The coding example's agent server: a separate, long-running process that runs coding agents for many Sessions, with
 * a FIFO queue and a hard limit on how many run at once (`--slots`), like a remote agent platform or a sandbox pool.
 *
 * **Details**
 * Start it once, outside the per-Session `--agent-command` (the guide: "Start retrievers, environment servers, and
 * other cross-session services outside the per-session agent command"); each Session's thin client (`client.ts`)
 * submits its task here and waits for the result.
 *
 * ```
 * node examples/coding-agent/server.ts --slots 4 [--port 0] [--url-file runs/coding-agent/server.url]
 * ```
 *
 * HTTP on 127.0.0.1 (the URL is printed, and written to `--url-file`):
 * - `POST /tasks` `{input, baseUrl, sessionId}` → `202 {id, queued}`: queued in arrival order.
 * - `GET /tasks/<id>` → waits until the task ends → `{status: "completed", output}` | `{status: "failed", error}` |
 *   `{status: "cancelled"}`. A caller that disconnects before the end cancels the task.
 * - `DELETE /tasks/<id>` → cancels it: a queued task leaves the queue, a running one is aborted (its model request, its
 *   command, its working copy).
 * - `GET /status` → `{version, slots, running, queued, awaiting_model, peak_running, submitted, completed, failed,
 *   cancelled}`; `GET /status?after=<version>` waits until something changed after that version (a watch without
 *   polling).
 *
 * With fewer slots than the Sessions relax-agentic keeps resident (the guide's "Required external-agent capacity"),
 * the first Sessions of a Group hold every slot while their first model requests wait for the rest of the Group, which
 * waits in this queue: a deadlock. `relax-agentic check --agent-max-slots <slots>` reports it before launch.
 */
import { writeFileSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { parseArgs } from "node:util"
import * as Agent from "./agent.ts"

type Result =
  | { readonly status: "completed"; readonly output: Agent.TaskOutput }
  | { readonly status: "failed"; readonly error: string }
  | { readonly status: "cancelled" }

interface Task {
  readonly id: string
  readonly request: Agent.TaskRequest
  readonly controller: AbortController
  state: "queued" | "running" | "done"
  result: Result | undefined
  readonly waiters: Array<(result: Result) => void>
}

const { values } = parseArgs({
  options: {
    slots: { type: "string", default: "4" },
    port: { type: "string", default: "0" },
    "url-file": { type: "string" }
  }
})
const slots = Number(values.slots)
if (!Number.isInteger(slots) || slots < 1) throw new Error(`--slots must be a positive integer, got ${values.slots}`)

const tasks = new Map<string, Task>()
const queue: Array<Task> = []
const running = new Set<Task>()
const stats = { peak_running: 0, submitted: 0, completed: 0, failed: 0, cancelled: 0, awaiting_model: 0 }
let nextId = 0
/** Bumped on every change of the status; `GET /status?after=` waits for it. */
let version = 0
const statusWatchers: Array<() => void> = []

const status = () => ({ version, slots, running: running.size, queued: queue.length, ...stats })

const changed = () => {
  version++
  for (const watcher of statusWatchers.splice(0)) watcher()
}

const finish = (task: Task, result: Result) => {
  task.state = "done"
  task.result = result
  running.delete(task)
  stats[result.status === "completed" ? "completed" : result.status === "failed" ? "failed" : "cancelled"]++
  for (const waiter of task.waiters.splice(0)) waiter(result)
  changed()
  pump()
}

/** Start queued tasks, oldest first, while a slot is free. */
const pump = () => {
  while (running.size < slots && queue.length > 0) {
    const task = queue.shift()!
    task.state = "running"
    running.add(task)
    stats.peak_running = Math.max(stats.peak_running, running.size)
    let pending = false
    const progress: Agent.Progress = {
      awaitingModel: (now) => {
        if (now === pending) return
        stats.awaiting_model += now ? 1 : -1
        pending = now
        changed()
      }
    }
    Agent.runTask(task.request, task.controller.signal, progress).then(
      (output) =>
        finish(task, task.controller.signal.aborted ? { status: "cancelled" } : { status: "completed", output }),
      (error: unknown) =>
        finish(
          task,
          task.controller.signal.aborted
            ? { status: "cancelled" }
            : { status: "failed", error: error instanceof Error ? error.stack ?? error.message : String(error) }
        )
    ).finally(() => progress.awaitingModel(false))
    changed()
  }
}

const cancel = (task: Task) => {
  if (task.state === "queued") {
    queue.splice(queue.indexOf(task), 1)
    finish(task, { status: "cancelled" })
  } else if (task.state === "running") {
    task.controller.abort(new Error("cancelled by the client"))
  }
}

const send = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))
}

const readBody = async (req: IncomingMessage): Promise<unknown> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return JSON.parse(Buffer.concat(chunks).toString("utf8"))
}

const isTaskRequest = (body: unknown): body is Agent.TaskRequest => {
  const b = body as Partial<Record<keyof Agent.TaskRequest, unknown>> | null
  return typeof b === "object" && b !== null && typeof b.baseUrl === "string" && typeof b.sessionId === "string" &&
    typeof b.input === "object" && b.input !== null
}

const handle = async (req: IncomingMessage, res: ServerResponse) => {
  const url = new URL(req.url ?? "/", "http://localhost")
  const match = /^\/tasks\/([^/]+)$/.exec(url.pathname)
  const task = match === null ? undefined : tasks.get(match[1]!)
  if (req.method === "GET" && url.pathname === "/status") {
    const after = Number(url.searchParams.get("after") ?? -1)
    if (version > after) return send(res, 200, status())
    statusWatchers.push(() => send(res, 200, status()))
    return
  }
  if (req.method === "POST" && url.pathname === "/tasks") {
    const body = await readBody(req)
    if (!isTaskRequest(body)) return send(res, 400, { error: "expected {input, baseUrl, sessionId}" })
    const id = `task-${nextId++}`
    const created: Task = {
      id,
      request: body,
      controller: new AbortController(),
      state: "queued",
      result: undefined,
      waiters: []
    }
    tasks.set(id, created)
    queue.push(created)
    stats.submitted++
    changed()
    pump()
    return send(res, 202, { id, queued: created.state === "queued" })
  }
  if (match !== null && task === undefined) return send(res, 404, { error: `no task ${match[1]}` })
  if (req.method === "GET" && task !== undefined) {
    const deliver = (result: Result) => {
      tasks.delete(task.id)
      send(res, 200, result)
    }
    if (task.result !== undefined) return deliver(task.result)
    task.waiters.push(deliver)
    // A caller that goes away (its Session was stopped and the process killed) cancels the task.
    res.on("close", () => {
      if (!res.writableFinished) cancel(task)
    })
    return
  }
  if (req.method === "DELETE" && task !== undefined) {
    cancel(task)
    return send(res, 202, { id: task.id, state: task.state })
  }
  send(res, 404, { error: `no route ${req.method} ${url.pathname}` })
}

const server = createServer((req, res) => {
  handle(req, res).catch((error: unknown) =>
    send(res, 400, { error: error instanceof Error ? error.message : String(error) })
  )
})

server.listen(Number(values.port), "127.0.0.1", () => {
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  if (values["url-file"] !== undefined) writeFileSync(values["url-file"], url + "\n")
  console.log(`agent server listening on ${url} with ${slots} slot(s)`)
})

const shutdown = () => {
  for (const task of [...queue, ...running]) cancel(task)
  server.close()
  server.closeAllConnections()
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
