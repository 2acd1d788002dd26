/**
 * The request head read from a connection's first bytes (src/protocol/RequestHead.ts): where it ends and the headers
 * asked for, read as Node reads them (checked against node:http's own parse of the same bytes).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as ApiKey from "../../src/protocol/ApiKey.ts"
import * as RequestHead from "../../src/protocol/RequestHead.ts"

const bytes = (text: string) => Buffer.from(text, "latin1")

const names = new Set(["authorization", "x-api-key", "x-relax-forwarded"])

/** The headers `names` as node:http parses them from `head` (sent to a real server on loopback). */
const nodeHeaders = (head: string) =>
  Effect.callback<ReadonlyMap<string, string>>((resume) => {
    const server = http.createServer((request, response) => {
      const found = new Map<string, string>()
      for (const name of names) {
        const value = request.headers[name]
        if (typeof value === "string") found.set(name, value)
      }
      resume(Effect.succeed(found))
      response.end()
      server.close()
    })
    server.listen(0, "127.0.0.1", () => {
      const socket = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1", () => socket.end(head))
      socket.on("data", () => socket.destroy())
    })
  })

describe("RequestHead", () => {
  it("endOf: just past the blank line, -1 while incomplete", () => {
    assert.strictEqual(RequestHead.endOf(bytes("POST / HTTP/1.1\r\nHost: x\r\n\r\n{}")), 28)
    assert.strictEqual(RequestHead.endOf(bytes("POST / HTTP/1.1\r\nHost: x\r\n\r")), -1)
    assert.strictEqual(RequestHead.endOf(bytes("")), -1)
    const view = bytes("xxPOST / HTTP/1.1\r\n\r\n").subarray(2)
    assert.strictEqual(RequestHead.endOf(view), 19)
  })

  const heads = [
    "POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\n\r\n",
    "POST / HTTP/1.1\r\nhost: x\r\nAUTHORIZATION:   Bearer   abc  \r\n\r\n",
    "POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer first\r\nAuthorization: Bearer second\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: x\r\nx-api-key: one\r\nX-Api-Key: two\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: x\r\nX-API-KEY:key\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: x\r\nX-Relax-Forwarded: a\r\nx-relax-forwarded: b\r\nAuthorization: Bearer k\r\n\r\n"
  ]
  for (const head of heads) {
    it.live(`headers are read as node:http reads them: ${JSON.stringify(head.split("\r\n").slice(2, -2))}`, () =>
      Effect.gen(function*() {
        const ours = RequestHead.headers(bytes(head), names)
        const node = yield* nodeHeaders(head)
        assert.deepStrictEqual(ours, node)
        const key = (found: ReadonlyMap<string, string>) =>
          ApiKey.parse({ authorization: found.get("authorization"), "x-api-key": found.get("x-api-key") })
        assert.deepStrictEqual(key(ours), key(node))
      }))
  }
})
