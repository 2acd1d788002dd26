/**
 * The SessionForest's work per request, as the generation core does it: match the echoed history, commit the new
 * observation, read the inference prefix, its media and the policy's messages, commit the response. Many Sessions
 * take turns (each request's history is a fresh copy, as a decoded request body is), so the forests are not all in
 * the cache at once; CPU time and bytes allocated per request, and per step.
 *
 * **Details**
 * Every Session starts from a 6-message ~2 KB history (system, user, tool-calling turns with reasoning) and adds one
 * assistant turn (reasoning, text, one tool call; 100 generated ids with float32-exact logprobs) and one ~300-byte
 * tool result (80 ids) per request. CPU is `process.cpuUsage` around each step over all Sessions of one turn.
 */
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as Json from "../../src/json/Json.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as Conversation from "./conversation.ts"
import * as Harness from "./harness.ts"

const OBSERVATION_IDS = Array.from({ length: 80 }, (_, i) => (i * 7919 + 11) % 150_000)
const RESPONSE_IDS = Array.from({ length: 100 }, (_, i) => (i * 104_729 + 5) % 150_000)
const LOGPROBS = RESPONSE_IDS.map((_, i) => -(i % 17) / 8)

/** Twelve tools of a realistic size (~7 KB of JSON), as a coding agent sends with every request. */
const twelveTools: ReadonlyArray<Canonical.Tool> = Array.from({ length: 12 }, (_, i) => ({
  type: "function",
  function: {
    name: `tool_${i}`,
    description: "Does something useful with the repository; ".repeat(6),
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "A path in the repository, relative to its root." },
        limit: { type: "integer", description: "At most this many results." },
        pattern: { type: "string" }
      },
      required: ["path"]
    }
  }
}))

interface Agent {
  readonly forest: Forest.Forest
  /** The full history as the agent echoes it (its own objects; each request sends a fresh copy). */
  readonly history: Array<Canonical.Message>
  turn: number
}

/** One request's intermediate values, carried from step to step. */
interface Request {
  readonly agent: Agent
  readonly state: Canonical.State
  /** The engine's answer, parsed (a fresh object). */
  readonly answer: Canonical.Message
  matched?: Matching.Match
  observation?: string
  response?: string
}

const forestSteps = [
  "match",
  "commit observation",
  "inference prefix + media",
  "policy messages",
  "commit response"
] as const
/** Not the forest's own work: what the SGLang engine then does with the prefix (`JSON.stringify` of its request). */
const engineSteps = ["inference prefix + SGLang body"] as const

/** The rest of a `/generate` body (what the SGLang engine sends besides the ids). */
const wireRest: Omit<SglangWire.GenerateRequest, "input_ids"> = {
  sampling_params: {
    max_new_tokens: 16,
    temperature: 1,
    top_p: 1,
    top_k: -1,
    min_p: 0,
    stop: [],
    stop_token_ids: [],
    skip_special_tokens: false,
    spaces_between_special_tokens: false,
    no_stop_trim: true
  },
  rid: "0123456789abcdef0123456789abcdef",
  return_logprob: true
}
const steps = [...forestSteps, ...engineSteps] as const
type Step = typeof steps[number]

/** `messages[i]`, which must have `role`. */
const messageAt = (messages: ReadonlyArray<Canonical.Message>, i: number, role: Canonical.Role): Canonical.Message => {
  const message = messages[i]
  if (message === undefined || message.role !== role) throw new Error("bench conversation shape changed")
  return message
}

const run = (step: Step, r: Request): void => {
  const { forest } = r.agent
  switch (step) {
    case "match":
      r.matched = Matching.match(forest, r.state, { strict: false })
      return
    case "commit observation": {
      const matched = r.matched ?? Matching.match(forest, r.state, { strict: false })
      r.observation = ForestCommit.commitObservation(forest, {
        parent: matched.parent,
        messages: matched.suffix,
        tokens: matched.parent === forest.root ? [...OBSERVATION_IDS, ...OBSERVATION_IDS] : OBSERVATION_IDS,
        tools: r.state.tools,
        chatTemplateKwargs: r.state.chat_template_kwargs,
        rolloutId: 0
      })
      return
    }
    case "inference prefix + media": {
      const at = r.observation ?? forest.root
      Harness.consume(InferencePrefix.ids(forest, at))
      Harness.consume(InferencePrefix.media(forest, at))
      return
    }
    case "inference prefix + SGLang body":
      Harness.consume(
        SglangWire.encodeGenerateRequest({
          ...wireRest,
          input_ids: InferencePrefix.ids(forest, r.observation ?? forest.root)
        })
      )
      return
    case "policy messages":
      Harness.consume(Forest.fullMessages(forest, r.observation ?? forest.root))
      return
    case "commit response":
      r.response = ForestCommit.commitResponse(forest, {
        parent: r.observation ?? forest.root,
        message: r.answer,
        tokens: RESPONSE_IDS,
        logprobs: LOGPROBS,
        weightVersions: ["0"],
        status: "completed",
        rolloutId: 0,
        requestId: `${r.agent.forest.sessionId}-${r.agent.turn}`,
        abortCount: 0,
        wallElapsedS: 0,
        generationElapsedS: 0
      })
  }
}

const cpuMs = (work: () => void): number => {
  const start = process.cpuUsage()
  work()
  const used = process.cpuUsage(start)
  return (used.user + used.system) / 1000
}

interface Measured {
  readonly cpu: ReadonlyMap<Step, number>
  readonly requests: number
  readonly allocatedPerRequest: number
}

const measure = (sessions: number, turns: number, toolList: ReadonlyArray<Canonical.Tool>): Measured => {
  const all = Conversation.conversation(6 + 2 * turns)
  const start = all.slice(0, 6)
  const agents: Array<Agent> = Array.from({ length: sessions }, (_, i) => ({
    forest: Conversation.emptyForest(`s${i}`),
    history: [...start],
    turn: 0
  }))
  const cpu = new Map<Step, number>(steps.map((s) => [s, 0]))
  let requests = 0
  let allocated = 0
  let allocatedRequests = 0
  const measureFrom = Math.floor(turns / 4)
  for (let turn = 0; turn < turns; turn++) {
    const requestsOfTurn: Array<Request> = agents.map((agent) => ({
      agent,
      state: { messages: Json.copy(agent.history), tools: Json.copy(toolList), chat_template_kwargs: {} },
      answer: Json.copy(messageAt(all, 6 + 2 * agent.turn, "assistant"))
    }))
    const measured = turn >= measureFrom
    if (turn === turns - 1) {
      // The last turn: bytes allocated by the whole request (its own copies of the states made beforehand).
      const probe = requestsOfTurn.slice(0, Math.min(32, requestsOfTurn.length))
      allocated += Harness.allocatedBytes(() => {
        for (const r of probe) for (const step of forestSteps) run(step, r)
      }, 1)
      allocatedRequests += probe.length
      for (const r of requestsOfTurn.slice(probe.length)) for (const step of forestSteps) run(step, r)
    } else {
      for (const step of steps) {
        const used = cpuMs(() => {
          for (const r of requestsOfTurn) run(step, r)
        })
        if (measured) cpu.set(step, (cpu.get(step) ?? 0) + used)
      }
      if (measured) requests += requestsOfTurn.length
    }
    for (const agent of agents) {
      agent.history.push(messageAt(all, 6 + 2 * agent.turn, "assistant"), messageAt(all, 7 + 2 * agent.turn, "tool"))
      agent.turn++
    }
  }
  return { cpu, requests, allocatedPerRequest: allocated / allocatedRequests }
}

const runBench = async (options: Harness.BenchOptions): Promise<Harness.BenchResult> => {
  const sessions = options.full ? 256 : 64
  const turns = options.full ? 64 : 32
  const measureFrom = Math.floor(turns / 4)
  const runs = [
    { label: "1 tool", result: measure(sessions, turns, Conversation.tools) },
    { label: "12 tools", result: measure(sessions, turns, twelveTools) }
  ]
  const perRequest = (m: Measured, step: Step) => Harness.formatMs((m.cpu.get(step) ?? 0) / m.requests)
  const row = (step: string, value: (m: Measured) => string) =>
    Object.fromEntries([["step", step], ...runs.map((r) => [r.label, value(r.result)])])
  return {
    title: `SessionForest work per request: ${sessions} Sessions × ${turns} turns (history 7 → ${
      6 + 2 * turns
    } messages)`,
    rows: [
      ...forestSteps.map((step) => row(step, (m) => perRequest(m, step))),
      row(
        "total (the forest)",
        (m) => Harness.formatMs(forestSteps.reduce((sum, step) => sum + (m.cpu.get(step) ?? 0), 0) / m.requests)
      ),
      ...engineSteps.map((step) => row(step, (m) => perRequest(m, step))),
      row("bytes allocated per request (last turn)", (m) => Harness.formatBytes(m.allocatedPerRequest))
    ],
    notes: [
      `CPU: process.cpuUsage around each step over all Sessions of a turn, turns ${measureFrom + 1}–${turns - 1}; ` +
      "allocation: V8's sampling heap profiler over the last turn of 32 Sessions (collected objects included).",
      "1 tool: the conversations' small read_file tool; 12 tools: ~7 KB of tool definitions with every request.",
      "Each request's history is a fresh deep copy (as a decoded body is), so matching compares, never finds identical objects.",
      "Inference prefix + SGLang body: the prefix again (an Int32Array), written as the SGLang engine writes its " +
      "request body (SglangWire.encodeGenerateRequest; not the forest's work, but it depends on the array the forest " +
      "returns; not in the total nor in the allocation)."
    ]
  }
}

export const bench: Harness.Bench = { name: "forest", run: runBench }
