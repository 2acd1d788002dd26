/**
 * Gateway request overhead: the real gateway (Gateway + Generation + Forests + Sessions) with the embedded engine at
 * zero latency and a one-word policy, on 127.0.0.1 port 0, driven by undici and by the `openai` SDK, against bare
 * `engine.generate` calls with the same prompt ids, sampling and conversation.
 *
 * **Details**
 * Every request is the first turn of a fresh Session (one ~300-byte user message), so each one pays the whole
 * pipeline once: auth, body decode, match, root render + encode, engine, parse, commit, render. Client and server share
 * this process (and its event loop), so requests/s are a lower bound for the gateway alone.
 */
import { Context, Effect, Layer, Result } from "effect"
import { performance } from "node:perf_hooks"
import OpenAI from "openai"
import { Pool } from "undici"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import * as SupportSessions from "../support/sessions.ts"
import * as Conversation from "./conversation.ts"
import * as Harness from "./harness.ts"

const stack = Gateway.Gateway.layer().pipe(
  Layer.provideMerge(Generation.Generation.layer()),
  Layer.provideMerge(Forests.Forests.layer),
  Layer.provideMerge(Sessions.Sessions.layer),
  Layer.provideMerge(
    EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy: () => "ok" })
  ),
  Layer.provideMerge(Tokenizer.Tokenizer.layer)
)

type Services =
  | Gateway.Gateway
  | Generation.Generation
  | Forests.Forests
  | Sessions.Sessions
  | Engine.Engine
  | Tokenizer.Tokenizer

const sampling: Engine.SamplingParams = {
  maxNewTokens: 16,
  temperature: 1,
  topP: 1,
  topK: -1,
  stop: [],
  stopTokenIds: []
}
const messages = [{ role: "user" as const, content: Conversation.text(1, 300) }]
const body = JSON.stringify({ model: "bench", messages, max_tokens: 16 })

const ROUNDS = 4
const SEQUENTIAL_PER_ROUND = 60
const SDK_PER_ROUND = 30
const CONCURRENCY = 16
const CONCURRENT_REQUESTS = 320

const measure = async (context: Context.Context<Services>): Promise<Harness.BenchResult> => {
  const gateway = Context.get(context, Gateway.Gateway)
  const sessions = Context.get(context, Sessions.Sessions)
  const engine = Context.get(context, Engine.Engine)
  const tokenizer = Context.get(context, Tokenizer.Tokenizer)
  const generation = Context.get(context, Generation.Generation)

  const newSession = (): Promise<string> =>
    Effect.runPromise(
      SupportSessions.registeredSession({ groupId: "bench", sampling }).pipe(Effect.provideContext(context))
    )
  const sessionPool = async (count: number): Promise<Array<string>> => {
    const ids: Array<string> = []
    for (let i = 0; i < count; i++) ids.push(await newSession())
    return ids
  }

  const origin = new URL(gateway.baseUrl).origin
  const path = `${new URL(gateway.baseUrl).pathname}/v1/chat/completions`
  const pool = new Pool(origin, { connections: CONCURRENCY })
  const viaUndici = async (sessionId: string): Promise<void> => {
    const response = await pool.request({
      path,
      method: "POST",
      headers: { authorization: `Bearer ${sessionId}`, "content-type": "application/json" },
      body
    })
    const answer = await response.body.text()
    if (response.statusCode !== 200) throw new Error(`gateway answered ${response.statusCode}: ${answer}`)
  }
  const client = new OpenAI({ baseURL: gateway.baseUrl, apiKey: "set-per-request", maxRetries: 0 })
  const viaSdk = async (sessionId: string): Promise<void> => {
    const completion = await client.chat.completions.create(
      { model: "bench", messages, max_tokens: 16 },
      { headers: { Authorization: `Bearer ${sessionId}` } }
    )
    if (completion.choices[0]?.message.content !== "ok") throw new Error("the gateway did not return the policy text")
  }

  // The bare engine call the gateway wraps: the same prompt ids and conversation Generation hands the engine.
  const inputIds = Result.getOrThrow(ObservationDelta.rootTokens(tokenizer, messages, [], {}))
  let rid = 0
  const engineRequest = (): Engine.GenerateRequest => ({
    inputIds,
    sampling,
    rid: `bench-${rid++}`,
    returnLogprob: true,
    sessionId: "bench-engine",
    conversation: () => ({
      sessionId: "bench-engine",
      turn: 0,
      messages,
      tools: [],
      chatTemplateKwargs: {},
      promptText: tokenizer.decode(inputIds)
    })
  })
  const viaEngine = async (): Promise<void> => {
    const result = await Effect.runPromise(engine.generate(engineRequest()))
    if (result.outputIds.length === 0) throw new Error("the engine generated nothing")
  }

  // The generation core alone (what the gateway calls after auth and body decoding): no HTTP, no JSON.
  const decoded = Chat.adapter.decode(JSON.parse(body))
  if (Result.isFailure(decoded)) throw new Error(`bench request does not decode: ${decoded.failure.message}`)
  const viaGeneration = async (sessionId: string): Promise<void> => {
    const completion = await Effect.runPromise(Effect.gen(function*() {
      const session = yield* sessions.lookup(sessionId)
      return yield* generation.generate(session, decoded.success)
    }))
    if (completion.content !== "ok") throw new Error("the generation core did not return the policy text")
  }

  const timeSequential = async (count: number, call: (sessionId: string) => Promise<void>): Promise<number> => {
    const ids = await sessionPool(count)
    const start = performance.now()
    for (const id of ids) await call(id)
    return (performance.now() - start) / count
  }

  // Warm-up: JIT, connection pool, tokenizer caches.
  await timeSequential(40, viaUndici)
  await timeSequential(10, viaSdk)
  await timeSequential(40, () => viaEngine())
  await timeSequential(40, viaGeneration)

  const undiciMs: Array<number> = []
  const sdkMs: Array<number> = []
  const engineMs: Array<number> = []
  const generationMs: Array<number> = []
  for (let round = 0; round < ROUNDS; round++) {
    undiciMs.push(await timeSequential(SEQUENTIAL_PER_ROUND, viaUndici))
    engineMs.push(await timeSequential(SEQUENTIAL_PER_ROUND, () => viaEngine()))
    generationMs.push(await timeSequential(SEQUENTIAL_PER_ROUND, viaGeneration))
    sdkMs.push(await timeSequential(SDK_PER_ROUND, viaSdk))
  }

  const concurrentIds = await sessionPool(CONCURRENT_REQUESTS)
  const concurrentStart = performance.now()
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < concurrentIds.length) {
      const id = concurrentIds[next++]
      if (id !== undefined) await viaUndici(id)
    }
  }))
  const concurrentMs = (performance.now() - concurrentStart) / CONCURRENT_REQUESTS
  await pool.close()

  const engineCall = Harness.median(engineMs)
  const row = (client: string, ms: number, perRequest: boolean): Record<string, string> => ({
    client,
    "requests/s": (1000 / ms).toFixed(0),
    "time/request": Harness.formatMs(ms),
    "vs engine": perRequest ? Harness.formatRatio(ms / engineCall) : "",
    "gateway share": perRequest ? `${(((ms - engineCall) / ms) * 100).toFixed(0)}%` : ""
  })
  return {
    title: "Gateway request overhead (chat completions, embedded engine at zero latency, 2-token answers)",
    rows: [
      row("bare engine.generate", engineCall, false),
      row("Generation.generate (no HTTP)", Harness.median(generationMs), true),
      row("undici, sequential", Harness.median(undiciMs), true),
      row("openai SDK, sequential", Harness.median(sdkMs), true),
      {
        ...row(`undici, ${CONCURRENCY} concurrent`, concurrentMs, false),
        "time/request": `${Harness.formatMs(concurrentMs)} (amortized)`
      }
    ],
    notes: [
      "vs engine: time of one gateway round trip over the time of the bare engine.generate call it wraps (>1 = overhead).",
      "gateway share: the part of a request's time spent outside engine.generate (HTTP, auth, decode, match, " +
      "tokenization, parse, commit, render, and the in-process client); the Generation.generate row isolates the " +
      "generation core (match, root tokenization, commit, parse) from HTTP and protocol work.",
      `each sequential number is the median of ${ROUNDS} interleaved rounds; every request opens a fresh Session.`
    ]
  }
}

const run = (): Promise<Harness.BenchResult> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(stack)
    return yield* Effect.promise(() => measure(context))
  })))

export const bench: Harness.Bench = { name: "gateway", run }
