/**
 * Cluster mode's forwarding at the gateway, between two real gateways on loopback over a scripted generation core:
 * a runner that does not hold a Session sends its request over the cluster (here a scripted `Forwarder.viaCluster`)
 * until an answer names the owner's gateway, then relays the Group's requests to that gateway directly (decided in
 * Node's request callback); an owner that no longer holds the Session, or a gateway that cannot be reached, sends the
 * request over the cluster again with the body as it came, and a relayed request is never forwarded a second time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as http from "node:http"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as ModelRoute from "../../layers/gateway/ModelRoute.ts"
import * as OwnerRelay from "../../layers/gateway/OwnerRelay.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import type * as Wire from "../../src/cluster/Wire.ts"
import type * as Completion from "../../src/protocol/completion.ts"
import * as SupportSessions from "../support/sessions.ts"

const completion = (content: string): Completion.Completion => ({
  id: "0123456789abcdef0123456789abcdef",
  created: 1_700_000_000,
  content,
  toolCalls: [],
  finish: "stop",
  usage: { promptTokens: 12, completionTokens: 2, cachedTokens: 0 }
})

/** A runner's gateway whose generation answers `content`, with a scripted cluster path. */
const runner = (
  content: string,
  viaCluster: (request: Wire.ForwardedRequest) => Wire.ForwardedResponse,
  calls: { cluster: Array<Wire.ForwardedRequest>; failed: Array<string> }
) =>
  Effect.gen(function*() {
    const owners = new Map<string, string>()
    const forwarder = Layer.effect(
      ModelRoute.Forwarder,
      Effect.gen(function*() {
        const relay = yield* OwnerRelay.make("127.0.0.1:1")
        return ModelRoute.Forwarder.of({
          relay,
          viaCluster: (request) =>
            Effect.sync(() => {
              calls.cluster.push(request)
              const answer = viaCluster(request)
              if (answer.gateway !== undefined) owners.set(Routing.groupKeyOf(request.sessionId)!, answer.gateway)
              return answer
            }),
          ownerOf: (sessionId) => owners.get(Routing.groupKeyOf(sessionId) ?? ""),
          directFailed: (sessionId, _origin, outcome) =>
            Effect.sync(() => {
              calls.failed.push(outcome.reason)
              owners.delete(Routing.groupKeyOf(sessionId) ?? "")
            })
        })
      })
    )
    const generation = Layer.succeed(Generation.Generation, {
      generate: () => Effect.succeed(completion(content))
    })
    const context = yield* Layer.build(
      Gateway.Gateway.layer({}).pipe(
        Layer.provideMerge(Sessions.Sessions.layer),
        Layer.provide(generation),
        Layer.provide(forwarder)
      )
    )
    return { gateway: Context.get(context, Gateway.Gateway), sessions: Context.get(context, Sessions.Sessions) }
  })

interface Reply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

const post = (url: string, sessionId: string, body: string): Effect.Effect<Reply> =>
  Effect.callback<Reply>((resume) => {
    const req = http.request(url, {
      method: "POST",
      headers: { authorization: `Bearer ${sessionId}`, "content-type": "application/json" }
    }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => (text += chunk))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: text })))
    })
    req.on("error", (error) => resume(Effect.die(error)))
    req.end(body)
  })

const chatBody = JSON.stringify({ model: "m", messages: [{ role: "user", content: "What is 2+2?" }] })
const session = Routing.sessionId("0123456789abcdef", "0123456789abcdef0123456789abcdef")
const originOf = (gateway: Gateway.Gateway["Service"]) => `http://127.0.0.1:${gateway.port}`

describe("Gateway forwarding (cluster mode)", () => {
  it.live("the cluster first, then the direct hop to the gateway its answer named; not-owner goes back to the cluster", () =>
    Effect.scoped(Effect.gen(function*() {
      const ownerCalls = { cluster: [] as Array<Wire.ForwardedRequest>, failed: [] as Array<string> }
      const owner = yield* runner("from the owner", () => {
        throw new Error("the owner holds the Session: nothing goes over the cluster")
      }, ownerCalls)
      yield* owner.sessions.register(SupportSessions.sessionEntry(session))
      const calls = { cluster: [] as Array<Wire.ForwardedRequest>, failed: [] as Array<string> }
      const front = yield* runner("from the front", (request) => ({
        kind: "json",
        status: 200,
        headers: {},
        body: `{"cluster":${request.body.byteLength}}`,
        gateway: originOf(owner.gateway)
      }), calls)
      const url = `${front.gateway.baseUrl}/v1/chat/completions`

      // The first request: over the cluster, which names the owner's gateway.
      const first = yield* post(url, session, chatBody)
      assert.strictEqual(first.status, 200)
      assert.strictEqual(first.headers[OwnerRelay.viaHeader], "cluster")
      assert.strictEqual(first.body, `{"cluster":${Buffer.byteLength(chatBody)}}`)
      assert.strictEqual(calls.cluster.length, 1)
      // The gateway keeps idle connections longer than the relay (4 s) and a balancer (60 s) keep theirs.
      assert.strictEqual(first.headers["keep-alive"], `timeout=${Gateway.keepAliveTimeoutMs / 1000}`)

      // The next ones: relayed to the owner's gateway, which answers them as its own (its 400s too).
      const second = yield* post(url, session, chatBody)
      assert.strictEqual(second.status, 200)
      assert.strictEqual(second.headers[OwnerRelay.viaHeader], "direct")
      assert.include(second.body, "from the owner")
      const malformed = yield* post(url, session, `{"model":"m","messages":7}`)
      assert.strictEqual(malformed.status, 400)
      assert.strictEqual(malformed.headers[OwnerRelay.viaHeader], "direct")
      assert.strictEqual(calls.cluster.length, 1)

      // The owner no longer holds it: the relayed request is refused there (never forwarded again) and this runner
      // sends it over the cluster with the body as it came.
      yield* owner.sessions.close(session)
      const moved = yield* post(url, session, chatBody)
      assert.strictEqual(moved.headers[OwnerRelay.viaHeader], "cluster")
      assert.deepStrictEqual(calls.failed, ["not-owner"])
      assert.strictEqual(calls.cluster.length, 2)
      assert.strictEqual(new TextDecoder().decode(calls.cluster[1]!.body), chatBody)
      assert.deepStrictEqual(ownerCalls.cluster, [])
    })))

  it.live("an owner gateway that cannot be reached: the request goes over the cluster", () =>
    Effect.scoped(Effect.gen(function*() {
      const gone = yield* Effect.scoped(
        runner("never", () => {
          throw new Error("unused")
        }, { cluster: [], failed: [] }).pipe(Effect.map(({ gateway }) => originOf(gateway)))
      )
      const calls = { cluster: [] as Array<Wire.ForwardedRequest>, failed: [] as Array<string> }
      const front = yield* runner("from the front", () => ({
        kind: "json",
        status: 200,
        headers: {},
        body: `{"cluster":true}`,
        gateway: gone
      }), calls)
      const url = `${front.gateway.baseUrl}/v1/chat/completions`
      yield* post(url, session, chatBody)
      const second = yield* post(url, session, chatBody)
      assert.strictEqual(second.status, 200)
      assert.strictEqual(second.headers[OwnerRelay.viaHeader], "cluster")
      assert.strictEqual(second.body, `{"cluster":true}`)
      assert.deepStrictEqual(calls.failed, ["unreachable"])
      assert.strictEqual(calls.cluster.length, 2)
    })))
})
