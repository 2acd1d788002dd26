/**
 * The direct hop of cluster mode (layers/cluster/OwnerRelay.ts) between two real HTTP servers on loopback: a "front"
 * runner whose handler relays every request to an "owner" server scripted per test. What reaches the owner (the
 * request as it came, marked as relayed), what the client gets (the owner's answer as it is written, streamed, with
 * the way it took), and each failure: an owner that does not hold the Session or cannot be reached (fallback, nothing
 * written), a connection lost before or after the owner's headers (answered here, never re-sent), a client that leaves
 * (the owner's request is aborted).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as OwnerRelay from "../../layers/cluster/OwnerRelay.ts"
import * as Exchange from "../../layers/gateway/NodeExchange.ts"

type OwnerHandler = (request: Http.IncomingMessage, body: string, response: Http.ServerResponse) => void

/** A server on 127.0.0.1:0 for the scope. */
const listen = (handler: Http.RequestListener) =>
  Effect.acquireRelease(
    Effect.callback<Http.Server>((resume) => {
      const server = Http.createServer(handler)
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`))

const readAll = (stream: Http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    let text = ""
    stream.setEncoding("utf8")
    stream.on("data", (chunk: string) => {
      text += chunk
    })
    stream.once("end", () => resolve(text))
    stream.once("error", reject)
  })

interface Setup {
  readonly front: string
  readonly outcomes: Array<OwnerRelay.Outcome>
  readonly broken: Array<"beforeHeaders" | "sseTail">
}

/** The owner (scripted by `owner`, or `origin` when given) and the front runner relaying to it. */
const setup = (owner: OwnerHandler, origin?: string) =>
  Effect.gen(function*() {
    const ownerOrigin = origin ?? (yield* listen((request, response) => {
      readAll(request).then((body) => owner(request, body, response))
    }))
    const relay = yield* OwnerRelay.make("127.0.0.1:9999")
    const outcomes: Array<OwnerRelay.Outcome> = []
    const broken: Array<"beforeHeaders" | "sseTail"> = []
    const front = yield* listen((request, response) => {
      readAll(request).then((body) => {
        const ex = Exchange.exchange(request, response, false)
        relay.start(ex, ownerOrigin, new TextEncoder().encode(body), {
          beforeHeaders: () => {
            broken.push("beforeHeaders")
            Exchange.sendJson(ex, 503, `{"error":"unavailable"}`)
          },
          sseTail: () => {
            broken.push("sseTail")
            return "event: error\ndata: {\"lost\":true}\n\n"
          }
        }, (outcome) => {
          outcomes.push(outcome)
          // The caller's fallback (the cluster) answers what the relay did not.
          if (outcome._tag === "Fallback") Exchange.sendJson(ex, 299, `{"fallback":"${outcome.reason}"}`)
        })
      })
    })
    return { front, outcomes, broken } satisfies Setup
  })

/** POST `body` to the front runner; the status, headers and whole body (`onChunk` sees each chunk as it arrives). */
const post = (front: string, body: string, onChunk?: (chunk: string) => void) =>
  Effect.callback<{ status: number; headers: Http.IncomingHttpHeaders; body: string }, Error>((resume) => {
    const request = Http.request(`${front}/agentic_api/v1/chat/completions?x=1`, {
      method: "POST",
      headers: { authorization: "Bearer session-1", "content-type": "application/json", "x-custom": "kept" }
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => {
        text += chunk
        onChunk?.(chunk)
      })
      response.once(
        "end",
        () => resume(Effect.succeed({ status: response.statusCode!, headers: response.headers, body: text }))
      )
      response.once("error", (error) => resume(Effect.fail(error)))
    })
    request.once("error", (error) => resume(Effect.fail(error)))
    request.end(body)
  })

describe("OwnerRelay (the direct hop)", () => {
  it.live("relays the request as it came, marked, and the owner's JSON answer with its status and headers", () =>
    Effect.scoped(Effect.gen(function*() {
      const seen: Array<{ url: string; headers: Http.IncomingHttpHeaders; body: string }> = []
      const { front, outcomes } = yield* setup((request, body, response) => {
        seen.push({ url: request.url!, headers: request.headers, body })
        response.writeHead(400, { "content-type": "application/json", "x-should-retry": "false" })
        response.end(`{"error":{"param":"messages"}}`)
      })
      const answer = yield* post(front, `{"model":"m","messages":[]}`)
      assert.strictEqual(answer.status, 400)
      assert.strictEqual(answer.body, `{"error":{"param":"messages"}}`)
      assert.strictEqual(answer.headers["x-should-retry"], "false")
      assert.strictEqual(answer.headers[OwnerRelay.viaHeader], "direct")
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(seen[0]!.url, "/agentic_api/v1/chat/completions?x=1")
      assert.strictEqual(seen[0]!.body, `{"model":"m","messages":[]}`)
      assert.strictEqual(seen[0]!.headers.authorization, "Bearer session-1")
      assert.strictEqual(seen[0]!.headers["x-custom"], "kept")
      assert.strictEqual(seen[0]!.headers[OwnerRelay.forwardedHeader], "127.0.0.1:9999")
      assert.deepStrictEqual(outcomes, [{ _tag: "Relayed" }])
    })))

  it.live("streams an SSE answer as the owner writes it (a heartbeat reaches the client before the end)", () =>
    Effect.scoped(Effect.gen(function*() {
      const heartbeatSeen = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<() => void>()
      const { front, outcomes } = yield* setup((_request, _body, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" })
        response.write(": heartbeat\n\n")
        Deferred.doneUnsafe(finish, Exit.succeed(() => response.end("data: [DONE]\n\n")))
      })
      const answerFiber = yield* Effect.forkChild(post(front, "{}", (chunk) => {
        if (chunk.includes("heartbeat")) Deferred.doneUnsafe(heartbeatSeen, Exit.void)
      }))
      // The owner ends the stream only once the client has read its heartbeat: nothing is held back on the way.
      yield* Deferred.await(heartbeatSeen)
      ;(yield* Deferred.await(finish))()
      const answer = yield* Fiber.join(answerFiber)
      assert.strictEqual(answer.status, 200)
      assert.strictEqual(answer.body, ": heartbeat\n\ndata: [DONE]\n\n")
      assert.strictEqual(answer.headers[OwnerRelay.viaHeader], "direct")
      assert.deepStrictEqual(outcomes, [{ _tag: "Relayed" }])
    })))

  it.live("an owner that does not hold the Session: fallback, nothing of its 404 written", () =>
    Effect.scoped(Effect.gen(function*() {
      const { front, outcomes } = yield* setup((_request, _body, response) => {
        response.writeHead(404, { "content-type": "application/json", [OwnerRelay.notOwnerHeader]: "1" })
        response.end(`{"error":{"code":"session_discarded"}}`)
      })
      const answer = yield* post(front, "{}")
      assert.strictEqual(answer.status, 299)
      assert.strictEqual(answer.body, `{"fallback":"not-owner"}`)
      assert.strictEqual(outcomes[0]?._tag, "Fallback")
    })))

  it.live("an owner that cannot be reached: fallback (nothing was sent)", () =>
    Effect.scoped(Effect.gen(function*() {
      const closed = yield* Effect.scoped(listen(() => {}))
      const { front, outcomes } = yield* setup(() => {}, closed)
      const answer = yield* post(front, "{}")
      assert.strictEqual(answer.body, `{"fallback":"unreachable"}`)
      assert.deepInclude(outcomes[0], { _tag: "Fallback", reason: "unreachable" })
    })))

  it.live("a connection lost after the request was sent: a 503 before the owner's headers, never re-sent", () =>
    Effect.scoped(Effect.gen(function*() {
      let requests = 0
      const { front, outcomes, broken } = yield* setup((request) => {
        requests++
        request.socket.destroy()
      })
      const answer = yield* post(front, "{}")
      assert.strictEqual(answer.status, 503)
      assert.deepStrictEqual(broken, ["beforeHeaders"])
      assert.deepStrictEqual(outcomes, [{ _tag: "Relayed" }])
      assert.strictEqual(requests, 1)
    })))

  it.live("a connection lost mid-stream: the stream ends with the protocol's error frame", () =>
    Effect.scoped(Effect.gen(function*() {
      const { front, broken } = yield* setup((_request, _body, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" })
        response.write(": heartbeat\n\n", () => setImmediate(() => response.socket?.destroy()))
      })
      const answer = yield* post(front, "{}")
      assert.strictEqual(answer.status, 200)
      assert.strictEqual(answer.body, `: heartbeat\n\nevent: error\ndata: {"lost":true}\n\n`)
      assert.deepStrictEqual(broken, ["sseTail"])
    })))

  it.live("a client that leaves: the owner's request is aborted (the owner sees its client gone)", () =>
    Effect.scoped(Effect.gen(function*() {
      // Whether the owner's answer was cut (closed before it ended) rather than finished.
      const ownerSawClose = yield* Deferred.make<{ readonly cut: boolean }>()
      const { front } = yield* setup((_request, _body, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" })
        response.write(": heartbeat\n\n")
        response.once(
          "close",
          () => Deferred.doneUnsafe(ownerSawClose, Exit.succeed({ cut: !response.writableFinished }))
        )
      })
      const request = Http.request(`${front}/agentic_api/v1/chat/completions`, { method: "POST" }, (response) => {
        response.once("data", () => request.destroy())
      })
      request.on("error", () => {})
      request.end("{}")
      // The owner never ends this answer by itself: only the relay's abort closes it. A bound far above the abort's
      // few milliseconds turns a relay that keeps it open into a failed assertion instead of the test's timeout.
      const closed = yield* Deferred.await(ownerSawClose).pipe(Effect.timeoutOption("10 seconds"))
      assert.isTrue(Option.isSome(closed), "the owner's answer is still open 10 s after its client left")
      assert.deepStrictEqual(Option.getOrUndefined(closed), { cut: true })
    })))
})
