/**
 * The connection router of cluster mode (layers/cluster/OwnerSplice.ts) in front of real HTTP servers on loopback: a
 * "front" whose route names the "owner" for the key `owned`, and an owner behind its own router. The first request
 * head is read however the client's bytes are split, the owner strips the preamble however it arrives and marks the
 * connection, and what is not spliced (another key, no key, a request relayed by another runner or
 * through an HTTP proxy) reaches the front's own
 * HTTP server as it was sent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as OwnerRelay from "../../layers/cluster/OwnerRelay.ts"
import * as OwnerSplice from "../../layers/cluster/OwnerSplice.ts"

/** An HTTP server behind a router on 127.0.0.1:0 for the scope; it answers who it is and whether it was spliced. */
const routedServer = (name: string, route: OwnerSplice.Route, unreachable: Array<string> = []) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly port: number; readonly server: net.Server }>((resume) => {
      const httpServer = http.createServer({ maxHeaderSize: 1024 }, (request, response) => {
        let length = 0
        request.on("data", (chunk: Buffer) => (length += chunk.length))
        request.on("end", () => response.end(`${name} spliced=${OwnerSplice.isSpliced(request.socket)} body=${length}`))
      })
      const router = OwnerSplice.make(route, (_key, origin) => unreachable.push(origin), 1024)
      const server = net.createServer((socket) => router.accept(socket, (s) => httpServer.emit("connection", s)))
      server.listen(0, "127.0.0.1", () => {
        resume(Effect.succeed({ port: (server.address() as net.AddressInfo).port, server }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )

/** Send `parts` one by one (each after the previous was flushed, with a pause) and read until the connection ends. */
const exchange = (port: number, parts: ReadonlyArray<string>) =>
  Effect.callback<string>((resume) => {
    const socket = net.connect(port, "127.0.0.1")
    let text = ""
    socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")))
    socket.on("close", () => resume(Effect.succeed(text)))
    socket.on("error", () => undefined)
    const send = (i: number) => {
      if (i === parts.length) return
      socket.write(parts[i]!, () => setTimeout(() => send(i + 1), 5))
    }
    socket.once("connect", () => send(0))
  })

const request = (key: string, body = "{}") =>
  `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n` +
  `Content-Length: ${body.length}\r\n\r\n${body}`

const bodyOf = (answer: string) => answer.slice(answer.indexOf("\r\n\r\n") + 4)

const setup = Effect.gen(function*() {
  const owner = yield* routedServer("owner", () => undefined)
  const front = yield* routedServer("front", (key) => key === "owned" ? `http://127.0.0.1:${owner.port}` : undefined)
  return { owner, front }
})

describe("OwnerSplice", () => {
  it.live("a head split into single bytes is still routed; the owner sees the request marked as spliced", () =>
    Effect.scoped(Effect.gen(function*() {
      const { front } = yield* setup
      const text = request("owned", "x".repeat(3000))
      const answer = yield* exchange(front.port, [...text.slice(0, 120)].concat([text.slice(120)]))
      assert.strictEqual(bodyOf(answer), "owner spliced=true body=3000")
    })))

  it.live("a preamble split across writes is stripped", () =>
    Effect.scoped(Effect.gen(function*() {
      const { owner } = yield* setup
      const preamble = OwnerSplice.preamble.toString("latin1")
      const answer = yield* exchange(owner.port, [
        preamble.slice(0, 3),
        preamble.slice(3, 9),
        preamble.slice(9),
        request("x")
      ])
      assert.strictEqual(bodyOf(answer), "owner spliced=true body=2")
    })))

  it.live("other connections reach the front's own server as they were sent, spliced=false", () =>
    Effect.scoped(Effect.gen(function*() {
      const { front } = yield* setup
      assert.strictEqual(bodyOf(yield* exchange(front.port, [request("mine", "abc")])), "front spliced=false body=3")
      // A request another runner relayed here (and the connection it came on) is answered here, never sent on.
      const relayed = request("owned", "ab").replace("Host: x\r\n", `Host: x\r\n${OwnerRelay.forwardedHeader}: r1\r\n`)
      assert.strictEqual(bodyOf(yield* exchange(front.port, [relayed])), "front spliced=false body=2")
      // Through an HTTP proxy (it may pool its connections for many agents): served here.
      for (const header of ["X-Forwarded-For: 10.0.0.7", "Via: 1.1 balancer", "Forwarded: for=10.0.0.7"]) {
        const proxied = request("owned", "abc").replace("Host: x\r\n", `Host: x\r\n${header}\r\n`)
        assert.strictEqual(bodyOf(yield* exchange(front.port, [proxied])), "front spliced=false body=3")
      }
      // No key at all.
      const keyless = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
      assert.strictEqual(bodyOf(yield* exchange(front.port, [keyless])), "front spliced=false body=0")
      // A head longer than the router reads is the HTTP server's to refuse (431).
      const long = `POST / HTTP/1.1\r\nHost: x\r\nX-Long: ${"y".repeat(2000)}\r\n\r\n`
      assert.match(yield* exchange(front.port, [long]), /^HTTP\/1\.1 431/)
    })))

  it.live("an owner that cannot be connected to: reported, and the connection served here", () =>
    Effect.scoped(Effect.gen(function*() {
      const closedPort = yield* Effect.scoped(routedServer("gone", () => undefined).pipe(Effect.map((s) => s.port)))
      const unreachable: Array<string> = []
      const front = yield* routedServer("front", () => `http://127.0.0.1:${closedPort}`, unreachable)
      assert.strictEqual(bodyOf(yield* exchange(front.port, [request("owned", "abcd")])), "front spliced=false body=4")
      assert.deepStrictEqual(unreachable, [`http://127.0.0.1:${closedPort}`])
    })))

  it.live("a client that leaves before its head is complete is closed", () =>
    Effect.scoped(Effect.gen(function*() {
      const { front } = yield* setup
      const closed = yield* Effect.callback<boolean>((resume) => {
        const socket = net.connect(front.port, "127.0.0.1", () => socket.end("POST / HTTP/1.1\r\nHost"))
        socket.on("data", () => resume(Effect.succeed(false)))
        socket.on("close", () => resume(Effect.succeed(true)))
      })
      assert.isTrue(closed)
    })))
})
