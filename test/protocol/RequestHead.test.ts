/**
 * The request head read from a connection's first bytes (src/protocol/RequestHead.ts): where it ends and the two key
 * headers, read as Node reads them (checked against node:http's own parse of the same bytes).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as ApiKey from "../../src/protocol/ApiKey.ts"
import * as RequestHead from "../../src/protocol/RequestHead.ts"

const bytes = (text: string) => Buffer.from(text, "latin1")

/** The key headers node:http parses from `head` (sent to a real server on loopback). */
const nodeHeaders = (head: string) =>
  Effect.callback<ApiKey.KeyHeaders>((resume) => {
    const server = http.createServer((request, response) => {
      resume(
        Effect.succeed({ authorization: request.headers.authorization, "x-api-key": request.headers["x-api-key"] })
      )
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
    "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n"
  ]
  for (const head of heads) {
    it.live(`keyHeaders reads the key as node:http does: ${JSON.stringify(head.split("\r\n").slice(2, -2))}`, () =>
      Effect.gen(function*() {
        const ours = RequestHead.keyHeaders(bytes(head))
        const node = yield* nodeHeaders(head)
        assert.deepStrictEqual(ApiKey.parse(ours), ApiKey.parse(node))
        assert.deepStrictEqual(ours, node)
      }))
  }
})
