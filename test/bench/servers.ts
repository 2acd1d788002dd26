/**
 * The servers the transport benchmarks compare: the real gateway (SGLang path or embedded engine) and the transport
 * floor (plain node:http servers that parse the same bodies and, for the SGLang path, make the same single upstream
 * `/generate` call), plus the session registration the gateway needs.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Agent } from "undici"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as SupportSessions from "../support/sessions.ts"
import type * as LoadClient from "./loadClient.ts"

export type GatewayServices =
  | Gateway.Gateway
  | Generation.Generation
  | Forests.Forests
  | Sessions.Sessions
  | Engine.Engine
  | Tokenizer.Tokenizer

export const sampling: Engine.SamplingParams = {
  maxNewTokens: 16,
  temperature: 1,
  topP: 1,
  topK: -1,
  stop: [],
  stopTokenIds: []
}

/** A policy that reads the conversation, as real policies do (the arithmetic example looks at the last message). */
export const readingPolicy: EmbeddedEngine.Policy = (request) =>
  request.messages[request.messages.length - 1]?.role === "assistant" ? "?" : "ok"

/** The gateway stack as the rollout composes it, on the rollout's scheduler (FairScheduler). */
const gatewayStack = (
  engine: Layer.Layer<Engine.Engine, unknown, Tokenizer.Tokenizer>,
  options: Gateway.GatewayOptions = {},
  scheduler: Layer.Layer<never> = FairScheduler.layer()
) =>
  Gateway.Gateway.layer(options).pipe(
    Layer.provideMerge(Generation.Generation.layer()),
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(Sessions.Sessions.layer),
    Layer.provideMerge(engine),
    Layer.provideMerge(Tokenizer.Tokenizer.layer),
    Layer.provide(scheduler)
  )

/** The gateway over the embedded engine at zero latency with `policy`. */
export const embeddedGateway = (
  policy: EmbeddedEngine.Policy = readingPolicy,
  options: Gateway.GatewayOptions = {},
  scheduler?: Layer.Layer<never>
) =>
  Layer.build(
    gatewayStack(
      EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, policy }),
      options,
      scheduler
    )
  )

/** The gateway over SGLang at `url`. */
export const sglangGateway = (url: string) =>
  Layer.build(gatewayStack(SglangEngine.SglangEngine.layer({ workerUrls: [url], healthCheck: false })))

/**
 * Register `count` fresh Sessions (each with a forest) whose lease is `lease` (its wait, and whether it is held, as a
 * rollout's first-request barrier tells); returns their ids. Without one the lease is held from the start, as a
 * rollout Session's is after its Group's barrier.
 */
export const registerSessions = (
  context: Context.Context<Sessions.Sessions | Forests.Forests>,
  count: number,
  lease?: { readonly awaitLease: Effect.Effect<void>; readonly leaseHeld: () => boolean }
): Promise<Array<string>> =>
  Effect.runPromise(
    Effect.forEach(Array.from({ length: count }), () =>
      SupportSessions.registeredSession({
        groupId: "bench",
        sampling,
        ...(lease ?? { awaitLease: Effect.void, leaseHeld: () => true })
      }))
      .pipe(
        Effect.provideContext(context)
      )
  )

/**
 * Close and forget Sessions after a round as a rollout ends a Session (the registry, the forest, then the engine's
 * per-Session cache: layers/rollout/SessionRunner.ts), so rounds do not accumulate forests nor the engine's caches of
 * Sessions that are gone (docs/performance.md, "Issue 41, third pass").
 */
export const forgetSessions = (
  context: Context.Context<Sessions.Sessions | Forests.Forests | Engine.Engine>,
  ids: ReadonlyArray<string>
): Promise<void> => {
  const sessions = Context.get(context, Sessions.Sessions)
  const forests = Context.get(context, Forests.Forests)
  const engine = Context.get(context, Engine.Engine)
  return Effect.runPromise(
    Effect.forEach(
      ids,
      (id) => sessions.remove(id).pipe(Effect.andThen(forests.remove(id)), Effect.andThen(engine.closeSession(id))),
      { discard: true }
    )
  )
}

/** The gateway as a load-client target for `tokens`. */
export const gatewayTarget = (
  name: string,
  context: Context.Context<GatewayServices>,
  tokens: ReadonlyArray<string>
): LoadClient.Target => {
  const url = new URL(Context.get(context, Gateway.Gateway).baseUrl)
  return { name, origin: url.origin, path: `${url.pathname}/v1/chat/completions`, tokens }
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const completion = (content: string, promptTokens: number) =>
  JSON.stringify({
    id: "chatcmpl-floor",
    object: "chat.completion",
    created: 0,
    model: "bench",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop", logprobs: null }],
    usage: { prompt_tokens: promptTokens, completion_tokens: 2, total_tokens: promptTokens + 2 }
  })

/**
 * The transport floor: a plain node:http server that parses the JSON body and answers a chat completion; with
 * `upstream` it first makes one `/generate` call there (about one input id per 6 body bytes, close to the real prompt, the same undici client
 * the SGLang engine uses) and parses its answer.
 */
export const floor = (
  upstream?: string
): Effect.Effect<LoadClient.Target & { readonly url: string }, never, Scope.Scope> =>
  Effect.gen(function*() {
    const agent = yield* Effect.acquireRelease(
      Effect.sync(() => new Agent({ connections: 512 })),
      (a) => Effect.promise(() => a.destroy())
    )
    let rid = 0
    const server: Server = createServer((req, res) => {
      readBody(req).then(async (raw) => {
        // Decoding boundary: parsed only to pay what the gateway pays for a body.
        const body = JSON.parse(raw) as { readonly messages: ReadonlyArray<unknown> }
        const promptTokens = Math.ceil(raw.length / 6)
        let content = body.messages.length > 0 ? "ok" : "?"
        if (upstream !== undefined) {
          const answer = await agent.request({
            origin: upstream,
            path: "/generate",
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              input_ids: Array.from({ length: promptTokens }, (_, i) => (i * 7919) % 150_000),
              sampling_params: { max_new_tokens: 16, temperature: 1, top_p: 1, top_k: -1 },
              rid: `floor-${(rid++).toString().padStart(26, "0")}`,
              return_logprob: true
            })
          })
          const generated = JSON.parse(await answer.body.text()) as { readonly output_ids: ReadonlyArray<number> }
          content = generated.output_ids.length > 0 ? content : "?"
        }
        res.writeHead(200, { "content-type": "application/json" })
        res.end(completion(content, promptTokens))
      }).catch((error: unknown) => {
        res.writeHead(500)
        res.end(String(error))
      })
    })
    yield* Effect.acquireRelease(
      // The gateway's backlog (layers/gateway/Gateway.ts): Node's default of 511 resets connections when 512 clients
      // connect at once on a loaded machine.
      Effect.promise(() =>
        new Promise<void>((resolve) => server.listen({ port: 0, host: "127.0.0.1", backlog: 16_384 }, resolve))
      ),
      () =>
        Effect.promise(() =>
          new Promise<void>((resolve) => {
            server.closeAllConnections()
            server.close(() => resolve())
          })
        )
    )
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    return {
      name: upstream === undefined ? "floor" : "floor + /generate hop",
      origin: url,
      path: "/v1/chat/completions",
      tokens: [],
      url
    }
  })
