/**
 * The load generator (a child process, see child.ts): agents holding chat-completions conversations against a server.
 *
 * **Details**
 * - `conversations`: `clients` concurrent conversations per target, each `turns` requests long. A conversation starts
 *   from `history`, and after every answer appends the returned assistant message (as an OpenAI client echoes it)
 *   and a new user message of `turnBytes` bytes. Targets run one after the other, or with `interleave` turn by turn
 *   (turn t of every target before turn t + 1), so a slow phase of the machine hits every target alike.
 *   Answers: per target the wall time and every request's latency, by turn.
 * - `hold`: one streaming request per token (Buffered SSE) on a connection of its own, as each agent holds its own,
 *   opened in waves of 1,000; answers once every response's headers arrived.
 *   `finish` answers once all of them ended, with the number of heartbeat frames and terminal frames received.
 * - `send`: one non-streaming request with a given message appended; answers with its latency.
 */
import { performance } from "node:perf_hooks"
import { Client, Pool } from "undici"
import * as Child from "./child.ts"
import * as Conversation from "./conversation.ts"

export interface Target {
  readonly name: string
  /** Origin of the server, e.g. `http://127.0.0.1:4000`. */
  readonly origin: string
  /** Path of the chat-completions route. */
  readonly path: string
  /** One bearer token per client (a session id for the gateway). */
  readonly tokens: ReadonlyArray<string>
}

export interface ConversationsJob {
  readonly kind: "conversations"
  readonly targets: ReadonlyArray<Target>
  readonly clients: number
  readonly turns: number
  readonly history: ReadonlyArray<unknown>
  readonly turnBytes: number
  readonly interleave: boolean
}

export interface TargetResult {
  readonly name: string
  readonly wallMs: number
  /** `latencies[turn]`: every client's latency at that turn, in milliseconds. */
  readonly latencies: ReadonlyArray<ReadonlyArray<number>>
}

export interface HoldJob {
  readonly kind: "hold"
  readonly target: Target
  /** The messages every held request sends (the tokens' sessions already hold all but the last). */
  readonly messages: ReadonlyArray<unknown>
}

export interface FinishJob {
  readonly kind: "finish"
}

export interface HoldResult {
  readonly opened: number
  readonly heartbeats: number
  readonly completed: number
  /** Held requests that failed (connection reset, error status), and the first one's error. */
  readonly failed: number
  readonly firstFailure?: string | undefined
}

export interface SendJob {
  readonly kind: "send"
  readonly target: Target
  readonly messages: ReadonlyArray<unknown>
  /**
   * A user message of `Conversation.text(seed, bytes)` appended here, in this process: a 1 MB message sent over the
   * IPC channel would be serialized on the measured server's event loop, inside the phase it measures.
   */
  readonly appendText?: { readonly seed: number; readonly bytes: number } | undefined
}

export type Job = ConversationsJob | HoldJob | FinishJob | SendJob

const pools = new Map<string, Pool>()
const poolFor = (origin: string, connections: number): Pool => {
  const key = `${origin} ${connections}`
  let pool = pools.get(key)
  if (pool === undefined) {
    pool = new Pool(origin, { connections })
    pools.set(key, pool)
  }
  return pool
}

const post = async (pool: Pool, target: Target, token: string, body: unknown): Promise<Record<string, unknown>> => {
  const response = await pool.request({
    path: target.path,
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const answer = await response.body.text()
  if (response.statusCode !== 200) {
    throw new Error(`${target.name} answered ${response.statusCode}: ${answer.slice(0, 500)}`)
  }
  // Decoding boundary: a chat completion from the server under test.
  return JSON.parse(answer) as Record<string, unknown>
}

const assistantOf = (completion: Record<string, unknown>): unknown => {
  const choices = completion["choices"]
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined
  if (first === null || typeof first !== "object" || !("message" in first)) {
    throw new Error(`the answer has no choices[0].message: ${JSON.stringify(completion).slice(0, 300)}`)
  }
  return first.message
}

/** One conversation's state: its messages so far. */
const conversationStep = async (
  pool: Pool,
  target: Target,
  token: string,
  messages: Array<unknown>,
  turn: number,
  turnBytes: number
): Promise<number> => {
  const start = performance.now()
  const completion = await post(pool, target, token, { model: "bench", messages, max_tokens: 16 }).catch(
    (error: unknown) => {
      throw new Error(`${target.name} at turn ${turn} failed: ${String(error)}`, { cause: error })
    }
  )
  const latency = performance.now() - start
  messages.push(assistantOf(completion), { role: "user", content: Conversation.text(turn + 1000, turnBytes) })
  return latency
}

const conversations = async (job: ConversationsJob): Promise<ReadonlyArray<TargetResult>> => {
  const states = job.targets.map((target) => ({
    target,
    pool: poolFor(target.origin, job.clients),
    messages: Array.from({ length: job.clients }, () => [...job.history]),
    latencies: Array.from({ length: job.turns }, () => new Array<number>()),
    wallMs: 0
  }))
  const runTurn = async (state: (typeof states)[number], turn: number) => {
    await Promise.all(state.messages.map(async (messages, client) => {
      const token = state.target.tokens[client] ?? ""
      state.latencies[turn]?.push(
        await conversationStep(state.pool, state.target, token, messages, turn, job.turnBytes)
      )
    }))
  }
  if (job.interleave) {
    for (let turn = 0; turn < job.turns; turn++) {
      for (const state of states) {
        const start = performance.now()
        await runTurn(state, turn)
        state.wallMs += performance.now() - start
      }
    }
  } else {
    for (const state of states) {
      const start = performance.now()
      // Each client runs its whole conversation independently (no per-turn barrier between clients).
      await Promise.all(state.messages.map(async (messages, client) => {
        const token = state.target.tokens[client] ?? ""
        for (let turn = 0; turn < job.turns; turn++) {
          state.latencies[turn]?.push(
            await conversationStep(state.pool, state.target, token, messages, turn, job.turnBytes)
          )
        }
      }))
      state.wallMs = performance.now() - start
    }
  }
  return states.map((s) => ({ name: s.target.name, wallMs: s.wallMs, latencies: s.latencies }))
}

let held: Array<Promise<{ readonly heartbeats: number; readonly completed: boolean }>> = []
/**
 * The held requests' connections, one client each: a `Pool` looks through its connections for a free one on every
 * request (undici's `Pool`), and with every connection held that is O(n²) for n held requests, seconds of this
 * process's CPU on the 2 cores the measured gateway shares (docs/performance.md, "Issue 41, sixth pass"). Closed
 * by the next `hold`.
 */
let holders: Array<Client> = []

/** Held requests are opened in waves of this many (each wave's headers arrive before the next starts). */
const HOLD_WAVE = 1000

const hold = async (job: HoldJob): Promise<HoldResult> => {
  // An earlier hold's connections stay open until the next (as a pool's would), not closed inside `finish`'s phase.
  const previous = holders
  holders = []
  await Promise.all(previous.map((client) => client.close()))
  const body = JSON.stringify({ model: "bench", messages: job.messages, max_tokens: 16, stream: true })
  const open = (token: string) => {
    let headers: () => void = () => {}
    const opened = new Promise<void>((resolve) => (headers = resolve))
    const client = new Client(job.target.origin)
    holders.push(client)
    const done = client.request({
      path: job.target.path,
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body
    }).then(async (response) => {
      headers()
      if (response.statusCode !== 200) throw new Error(`held request answered ${response.statusCode}`)
      let heartbeats = 0
      let completed = false
      let tail = ""
      for await (const chunk of response.body) {
        tail = (tail + String(chunk)).slice(-4096)
        heartbeats += (String(chunk).match(/^: ?heartbeat/gm) ?? []).length
        if (tail.includes("[DONE]")) completed = true
      }
      return { heartbeats, completed }
    })
    // Reported by `finish`; until then a failure must not end this process as an unhandled rejection.
    done.catch(() => headers())
    return { opened, done }
  }
  held = []
  for (let start = 0; start < job.target.tokens.length; start += HOLD_WAVE) {
    const wave = job.target.tokens.slice(start, start + HOLD_WAVE).map(open)
    held.push(...wave.map((w) => w.done))
    await Promise.all(wave.map((w) => w.opened))
  }
  return { opened: held.length, heartbeats: 0, completed: 0, failed: 0 }
}

const finish = async (): Promise<HoldResult> => {
  const settled = await Promise.allSettled(held)
  held = []
  const results = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []))
  const failures = settled.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []))
  return {
    opened: settled.length,
    heartbeats: results.reduce((sum, r) => sum + r.heartbeats, 0),
    completed: results.filter((r) => r.completed).length,
    failed: failures.length,
    firstFailure: failures[0]
  }
}

const send = async (job: SendJob): Promise<number> => {
  const pool = poolFor(job.target.origin, 1)
  const messages = job.appendText === undefined
    ? job.messages
    : [...job.messages, { role: "user", content: Conversation.text(job.appendText.seed, job.appendText.bytes) }]
  const start = performance.now()
  await post(pool, job.target, job.target.tokens[0] ?? "", { model: "bench", messages, max_tokens: 16 })
  return performance.now() - start
}

Child.serve(async (message) => {
  // Decoding boundary: the parent sends a Job.
  const job = message as Job
  switch (job.kind) {
    case "conversations":
      return conversations(job)
    case "hold":
      return hold(job)
    case "finish":
      return finish()
    case "send":
      return send(job)
  }
})
