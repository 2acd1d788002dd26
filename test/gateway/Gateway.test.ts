/**
 * The gateway's own pipeline (routes, auth before body, body limit, error shapes, Buffered SSE framing and heartbeats,
 * disconnects) over a scripted generation core; the full stack with the embedded engine is in Gateway.e2e.test.ts.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Logger, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as http from "node:http"
import * as Answer from "../../layers/gateway/Answer.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as OpenStream from "../support/openStream.ts"
import * as SupportSessions from "../support/sessions.ts"

const completion: Completion.Completion = {
  id: "0123456789abcdef0123456789abcdef",
  created: 1_700_000_000,
  content: "4",
  toolCalls: [],
  finish: "stop",
  usage: { promptTokens: 12, completionTokens: 2, cachedTokens: 0 }
}

type Script = (
  request: Completion.CanonicalRequest
) => Effect.Effect<Completion.Completion, GenerationError.GenerationError>

/** A generation core that answers by script and records what it was asked. */
const scripted = (script: Ref.Ref<Script>, seen: Array<Completion.CanonicalRequest>) =>
  Layer.succeed(Generation.Generation, {
    generate: (_session, request) =>
      Effect.suspend(() => {
        seen.push(request)
        return Ref.get(script).pipe(Effect.flatMap((run) => run(request)))
      })
  })

/** A log line the gateway wrote: its level and its message parts. */
interface Logged {
  readonly level: string
  readonly message: unknown
}

const setup = (options: Gateway.GatewayOptions = {}) =>
  Effect.gen(function*() {
    const script = yield* Ref.make<Script>(() => Effect.succeed(completion))
    const seen: Array<Completion.CanonicalRequest> = []
    // Completed whenever the gateway looks a session up: the request passed auth and is about to read its body.
    const lookedUp = yield* Deferred.make<void>()
    const logs: Array<Logged> = []
    const logged = yield* Deferred.make<Logged>()
    const capture = Logger.make(({ logLevel, message }) => {
      const line: Logged = { level: logLevel, message }
      logs.push(line)
      Deferred.doneUnsafe(logged, Effect.succeed(line))
    })
    const signalling = Layer.effect(
      Sessions.Sessions,
      Effect.gen(function*() {
        const sessions = yield* Sessions.Sessions
        return Sessions.Sessions.of({
          ...sessions,
          lookup: (token) => sessions.lookup(token).pipe(Effect.tap(() => Deferred.succeed(lookedUp, undefined)))
        })
      })
    )
    const context = yield* Layer.build(
      Gateway.Gateway.layer({ maxBodyBytes: 4096, ...options }).pipe(
        Layer.provide(signalling),
        Layer.provideMerge(Sessions.Sessions.layer),
        Layer.provide(scripted(script, seen)),
        Layer.provide(Logger.layer([capture]))
      )
    )
    const sessions = Context.get(context, Sessions.Sessions)
    const gateway = Context.get(context, Gateway.Gateway)
    const live = yield* sessions.newSessionId
    yield* sessions.register(SupportSessions.sessionEntry(live))
    const finished = yield* sessions.newSessionId
    yield* sessions.register(SupportSessions.sessionEntry(finished))
    yield* sessions.close(finished)
    return { gateway, sessions, live, finished, script, seen, lookedUp, logs, logged }
  })

interface Reply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

/** One HTTP request over node:http (no Effect clock involved), collecting the whole answer. */
const request = (
  url: string,
  options: { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: string }
): Effect.Effect<Reply> =>
  Effect.callback<Reply>((resume) => {
    const req = http.request(url, { method: options.method ?? "POST", headers: options.headers ?? {} }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => (body += chunk))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body })))
    })
    req.on("error", (error) => resume(Effect.die(error)))
    if (options.body !== undefined) req.write(options.body)
    req.end()
  })

const chatBody = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: "m", messages: [{ role: "user", content: "What is 2+2?" }], ...extra })

const json = (reply: Reply): unknown => JSON.parse(reply.body)

const bearer = (token: string) => ({ authorization: `Bearer ${token}`, "content-type": "application/json" })

describe("Gateway routes", () => {
  it.live("serves every model route with and without /v1 under /agentic_api on 127.0.0.1", () =>
    Effect.gen(function*() {
      const { gateway, live } = yield* setup()
      expect(gateway.baseUrl).toBe(`http://127.0.0.1:${gateway.port}/agentic_api`)
      assert.isAbove(gateway.port, 0)
      for (const path of ["/chat/completions", "/v1/chat/completions"]) {
        const reply = yield* request(gateway.baseUrl + path, { headers: bearer(live), body: chatBody() })
        expect(reply.status).toBe(200)
        expect(json(reply)).toMatchObject({ object: "chat.completion", model: "m" })
      }
      for (const path of ["/responses", "/v1/responses"]) {
        const reply = yield* request(gateway.baseUrl + path, {
          headers: bearer(live),
          body: JSON.stringify({ model: "m", input: "hi" })
        })
        expect(reply.status).toBe(200)
        expect(json(reply)).toMatchObject({ object: "response", status: "completed" })
      }
      for (const path of ["/messages", "/v1/messages"]) {
        const reply = yield* request(gateway.baseUrl + path, {
          headers: { "x-api-key": live, "content-type": "application/json" },
          body: JSON.stringify({ model: "m", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
        })
        expect(reply.status).toBe(200)
        expect(json(reply)).toMatchObject({ type: "message", role: "assistant", stop_reason: "end_turn" })
      }
      for (const path of ["/models", "/v1/models"]) {
        const reply = yield* request(gateway.baseUrl + path, { method: "GET" })
        expect(json(reply)).toMatchObject({ object: "list", data: [{ object: "model", owned_by: "relax" }] })
      }
      expect(json(yield* request(gateway.baseUrl + "/health", { method: "GET" }))).toEqual({ ok: true })
    }))

  it.live("passes the decoded canonical request to the generation core (request sampling fields ignored)", () =>
    Effect.gen(function*() {
      const { gateway, live, seen } = yield* setup()
      yield* request(gateway.baseUrl + "/v1/chat/completions", {
        headers: bearer(live),
        body: chatBody({ temperature: 0.1, max_tokens: 7, stop: "END", seed: 3 })
      })
      expect(seen[0]).toMatchObject({
        model: "m",
        maxTokens: 7,
        stop: ["END"],
        seed: 3,
        state: { messages: [{ role: "user", content: "What is 2+2?" }], tools: [], chat_template_kwargs: {} }
      })
    }))
})

describe("Gateway large bodies", () => {
  it.live("decodes a body over Answer.LARGE_BODY_BYTES whole and answers it (its generation goes on in a later task)", () =>
    Effect.gen(function*() {
      const { gateway, live, seen } = yield* setup({ maxBodyBytes: 2 * Answer.LARGE_BODY_BYTES })
      const content = "tool output ".repeat(Math.ceil(Answer.LARGE_BODY_BYTES / 12))
      const body = JSON.stringify({ model: "m", messages: [{ role: "user", content }] })
      assert.isAtLeast(Buffer.byteLength(body), Answer.LARGE_BODY_BYTES)
      const reply = yield* request(gateway.baseUrl + "/v1/chat/completions", { headers: bearer(live), body })
      expect(reply.status).toBe(200)
      expect(json(reply)).toMatchObject({ object: "chat.completion", choices: [{ message: { content: "4" } }] })
      expect(seen[0]?.state).toMatchObject({ messages: [{ role: "user", content }] })
    }))
})

describe("Gateway errors", () => {
  it.live("401 without an Authorization header, checked before the body (an invalid body still gets 401)", () =>
    Effect.gen(function*() {
      const { gateway } = yield* setup()
      const reply = yield* request(gateway.baseUrl + "/v1/chat/completions", { body: "{not json" })
      expect(reply.status).toBe(401)
      expect(json(reply)).toEqual({
        error: {
          message: "Missing Authorization header",
          type: "authentication_error",
          param: null,
          code: "authentication_error"
        }
      })
    }))

  it.live("401 for an Authorization header that is not Bearer <token>, Anthropic-shaped on /v1/messages", () =>
    Effect.gen(function*() {
      const { gateway, live } = yield* setup()
      const reply = yield* request(gateway.baseUrl + "/v1/messages", {
        headers: { authorization: `Basic ${live}` },
        body: "{}"
      })
      expect(reply.status).toBe(401)
      expect(json(reply)).toEqual({
        type: "error",
        error: { type: "authentication_error", message: "Authorization header must be 'Bearer <token>'" }
      })
    }))

  it.live("404 session_discarded for an unknown session, with x-should-retry: false", () =>
    Effect.gen(function*() {
      const { gateway } = yield* setup()
      const reply = yield* request(gateway.baseUrl + "/v1/chat/completions", {
        headers: bearer("0".repeat(32)),
        body: chatBody()
      })
      expect(reply.status).toBe(404)
      expect(reply.headers["x-should-retry"]).toBe("false")
      expect(json(reply)).toEqual({
        error: {
          message: `Unknown or discarded agentic session '${"0".repeat(32)}'.`,
          type: "not_found_error",
          param: "session_id",
          code: "session_discarded"
        }
      })
    }))

  it.live("404 for a finished session, Anthropic not_found_error on /messages", () =>
    Effect.gen(function*() {
      const { gateway, finished } = yield* setup()
      const reply = yield* request(gateway.baseUrl + "/messages", { headers: bearer(finished), body: "{}" })
      expect(reply.status).toBe(404)
      expect(reply.headers["x-should-retry"]).toBe("false")
      expect(json(reply)).toEqual({
        type: "error",
        error: { type: "not_found_error", message: `Unknown or discarded agentic session '${finished}'.` }
      })
    }))

  it.live("400 with param for validation errors, invalid JSON and non-object bodies", () =>
    Effect.gen(function*() {
      const { gateway, live } = yield* setup()
      const url = gateway.baseUrl + "/v1/chat/completions"
      const invalid = yield* request(url, { headers: bearer(live), body: chatBody({ max_tokens: 0 }) })
      expect(invalid.status).toBe(400)
      expect(json(invalid)).toEqual({
        error: {
          message: "max_tokens must be a positive integer",
          type: "invalid_request_error",
          param: "max_tokens",
          code: "invalid_request_error"
        }
      })
      const notJson = yield* request(url, { headers: bearer(live), body: "{not json" })
      expect(notJson.status).toBe(400)
      expect(json(notJson)).toMatchObject({ error: { param: "body", type: "invalid_request_error" } })
      expect((json(notJson) as { error: { message: string } }).error.message).toMatch(/^Invalid request body: /)
      const array = yield* request(url, { headers: bearer(live), body: "[]" })
      expect(json(array)).toMatchObject({ error: { param: "body", message: "request body must be a JSON object" } })
    }))

  it.live("400 context_length_exceeded from the generation core keeps 'maximum context length' in the message", () =>
    Effect.gen(function*() {
      const { gateway, live, script } = yield* setup()
      yield* Ref.set(
        script,
        () => Effect.fail(new ContextLengthError.ContextLengthError({ limit: 32, promptTokens: 40 }))
      )
      const reply = yield* request(gateway.baseUrl + "/v1/chat/completions", {
        headers: bearer(live),
        body: chatBody()
      })
      expect(reply.status).toBe(400)
      expect(json(reply)).toEqual({
        error: {
          message:
            "This model's maximum context length is 32 tokens. However, your messages resulted in 40 tokens. Please reduce the length of the messages.",
          type: "invalid_request_error",
          param: "messages",
          code: "context_length_exceeded"
        }
      })
    }))

  it.live("413 in the protocol's shape for a body over the limit", () =>
    Effect.gen(function*() {
      const { gateway, live } = yield* setup({ maxBodyBytes: 256 })
      const big = chatBody({ padding: "x".repeat(1024) })
      const chat = yield* request(gateway.baseUrl + "/v1/chat/completions", { headers: bearer(live), body: big })
      expect(chat.status).toBe(413)
      expect(json(chat)).toEqual({
        error: {
          message:
            "Request body exceeds the gateway limit of 256 bytes. Send a smaller request or raise the gateway's body size limit.",
          type: "invalid_request_error",
          param: "body",
          code: "request_too_large"
        }
      })
      const messages = yield* request(gateway.baseUrl + "/v1/messages", { headers: bearer(live), body: big })
      expect(messages.status).toBe(413)
      expect(json(messages)).toMatchObject({ type: "error", error: { type: "request_too_large" } })
    }))

  it.live("a failed generation is a 500 internal_error that must not be retried", () =>
    Effect.gen(function*() {
      const { gateway, live, script } = yield* setup()
      yield* Ref.set(script, () =>
        Effect.fail(
          new GenerationError.GenerationEngineError({ reason: "engine", detail: "scripted engine failure" })
        ))
      const reply = yield* request(gateway.baseUrl + "/v1/chat/completions", {
        headers: bearer(live),
        body: chatBody()
      })
      expect(reply.status).toBe(500)
      expect(reply.headers["x-should-retry"]).toBe("false")
      expect(json(reply)).toMatchObject({ error: { message: "Internal error while handling agentic chat request." } })
    }))
})

describe("Buffered SSE", () => {
  it.live("answers text/event-stream with no-cache and X-Accel-Buffering: no; the chunk then [DONE]", () =>
    Effect.gen(function*() {
      const { gateway, live } = yield* setup()
      const reply = yield* request(gateway.baseUrl + "/v1/chat/completions", {
        headers: bearer(live),
        body: chatBody({ stream: true })
      })
      expect(reply.status).toBe(200)
      expect(reply.headers["content-type"]).toMatch(/^text\/event-stream/)
      expect(reply.headers["cache-control"]).toBe("no-cache")
      expect(reply.headers["x-accel-buffering"]).toBe("no")
      expect(reply.body.startsWith(": connected\n\n")).toBe(true)
      expect(reply.body.endsWith("data: [DONE]\n\n")).toBe(true)
      expect(reply.body).toContain("\"object\":\"chat.completion.chunk\"")
    }))

  it.live("a failed streamed generation sends the error as data then [DONE], status 200", () =>
    Effect.gen(function*() {
      const { gateway, live, script } = yield* setup()
      yield* Ref.set(script, () => Effect.fail(new ContextLengthError.ContextLengthError({ limit: null })))
      const reply = yield* request(gateway.baseUrl + "/v1/chat/completions", {
        headers: bearer(live),
        body: chatBody({ stream: true })
      })
      expect(reply.status).toBe(200)
      expect(reply.body).toBe(
        ": connected\n\n" +
          `data: ${JSON.stringify(ProtocolError.openAiBody(ProtocolError.GatewayError.contextLength({})))}\n\n` +
          "data: [DONE]\n\n"
      )
    }))

  it.effect("sends a heartbeat every interval while the generation is pending (TestClock), then the terminal frames", () =>
    Effect.gen(function*() {
      const { gateway, live, script } = yield* setup({ heartbeatInterval: "15 seconds" })
      const release = yield* Deferred.make<void>()
      yield* Ref.set(script, () => Deferred.await(release).pipe(Effect.as(completion)))
      const { arrived, received, done } = yield* OpenStream.openStream(
        gateway.baseUrl + "/v1/messages",
        bearer(live),
        JSON.stringify({ model: "m", max_tokens: 8, stream: true, messages: [{ role: "user", content: "hi" }] })
      )
      const ping = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
      const count = (text: string) => text.split(ping).length - 1
      yield* arrived((text) => count(text) === 1)
      yield* TestClock.adjust("14 seconds")
      yield* TestClock.adjust("1 second")
      yield* arrived((text) => count(text) === 2)
      yield* TestClock.adjust("30 seconds")
      yield* arrived((text) => count(text) === 4)
      expect(received()).toBe(ping.repeat(4))
      yield* Deferred.succeed(release, undefined)
      const body = yield* Fiber.join(done)
      expect(body.startsWith(ping.repeat(4) + "event: message_start\n")).toBe(true)
      expect(body.endsWith("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")).toBe(true)
    }))
})

describe("client disconnect", () => {
  it.live("a generation already started completes, is committed to the SessionForest and the 499 is logged", () =>
    Effect.scoped(Effect.gen(function*() {
      const logged = yield* Deferred.make<Logged>()
      const capture = Logger.make(({ logLevel, message }) =>
        Deferred.doneUnsafe(logged, Effect.succeed({ level: logLevel, message }))
      )
      const finished = yield* Deferred.make<void>()
      // The real generation core, reporting when a generation ended (committed or not).
      const reporting = Layer.effect(
        Generation.Generation,
        Effect.gen(function*() {
          const generation = yield* Generation.Generation
          return Generation.Generation.of({
            generate: (session, request) =>
              generation.generate(session, request).pipe(Effect.ensuring(Deferred.succeed(finished, undefined)))
          })
        })
      )
      const context = yield* Layer.build(
        Gateway.Gateway.layer().pipe(
          Layer.provide(reporting),
          Layer.provide(Logger.layer([capture])),
          Layer.provideMerge(GatewayStack.generationStack)
        )
      )
      const gateway = Context.get(context, Gateway.Gateway)
      const sessions = Context.get(context, Sessions.Sessions)
      const forests = Context.get(context, Forests.Forests)
      // The generation waits for its Group's Runtime lease until the client is gone.
      const waiting = yield* Deferred.make<void>()
      const lease = yield* Deferred.make<void>()
      const sessionId = yield* sessions.newSessionId
      yield* forests.create(sessionId)
      yield* sessions.register(SupportSessions.sessionEntry(sessionId, {
        awaitLease: Deferred.succeed(waiting, undefined).pipe(Effect.andThen(Deferred.await(lease)))
      }))
      const req = http.request(gateway.baseUrl + "/v1/chat/completions", { method: "POST", headers: bearer(sessionId) })
      req.on("error", () => {})
      req.end(chatBody())
      yield* Deferred.await(waiting)
      req.destroy()
      // Bounded, so a missing log line fails here instead of at the test's timeout.
      expect(yield* Deferred.await(logged).pipe(Effect.timeout("10 seconds"))).toEqual({
        level: "Warn",
        message: [
          "client disconnected before agentic completion was produced; the generation still completes and is committed",
          { status: 499, code: "client_disconnect" }
        ]
      })
      yield* Deferred.succeed(lease, undefined)
      yield* Deferred.await(finished)
      const forest = yield* forests.get(sessionId)
      const lineages = Forest.leaves(forest).map((leaf) => Forest.lineage(forest, leaf))
      expect(lineages.map((lineage) => lineage.map((node) => node.kind))).toEqual([["obs", "obs", "resp"]])
      const response = lineages[0]?.[2]
      assert(response?.kind === "resp")
      expect(response.message).toMatchObject({ role: "assistant", content: "Hi there." })
    })))
})

describe("Buffered SSE failures after the headers are sent", () => {
  it.live("Chat: the OpenAI error body as data, then [DONE], on the already-open 200 stream", () =>
    Effect.gen(function*() {
      const { gateway, live, script } = yield* setup()
      const release = yield* Deferred.make<void>()
      const error = new ContextLengthError.ContextLengthError({ limit: 32, promptTokens: 40 })
      yield* Ref.set(script, () => Deferred.await(release).pipe(Effect.andThen(Effect.fail(error))))
      const stream = yield* OpenStream.openStream(
        gateway.baseUrl + "/v1/chat/completions",
        bearer(live),
        chatBody({ stream: true })
      )
      // The headers (status 200) and the connection frame are out before the generation fails.
      expect(yield* Deferred.await(stream.status)).toBe(200)
      yield* stream.arrived((text) => text === ": connected\n\n")
      yield* Deferred.succeed(release, undefined)
      const body = yield* Fiber.join(stream.done)
      expect(body).toBe(
        ": connected\n\n" +
          `data: {"error":{"message":"${error.message}","type":"invalid_request_error","param":"messages",` +
          `"code":"context_length_exceeded"}}\n\n` +
          "data: [DONE]\n\n"
      )
    }))

  it.live("Responses: response.created then response.failed carrying the error", () =>
    Effect.gen(function*() {
      const { gateway, live, script } = yield* setup()
      const release = yield* Deferred.make<void>()
      yield* Ref.set(script, () =>
        Deferred.await(release).pipe(
          Effect.andThen(
            Effect.fail(
              new GenerationError.GenerationEngineError({ reason: "engine", detail: "scripted engine failure" })
            )
          )
        ))
      const stream = yield* OpenStream.openStream(
        gateway.baseUrl + "/v1/responses",
        bearer(live),
        JSON.stringify({ model: "m", input: "hi", stream: true })
      )
      expect(yield* Deferred.await(stream.status)).toBe(200)
      yield* stream.arrived((text) => text === ": connected\n\n")
      yield* Deferred.succeed(release, undefined)
      const body = yield* Fiber.join(stream.done)
      const events = body.split("\n\n").filter((frame) => frame.startsWith("event: ")).map((frame) => {
        const [event, data] = frame.split("\n")
        return {
          event: event?.slice("event: ".length),
          data: JSON.parse(data?.slice("data: ".length) ?? "null") as unknown
        }
      })
      expect(events.map((e) => e.event)).toEqual(["response.created", "response.failed"])
      expect(events[1]?.data).toMatchObject({
        type: "response.failed",
        response: {
          status: "failed",
          model: "m",
          output: [],
          error: { message: "Internal error while handling agentic chat request." }
        }
      })
    }))

  it.live("Messages: event: error in the Anthropic shape after the ping frame", () =>
    Effect.gen(function*() {
      const { gateway, live, script } = yield* setup()
      const release = yield* Deferred.make<void>()
      yield* Ref.set(script, () =>
        Deferred.await(release).pipe(
          Effect.andThen(
            Effect.fail(
              new GenerationError.GenerationEngineError({ reason: "engine", detail: "scripted engine failure" })
            )
          )
        ))
      const stream = yield* OpenStream.openStream(
        gateway.baseUrl + "/v1/messages",
        bearer(live),
        JSON.stringify({ model: "m", max_tokens: 8, stream: true, messages: [{ role: "user", content: "hi" }] })
      )
      expect(yield* Deferred.await(stream.status)).toBe(200)
      const ping = Sse.encode(Sse.connected("messages"))
      yield* stream.arrived((text) => text === ping)
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(stream.done)).toBe(
        ping +
          "event: error\n" +
          "data: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal error while handling agentic chat request.\"}}\n\n"
      )
    }))
})

describe("client disconnect before the body is read", () => {
  it.live("is a 499 client_disconnect with the reference's message; no generation starts and the Session stays usable", () =>
    Effect.gen(function*() {
      const { gateway, live, lookedUp, logged, seen } = yield* setup()
      // Headers announce 1000 bytes; only a few are sent before the client goes away.
      const req = http.request(gateway.baseUrl + "/v1/chat/completions", {
        method: "POST",
        headers: { ...bearer(live), "content-length": "1000" }
      })
      req.on("error", () => {})
      req.write("{\"model\":")
      yield* Deferred.await(lookedUp)
      req.destroy()
      const line = yield* Deferred.await(logged)
      expect(line).toEqual({
        level: "Warn",
        message: [
          "client disconnected before agentic request body was read",
          { status: 499, code: "client_disconnect" }
        ]
      })
      expect(seen).toEqual([])
      const next = yield* request(gateway.baseUrl + "/v1/chat/completions", { headers: bearer(live), body: chatBody() })
      expect(next.status).toBe(200)
    }))

  it("the 499 answer has the protocol's error shape", () => {
    const error = ProtocolError.GatewayError.clientDisconnect("body")
    expect(ProtocolError.renderOpenAi(error)).toEqual({
      status: 499,
      body: {
        error: {
          message: "client disconnected before agentic request body was read",
          type: "client_disconnect",
          param: null,
          code: "client_disconnect"
        }
      },
      headers: {}
    })
    expect(ProtocolError.renderAnthropic(error).body).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: "client disconnected before agentic request body was read" }
    })
  })
})
