/**
 * Cluster mode's forwarding at the gateway, between two real gateways on loopback over a scripted generation core:
 * a runner that does not hold a Session sends its request over the cluster (here a scripted `ForwardRoute.Transport.viaCluster` behind the gateway's `Forwarder` port)
 * until an answer names the owner's gateway and closes the connection; the client's next connection is spliced to the
 * owner's gateway (OwnerSplice), whose answers say `spliced`. A Session whose owner is known by its Group only is
 * relayed once (OwnerRelay, decided in Node's request callback) and spliced from its next connection; an owner that
 * no longer holds the Session forwards a spliced request itself; a connection through an HTTP proxy is relayed per
 * request and never closed for routing; a gateway that cannot be reached sends the request
 * over the cluster with the body as it came; a spliced connection is never spliced again; closing a gateway closes
 * the connections it spliced.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as ForwardRoute from "../../layers/cluster/ForwardRoute.ts"
import * as OwnerRelay from "../../layers/cluster/OwnerRelay.ts"
import * as Forwarder from "../../layers/gateway/Forwarder.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as SupportSessions from "../support/sessions.ts"

const completion = (content: string): Completion.Completion => ({
  id: "0123456789abcdef0123456789abcdef",
  created: 1_700_000_000,
  content,
  toolCalls: [],
  finish: "stop",
  usage: { promptTokens: 12, completionTokens: 2, cachedTokens: 0 }
})

interface Calls {
  readonly cluster: Array<ClusterWire.ForwardedRequest>
  readonly failed: Array<string>
  /** Sessions whose request was relayed (OwnerRelay) and answered. */
  readonly relayed: Array<string>
}

const calls = (): Calls => ({ cluster: [], failed: [], relayed: [] })

/**
 * A runner's gateway whose generation answers `content`, with a scripted cluster path; `spliceTo` overrides the
 * Sessions it splices (by default those an answer came for, as layers/cluster/Forward.ts remembers them).
 */
const runner = (
  content: string,
  viaCluster: (request: ClusterWire.ForwardedRequest) => ClusterWire.ForwardedResponse,
  calls: Calls,
  spliceTo?: (sessionId: string) => string | undefined,
  splicing = true
) =>
  Effect.gen(function*() {
    const owners = new Map<string, string>()
    const answeredBy = new Map<string, string>()
    const forwarder = Layer.effect(
      Forwarder.Forwarder,
      Effect.gen(function*() {
        const relay = yield* OwnerRelay.make("127.0.0.1:1")
        return ForwardRoute.port({
          relay,
          viaCluster: (request) =>
            Effect.sync(() => {
              calls.cluster.push(request)
              const answer = viaCluster(request)
              if (answer.gateway !== undefined) {
                owners.set(Routing.groupKeyOf(request.sessionId)!, answer.gateway)
                answeredBy.set(request.sessionId, answer.gateway)
              }
              return answer
            }),
          ownerOf: (sessionId) => owners.get(Routing.groupKeyOf(sessionId) ?? ""),
          splicing,
          spliceTo: spliceTo ?? ((sessionId) => splicing ? answeredBy.get(sessionId) : undefined),
          answered: (sessionId, origin) => {
            calls.relayed.push(sessionId)
            answeredBy.set(sessionId, origin)
          },
          directFailed: (sessionId, _origin, outcome) =>
            Effect.sync(() => {
              calls.failed.push(outcome.reason)
              owners.delete(Routing.groupKeyOf(sessionId) ?? "")
              answeredBy.delete(sessionId)
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

/** A client with one kept-alive connection at a time, which counts the connections it opened. */
const client = () =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      let connections = 0
      const createConnection = agent.createConnection.bind(agent)
      agent.createConnection = (options, callback) => {
        connections += 1
        return createConnection(options, callback)
      }
      return { agent, connections: () => connections }
    }),
    ({ agent }) => Effect.sync(() => agent.destroy())
  )

const post = (
  agent: http.Agent,
  url: string,
  sessionId: string,
  body: string,
  extraHeaders: Readonly<Record<string, string>> = {}
): Effect.Effect<Reply> =>
  Effect.callback<Reply>((resume) => {
    const req = http.request(url, {
      method: "POST",
      agent,
      headers: { authorization: `Bearer ${sessionId}`, "content-type": "application/json", ...extraHeaders }
    }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => (text += chunk))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: text })))
    })
    req.on("error", (error) => resume(Effect.die(error)))
    req.end(body)
  })

/**
 * The chat requests counted in `relax_agentic_requests_total` (both gateways of a test share the process's metrics):
 * each request an agent sent counts once, wherever it was answered.
 */
const chatRequestsCounted = (gateway: Gateway.Gateway["Service"]) =>
  Effect.promise(async () => {
    const text = await (await fetch(`http://127.0.0.1:${gateway.port}/metrics`)).text()
    return text.split("\n")
      .filter((line) => line.startsWith("relax_agentic_requests_total{") && line.includes(`protocol="chat"`))
      .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0)
  })

const chatBody = JSON.stringify({ model: "m", messages: [{ role: "user", content: "What is 2+2?" }] })
const session = Routing.sessionId("0123456789abcdef", "00000000000000aa", "0123456789abcdef0123456789abcdef")
const originOf = (gateway: Gateway.Gateway["Service"]) => `http://127.0.0.1:${gateway.port}`

const sibling = Routing.sessionId("0123456789abcdef", "00000000000000aa", "fedcba9876543210fedcba9876543210")

/** The owner's gateway and a front gateway whose cluster path names it. */
const ownerAndFront = Effect.gen(function*() {
  const ownerCalls = calls()
  const owner = yield* runner("from the owner", () => ({
    kind: "json",
    status: 404,
    headers: {},
    body: `{"owner-asked-the-cluster":true}`
  }), ownerCalls)
  yield* owner.sessions.register(SupportSessions.sessionEntry(session))
  const frontCalls = calls()
  const front = yield* runner("from the front", (request) => ({
    kind: "json",
    status: 200,
    headers: {},
    body: `{"cluster":${request.body.byteLength}}`,
    gateway: originOf(owner.gateway)
  }), frontCalls)
  return { owner, ownerCalls, front, frontCalls, url: `${front.gateway.baseUrl}/v1/chat/completions` }
})

/** An owner's gateway that holds `sessionId` and sends nothing over the cluster. */
const ownerHolding = (sessionId: string) =>
  Effect.gen(function*() {
    const owner = yield* runner("from the owner", () => {
      throw new Error("the owner holds the Session: nothing goes over the cluster")
    }, calls())
    yield* owner.sessions.register(SupportSessions.sessionEntry(sessionId))
    return owner
  })

describe("Gateway forwarding (cluster mode)", () => {
  it.live("the cluster first, then the client's next connection spliced to the owner's gateway", () =>
    Effect.scoped(Effect.gen(function*() {
      const { owner, ownerCalls, front, frontCalls, url } = yield* ownerAndFront
      const { agent, connections } = yield* client()
      const countedBefore = yield* chatRequestsCounted(front.gateway)

      // The first request: over the cluster, which names the owner's gateway; the connection closes after it.
      const first = yield* post(agent, url, session, chatBody)
      assert.strictEqual(first.status, 200)
      assert.strictEqual(first.headers[OwnerRelay.viaHeader], "cluster")
      assert.strictEqual(first.headers.connection, "close")
      assert.strictEqual(first.body, `{"cluster":${Buffer.byteLength(chatBody)}}`)
      assert.strictEqual(frontCalls.cluster.length, 1)

      // The next ones, on one new connection spliced to the owner's gateway, which answers them as its own (its 400s
      // too) and keeps the connection.
      const second = yield* post(agent, url, session, chatBody)
      const third = yield* post(agent, url, session, chatBody)
      const malformed = yield* post(agent, url, session, `{"model":"m","messages":7}`)
      for (const reply of [second, third]) {
        assert.strictEqual(reply.status, 200)
        assert.strictEqual(reply.headers[OwnerRelay.viaHeader], "spliced")
        assert.strictEqual(reply.headers.connection, "keep-alive")
        assert.include(reply.body, "from the owner")
      }
      assert.strictEqual(malformed.status, 400)
      assert.strictEqual(malformed.headers[OwnerRelay.viaHeader], "spliced")
      assert.strictEqual(connections(), 2)
      assert.strictEqual(frontCalls.cluster.length, 1)
      assert.deepStrictEqual(frontCalls.relayed, [])

      // The owner no longer holds it: it forwards the spliced request itself and closes the connection after it.
      yield* owner.sessions.close(session)
      const moved = yield* post(agent, url, session, chatBody)
      assert.strictEqual(moved.status, 404)
      assert.strictEqual(moved.headers[OwnerRelay.viaHeader], "cluster")
      assert.strictEqual(moved.headers.connection, "close")
      assert.strictEqual(ownerCalls.cluster.length, 1)
      assert.strictEqual(new TextDecoder().decode(ownerCalls.cluster[0]!.body), chatBody)
      assert.strictEqual((yield* chatRequestsCounted(front.gateway)) - countedBefore, 5)
    })))

  it.live("a Session whose owner is known by its Group only: relayed once, then spliced", () =>
    Effect.scoped(Effect.gen(function*() {
      const { owner, front, frontCalls, url } = yield* ownerAndFront
      yield* owner.sessions.register(SupportSessions.sessionEntry(sibling))
      const { agent, connections } = yield* client()
      const countedBefore = yield* chatRequestsCounted(front.gateway)
      yield* post(agent, url, session, chatBody)
      const relayed = yield* post(agent, url, sibling, chatBody)
      assert.strictEqual(relayed.headers[OwnerRelay.viaHeader], "direct")
      assert.strictEqual(relayed.headers.connection, "close")
      assert.deepStrictEqual(frontCalls.relayed, [sibling])
      const spliced = yield* post(agent, url, sibling, chatBody)
      assert.strictEqual(spliced.headers[OwnerRelay.viaHeader], "spliced")
      assert.strictEqual(spliced.headers.connection, "keep-alive")
      assert.include(spliced.body, "from the owner")
      assert.deepStrictEqual(frontCalls.relayed, [sibling])
      assert.strictEqual(frontCalls.cluster.length, 1)
      assert.strictEqual(connections(), 3)
      assert.strictEqual((yield* chatRequestsCounted(front.gateway)) - countedBefore, 3)
    })))

  it.live("behind an HTTP proxy (a connection that may carry many agents'): relayed per request, never spliced", () =>
    Effect.scoped(Effect.gen(function*() {
      const { frontCalls, url } = yield* ownerAndFront
      const { agent, connections } = yield* client()
      const proxied = { "x-forwarded-for": "10.0.0.7" }
      const first = yield* post(agent, url, session, chatBody, proxied)
      assert.strictEqual(first.headers[OwnerRelay.viaHeader], "cluster")
      assert.strictEqual(first.headers.connection, "keep-alive")
      for (let i = 0; i < 2; i++) {
        const next = yield* post(agent, url, session, chatBody, proxied)
        assert.strictEqual(next.headers[OwnerRelay.viaHeader], "direct")
        assert.strictEqual(next.headers.connection, "keep-alive")
        assert.include(next.body, "from the owner")
      }
      assert.strictEqual(connections(), 1)
      assert.deepStrictEqual(frontCalls.relayed, [session, session])
    })))

  it.live("--gateway-splice false: every request after the first relayed, the connection kept", () =>
    Effect.scoped(Effect.gen(function*() {
      const owner = yield* ownerHolding(session)
      const frontCalls = calls()
      const front = yield* runner(
        "front",
        () => ({
          kind: "json",
          status: 200,
          headers: {},
          body: `{"cluster":true}`,
          gateway: originOf(owner.gateway)
        }),
        frontCalls,
        undefined,
        false
      )
      const url = `${front.gateway.baseUrl}/v1/chat/completions`
      const { agent, connections } = yield* client()
      const replies = [
        yield* post(agent, url, session, chatBody),
        yield* post(agent, url, session, chatBody),
        yield* post(agent, url, session, chatBody)
      ]
      assert.deepStrictEqual(replies.map((r) => r.headers[OwnerRelay.viaHeader]), ["cluster", "direct", "direct"])
      assert.deepStrictEqual(replies.map((r) => r.headers.connection), ["keep-alive", "keep-alive", "keep-alive"])
      assert.strictEqual(connections(), 1)
    })))

  it.live("an owner gateway that cannot be reached: the request is served here, over the cluster", () =>
    Effect.scoped(Effect.gen(function*() {
      const gone = yield* Effect.scoped(
        runner("never", () => {
          throw new Error("unused")
        }, calls()).pipe(Effect.map(({ gateway }) => originOf(gateway)))
      )
      const frontCalls = calls()
      const front = yield* runner("from the front", () => ({
        kind: "json",
        status: 200,
        headers: {},
        body: `{"cluster":true}`,
        gateway: gone
      }), frontCalls)
      const url = `${front.gateway.baseUrl}/v1/chat/completions`
      const { agent } = yield* client()
      yield* post(agent, url, session, chatBody)
      const second = yield* post(agent, url, session, chatBody)
      assert.strictEqual(second.status, 200)
      assert.strictEqual(second.headers[OwnerRelay.viaHeader], "cluster")
      assert.strictEqual(second.body, `{"cluster":true}`)
      assert.deepStrictEqual(frontCalls.failed, ["unreachable"])
      assert.strictEqual(frontCalls.cluster.length, 2)
    })))

  it.live("a spliced connection is never spliced again (two runners that each name the other)", () =>
    Effect.scoped(Effect.gen(function*() {
      const origins = { a: "", b: "" }
      const bCalls = calls()
      const b = yield* runner(
        "b",
        () => ({ kind: "json", status: 200, headers: {}, body: `{"b-cluster":true}` }),
        bCalls,
        () => origins.a
      )
      origins.b = originOf(b.gateway)
      const aCalls = calls()
      const a = yield* runner(
        "a",
        () => {
          throw new Error("a splices: nothing goes over its cluster")
        },
        aCalls,
        () => origins.b
      )
      origins.a = originOf(a.gateway)
      const { agent } = yield* client()
      const reply = yield* post(agent, `${a.gateway.baseUrl}/v1/chat/completions`, session, chatBody)
      assert.strictEqual(reply.status, 200)
      assert.strictEqual(reply.body, `{"b-cluster":true}`)
      assert.strictEqual(reply.headers[OwnerRelay.viaHeader], "cluster")
      assert.strictEqual(bCalls.cluster.length, 1)
      assert.strictEqual(aCalls.cluster.length, 0)
    })))

  it.live("closing a gateway closes the connections it spliced", () =>
    Effect.scoped(Effect.gen(function*() {
      const owner = yield* ownerHolding(session)
      const scope = yield* Scope.make()
      const front = yield* runner(
        "front",
        () => {
          throw new Error("unused")
        },
        calls(),
        () => originOf(owner.gateway)
      ).pipe(Scope.provide(scope))
      const socket = net.connect(front.gateway.port, "127.0.0.1")
      const request =
        `POST /agentic_api/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${session}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(chatBody)}\r\n\r\n${chatBody}`
      const answered = yield* Effect.callback<string>((resume) => {
        let text = ""
        socket.on("data", (chunk: Buffer) => {
          text += chunk.toString("latin1")
          if (text.includes("from the owner")) resume(Effect.succeed(text))
        })
        socket.write(request)
      })
      assert.include(answered, `${OwnerRelay.viaHeader}: spliced`)
      const closed = Effect.callback<void>((resume) => {
        if (socket.destroyed) return resume(Effect.void)
        socket.once("close", () => resume(Effect.void))
      })
      yield* Scope.close(scope, Exit.void)
      yield* closed
      assert.isTrue(socket.destroyed)
    })))
})
