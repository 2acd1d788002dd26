/**
 * Reading a request body on node:http (layers/gateway/NodeExchange.ts): `readBuffered`, the body taken at once when
 * Node already holds all of it, against `readBody`, the body read as it arrives. A real server on loopback and raw
 * sockets, so the test decides what the server has received when the handler looks (a body withheld until the
 * handler has looked; never a sleep).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as net from "node:net"
import * as Exchange from "../../layers/gateway/NodeExchange.ts"

/** What the handler saw: `readBuffered` once the request was complete (or at once), then `readBody` if needed. */
interface Seen {
  readonly buffered: Exchange.BodyRead | undefined
  readonly read: Exchange.BodyRead
}

const describeRead = (read: Exchange.BodyRead | undefined): string =>
  read === undefined ? "undefined" : read._tag === "Body" ? `Body ${read.bytes.toString("latin1")}` : read._tag

/**
 * One request on a fresh server: the client writes `first`; the handler calls `readBuffered` when the request is
 * complete (`waitComplete`) or at once, then writes `second` (if any) and reads the rest with `readBody`.
 */
const serve = (options: {
  readonly first: string
  readonly second?: string
  readonly waitComplete: boolean
  readonly maxBytes?: number
  readonly continuePending?: boolean
}) =>
  Effect.promise(() =>
    new Promise<Seen>((resolve, reject) => {
      const maxBytes = options.maxBytes ?? 1 << 20
      let socket: net.Socket | undefined
      const handler = (request: http.IncomingMessage, response: http.ServerResponse) => {
        const ex = Exchange.exchange(request, response, options.continuePending ?? false)
        const look = () => {
          const buffered = Exchange.readBuffered(ex, maxBytes)
          const finish = (read: Exchange.BodyRead) => {
            response.end("ok")
            server.close()
            socket?.destroy()
            resolve({ buffered, read })
          }
          if (buffered !== undefined) return finish(buffered)
          if (options.second !== undefined) socket?.write(options.second)
          Exchange.readBody(ex, maxBytes, finish)
        }
        // Yield to the event loop until the parser has seen the whole message (no timer).
        const poll = (left: number) => {
          if (!options.waitComplete || request.complete || left === 0) return look()
          setImmediate(() => poll(left - 1))
        }
        poll(10_000)
      }
      const server = http.createServer(handler)
      // As the gateway does: the 100 Continue is the handler's to send (`readBody`), not Node's.
      server.on("checkContinue", handler)
      server.on("error", reject)
      server.listen(0, "127.0.0.1", () => {
        socket = net.connect((server.address() as AddressInfo).port, "127.0.0.1", () => socket?.write(options.first))
        socket.on("error", () => undefined)
      })
    })
  )

const head = (headers: string) => `POST /x HTTP/1.1\r\nHost: x\r\n${headers}\r\n`

describe("NodeExchange.readBuffered", () => {
  it.effect("a body that came with its head is read at once, the same bytes readBody joins", () =>
    Effect.gen(function*() {
      const body = `{"messages":[${"\"é\",".repeat(3000)}"x"]}`
      const seen = yield* serve({
        first: head(`Content-Length: ${Buffer.byteLength(body)}\r\n`) + body,
        waitComplete: true
      })
      assert.strictEqual(describeRead(seen.buffered), `Body ${Buffer.from(body).toString("latin1")}`)
    }))

  it.effect("a chunked body complete in the buffer is joined from its chunks", () =>
    Effect.gen(function*() {
      const seen = yield* serve({
        first: head("Transfer-Encoding: chunked\r\n") + "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
        waitComplete: true
      })
      assert.strictEqual(describeRead(seen.buffered), "Body abcdefg")
    }))

  it.effect("an empty body is an empty Body", () =>
    Effect.gen(function*() {
      const seen = yield* serve({ first: head("Content-Length: 0\r\n"), waitComplete: true })
      assert.strictEqual(describeRead(seen.buffered), "Body ")
    }))

  it.effect("a body not all there yet is left to readBody, which gets all of it", () =>
    Effect.gen(function*() {
      const seen = yield* serve({
        first: head("Content-Length: 10\r\n") + "01234",
        second: "56789",
        waitComplete: false
      })
      assert.strictEqual(describeRead(seen.buffered), "undefined")
      assert.strictEqual(describeRead(seen.read), "Body 0123456789")
    }))

  it.effect("a complete body over the limit is TooLarge, as readBody says it", () =>
    Effect.gen(function*() {
      const chunked = head("Transfer-Encoding: chunked\r\n") + "6\r\nabcdef\r\n0\r\n\r\n"
      const seen = yield* serve({ first: chunked, waitComplete: true, maxBytes: 5 })
      assert.strictEqual(describeRead(seen.buffered), "TooLarge")
      const streamed = yield* serve({
        first: head("Transfer-Encoding: chunked\r\n"),
        second: "6\r\nabcdef\r\n0\r\n\r\n",
        waitComplete: false,
        maxBytes: 5
      })
      assert.strictEqual(describeRead(streamed.read), "TooLarge")
    }))

  it.effect("a pending 100 Continue leaves the body to readBody, which sends the interim answer", () =>
    Effect.gen(function*() {
      const seen = yield* serve({
        first: head("Content-Length: 3\r\nExpect: 100-continue\r\n") + "abc",
        waitComplete: true,
        continuePending: true
      })
      assert.strictEqual(describeRead(seen.buffered), "undefined")
      assert.strictEqual(describeRead(seen.read), "Body abc")
    }))
})
