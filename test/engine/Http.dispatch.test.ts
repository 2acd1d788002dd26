/**
 * The SGLang transport's request (undici `dispatch` with a collecting handler) against the path it replaced (undici
 * `request` under `Effect.tryPromise`, its body read with `text()`), kept here as the reference: the same bytes on the
 * wire, the same answers (status, body text) and the same errors (reason, detail) from a loopback server that answers,
 * splits, stalls, resets and refuses (the errors are classified by the same `Http.transportError`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Agent } from "undici"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Http from "../../layers/engine/sglang/Http.ts"

/** The replaced request, as it was (one agent: the test's requests all go to one server). */
const referenceRequest = (agent: Agent) =>
(
  url: string,
  path: string,
  method: "GET" | "POST",
  body?: unknown,
  headers: Record<string, string> = Http.noHeaders,
  timeoutMs?: number
): Effect.Effect<Http.Answer, Engine.EngineError> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await agent.request({
        origin: url,
        path,
        method,
        signal,
        headers: headers === Http.noHeaders
          ? (body === undefined ? {} : { "content-type": "application/json" })
          : { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
        body: body === undefined ? null : body instanceof Uint8Array ? body : JSON.stringify(body),
        ...(timeoutMs === undefined ? {} : { headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
      })
      return { status: response.statusCode, body: await response.body.text() }
    },
    catch: (error) => Http.transportError(url, path, error)
  })

const euro = Buffer.from("€", "utf8")

/** Scripted answers by path. */
const routes: Record<string, (req: IncomingMessage, res: ServerResponse, body: Buffer) => void> = {
  "/echo": (req, res, body) =>
    res.end(JSON.stringify({
      method: req.method,
      contentType: req.headers["content-type"] ?? null,
      authorization: req.headers["authorization"] ?? null,
      routing: req.headers["x-smg-routing-key"] ?? null,
      length: req.headers["content-length"] ?? null,
      body: body.toString("utf8")
    })),
  "/split": (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" })
    res.write(Buffer.concat([Buffer.from("{\"a\":\""), euro.subarray(0, 1)]))
    setImmediate(() => {
      res.write(euro.subarray(1, 2))
      setImmediate(() => res.end(Buffer.concat([euro.subarray(2), Buffer.from("x\"}")])))
    })
  },
  "/bom": (_req, res) => res.end(Buffer.concat([Buffer.of(0xef, 0xbb, 0xbf), Buffer.from("{\"b\":1}")])),
  "/bom-only": (_req, res) => res.end(Buffer.of(0xef, 0xbb, 0xbf)),
  "/invalid-utf8": (_req, res) => res.end(Buffer.of(0x7b, 0xff, 0xc3, 0x7d)),
  "/empty": (_req, res) => res.end(),
  "/no-content": (_req, res) => {
    res.writeHead(204)
    res.end()
  },
  "/error": (_req, res) => {
    res.writeHead(500, { "content-type": "text/plain" })
    res.end("Internal Server Error")
  },
  "/info": (_req, res) => {
    res.writeProcessing()
    setImmediate(() => res.end("{\"after\":\"102\"}"))
  },
  "/reset-before": (req) => req.socket.destroy(),
  "/reset-mid": (req, res) => {
    res.writeHead(200, { "content-length": "100" })
    res.write("0123456789")
    setImmediate(() => req.socket.destroy())
  },
  "/stall-headers": () => {},
  "/stall-body": (_req, res) => {
    res.writeHead(200, { "content-length": "100" })
    res.write("0123456789")
  }
}

const closed: Array<string> = []

const listen = Effect.acquireRelease(
  Effect.callback<Server>((resume) => {
    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => routes[req.url ?? ""]?.(req, res, Buffer.concat(chunks)))
      res.on("close", () => {
        if (!res.writableFinished) closed.push(req.url ?? "")
      })
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) =>
    Effect.callback<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

/** An answer or an error, as the caller sees it. */
const outcome = (exit: Exit.Exit<Http.Answer, Engine.EngineError>) =>
  Exit.isSuccess(exit)
    ? { answer: exit.value }
    : exit.cause.reasons.map((r) => r._tag === "Fail" ? { reason: r.error.reason, detail: r.error.detail } : r._tag)

describe("Http.request (undici dispatch)", () => {
  it.live("answers and fails as undici's request did, for every scripted answer", () =>
    Effect.gen(function*() {
      const server = yield* listen
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const http = yield* Http.make({ connections: 4, requestTimeout: "5 seconds", connectTimeout: "2 seconds" })
      const agent = yield* Effect.acquireRelease(
        Effect.sync(() => new Agent({ connections: 4, keepAliveTimeout: Http.keepAliveTimeoutMs })),
        (a) => Effect.promise(() => a.destroy())
      )
      const reference = referenceRequest(agent)
      const cases: ReadonlyArray<
        readonly [string, "GET" | "POST", unknown, Record<string, string> | undefined, number | undefined]
      > = [
        ["/echo", "GET", undefined, undefined, undefined],
        ["/echo", "POST", { rid: "r", text: "é€😀" }, undefined, undefined],
        ["/echo", "POST", new TextEncoder().encode("{\"input_ids\":[1,2,3]}"), { "X-SMG-Routing-Key": "s1" }, 1000],
        ["/split", "POST", { a: 1 }, undefined, undefined],
        ["/bom", "GET", undefined, undefined, undefined],
        ["/bom-only", "GET", undefined, undefined, undefined],
        ["/invalid-utf8", "GET", undefined, undefined, undefined],
        ["/empty", "POST", {}, undefined, undefined],
        ["/no-content", "GET", undefined, undefined, undefined],
        ["/error", "POST", {}, undefined, undefined],
        ["/info", "POST", {}, undefined, undefined],
        ["/reset-before", "POST", {}, undefined, undefined],
        ["/reset-mid", "GET", undefined, undefined, undefined],
        ["/stall-headers", "POST", {}, undefined, 150],
        ["/stall-body", "GET", undefined, undefined, 150]
      ]
      for (const [path, method, body, headers, timeout] of cases) {
        const mine = yield* Effect.exit(http.request(url, path, method, body, headers, timeout))
        const theirs = yield* Effect.exit(reference(url, path, method, body, headers, timeout))
        assert.deepStrictEqual(outcome(mine), outcome(theirs), path)
      }
      // A refused connection: the port of a server that is gone.
      const goneUrl = yield* Effect.scoped(
        listen.pipe(Effect.map((gone) => `http://127.0.0.1:${(gone.address() as AddressInfo).port}`))
      )
      assert.deepStrictEqual(
        outcome(yield* Effect.exit(http.request(goneUrl, "/echo", "GET"))),
        outcome(yield* Effect.exit(reference(goneUrl, "/echo", "GET")))
      )
    }).pipe(Effect.scoped))

  it.live("closes the request's connection when interrupted, before and after the answer's headers", () =>
    Effect.gen(function*() {
      const server = yield* listen
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const http = yield* Http.make({ connections: 4, requestTimeout: "5 seconds", connectTimeout: "2 seconds" })
      closed.length = 0
      for (const path of ["/stall-headers", "/stall-body"]) {
        const fiber = yield* Effect.forkChild(http.request(url, path, "POST", {}))
        yield* Effect.sleep(Duration.millis(100))
        yield* Fiber.interrupt(fiber)
        yield* Effect.sleep(Duration.millis(100))
      }
      assert.deepStrictEqual(closed, ["/stall-headers", "/stall-body"])
    }).pipe(Effect.scoped))
})
