/**
 * The gateway's answers byte by byte on the wire (status line, header order, chunk framing), for the model routes
 * that node:http serves directly, spelled exactly and in the other spellings the router accepts (a doubled slash, a
 * query, a trailing slash, another case): they must look exactly like the answers of Effect's HTTP server, which the rest of the routes still use.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as net from "node:net"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as Sessions from "../support/sessions.ts"

const newSession = Sessions.registeredSession({
  sampling: Sessions.sampling({ maxNewTokens: 256 }),
  maxContextLen: 4096
})

/** Send `text` on a fresh connection and read until the server closes it (every request says `Connection: close`). */
const exchange = (port: number, text: string) =>
  Effect.callback<string>((resume) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    const done = () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    socket.on("close", done)
    socket.on("error", done)
    socket.write(text)
  })

const request = (method: string, path: string, headers: Record<string, string>, body: string) =>
  `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
  Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("") + "\r\n" + body

/** The answer with its `Date` header's value replaced (everything else is compared as it is). */
const normalized = (answer: string) => answer.replace(/\r\nDate: [^\r]*\r\n/, "\r\nDate: X\r\n")

const split = (answer: string) => {
  const end = answer.indexOf("\r\n\r\n")
  return { head: answer.slice(0, end + 4), body: answer.slice(end + 4) }
}

const chat = (content: string, stream = false) =>
  JSON.stringify({ model: "m", messages: [{ role: "user", content }], ...(stream ? { stream: true } : {}) })

describe("the gateway on the wire", () => {
  it.layer(GatewayStack.gatewayStack({ maxBodyBytes: 4096 }))((it) => {
    it.effect("JSON answers: status line, content-type, content-length, Date, Connection, in this order", () =>
      Effect.gen(function*() {
        const { port } = yield* Gateway.Gateway
        const sessionId = yield* newSession
        const auth = { Authorization: `Bearer ${sessionId}`, "Content-Type": "application/json" }
        const spellings = [
          "/agentic_api/v1/chat/completions",
          "/agentic_api//v1/chat/completions",
          "/agentic_api/chat/completions?x=1",
          "/agentic_api/v1/chat/completions/",
          "/Agentic_API/v1/Chat/Completions"
        ]
        for (const path of spellings) {
          const { head, body } = split(
            normalized(yield* exchange(port, request("POST", path, auth, chat(`hi ${path}`))))
          )
          assert.strictEqual(
            head,
            `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${
              Buffer.byteLength(body)
            }\r\nDate: X\r\nConnection: close\r\n\r\n`,
            path
          )
          assert.include(body, "\"object\":\"chat.completion\"", path)
        }
      }))

    it.effect("error answers keep the protocol's extra headers first", () =>
      Effect.gen(function*() {
        const { port } = yield* Gateway.Gateway
        const answer = normalized(
          yield* exchange(port, request("POST", "/agentic_api/v1/responses", { Authorization: "Bearer nope" }, "{}"))
        )
        const body =
          "{\"error\":{\"message\":\"Unknown or discarded agentic session 'nope'.\",\"type\":\"not_found_error\"," +
          "\"param\":\"session_id\",\"code\":\"session_discarded\"}}"
        assert.strictEqual(
          answer,
          "HTTP/1.1 404 Not Found\r\nx-should-retry: false\r\ncontent-type: application/json\r\n" +
            `content-length: ${Buffer.byteLength(body)}\r\nDate: X\r\nConnection: close\r\n\r\n${body}`
        )
        const large = normalized(
          yield* exchange(
            port,
            request("POST", "/agentic_api/v1/chat/completions", { Authorization: "Bearer nope" }, "x".repeat(5000))
          )
        )
        assert.isTrue(large.startsWith("HTTP/1.1 404 Not Found\r\nx-should-retry: false\r\n"), large)
      }))

    it.effect("Buffered SSE: headers, then one chunk for the connection frame and one for the terminal frames", () =>
      Effect.gen(function*() {
        const { port } = yield* Gateway.Gateway
        const sessionId = yield* newSession
        const auth = { Authorization: `Bearer ${sessionId}`, "Content-Type": "application/json" }
        for (const path of ["/agentic_api/v1/chat/completions", "/agentic_api//v1/chat/completions"]) {
          const { head, body } = split(
            normalized(yield* exchange(port, request("POST", path, auth, chat(`stream ${path}`, true))))
          )
          assert.strictEqual(
            head,
            "HTTP/1.1 200 OK\r\ncache-control: no-cache\r\nx-accel-buffering: no\r\ncontent-type: text/event-stream\r\n" +
              "Date: X\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
            path
          )
          const match = /^d\r\n: connected\n\n\r\n([0-9a-f]+)\r\n([\s\S]*)\r\n0\r\n\r\n$/.exec(body)
          assert.isNotNull(match, body)
          const [, size, frames] = match ?? []
          assert.strictEqual(Number.parseInt(size ?? "", 16), Buffer.byteLength(frames ?? ""), path)
          assert.isTrue(frames?.startsWith("data: {\"id\":\"chatcmpl") && frames.endsWith("data: [DONE]\n\n"), frames)
        }
      }))

    it.effect("Expect: 100-continue gets its interim answer once the request is authenticated", () =>
      Effect.gen(function*() {
        const { port } = yield* Gateway.Gateway
        const sessionId = yield* newSession
        const headers = {
          Authorization: `Bearer ${sessionId}`,
          "Content-Type": "application/json",
          Expect: "100-continue"
        }
        for (const path of ["/agentic_api/v1/chat/completions", "/agentic_api//v1/chat/completions"]) {
          const answer = normalized(yield* exchange(port, request("POST", path, headers, chat(`continue ${path}`))))
          assert.isTrue(
            answer.startsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"),
            answer
          )
        }
        const refused = normalized(
          yield* exchange(port, request("POST", "/agentic_api/v1/chat/completions", { Expect: "100-continue" }, "{}"))
        )
        assert.isTrue(refused.startsWith("HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"), refused)
      }))
  })
})
