/**
 * Cluster mode: a new agent connection whose first request is for another runner's Session is spliced, byte for byte,
 * to that runner's gateway, so its requests cost this runner two socket copies instead of an HTTP request and answer
 * each (docs/scale-out.md "One address for agents").
 *
 * **Details**
 * - A connection's first request head is read before the HTTP server sees it (`src/protocol/RequestHead.ts`). When its
 *   key names a Session this runner does not hold and whose owner's gateway answered for that very Session before
 *   (`route`), this runner opens a connection to that gateway, writes {@link preamble} and the bytes read, and copies
 *   both ways until either side closes. Otherwise the bytes go back to the socket and the HTTP server parses them as
 *   if nothing had happened. An SDK keeps one connection per agent, so a forwarded Group's Sessions are spliced from
 *   the request after the one that named the owner (the gateway closes that connection: `Exchange.closeAfter`).
 * - The owner reads the preamble, marks the connection ({@link isSpliced}: its answers say
 *   `x-relax-forwarded-via: spliced`) and never splices it again, so stale knowledge cannot make a loop. A request on it
 *   for a Session the owner does not hold is forwarded from there like any other and closes the connection after its
 *   answer, so the client's next connection is routed again.
 * - An owner gateway that cannot be connected to (nothing was sent) is reported (`unreachable`) and the connection is
 *   served here. A connection lost after bytes were sent is closed on the other side too: the agent's client sees a
 *   reset, as with the owner itself, and its retry is routed again.
 * - Closing the gateway closes every spliced connection (their requests in flight are cut: nothing here knows where
 *   one ends).
 */
import { Result } from "effect"
import { Socket } from "node:net"
import * as ApiKey from "../../src/protocol/ApiKey.ts"
import * as RequestHead from "../../src/protocol/RequestHead.ts"
import * as OwnerRelay from "./OwnerRelay.ts"

/** The first bytes a runner writes on a spliced connection (never the start of an HTTP request). */
export const preamble = Buffer.from("RELAX-SPLICE/1\r\n", "latin1")

/** A route for a new connection: the owner gateway's origin for a Session key, or `undefined` to serve it here. */
export type Route = (sessionKey: string) => string | undefined

/** The connection router of one gateway. */
export interface Router {
  /** Take a new connection; `serve` hands it (its bytes read so far put back) to this gateway's HTTP server. */
  readonly accept: (socket: Socket, serve: (socket: Socket) => void) => void
  /** Close every spliced connection (the gateway is closing). */
  readonly closeAll: () => void
}

/** Connections another runner spliced here. */
const spliced = new WeakSet<object>()

/** Whether a connection was spliced here by another runner (its answers say so: `x-relax-forwarded-via: spliced`). */
export const isSpliced = (socket: object | null): boolean => socket !== null && spliced.has(socket)

/** Time to open a connection to an owner's gateway (a peer on the cluster's network answers in milliseconds). */
const connectTimeoutMs = 2_000
/** A new connection that sends no complete request head in this time is closed (Node's own `headersTimeout`). */
const headTimeoutMs = 60_000

const startsWithPreamble = (bytes: Buffer): boolean =>
  bytes.length >= preamble.length && bytes.compare(preamble, 0, preamble.length, 0, preamble.length) === 0

/** Whether `bytes` could still become the preamble with more bytes. */
const couldBePreamble = (bytes: Buffer): boolean =>
  bytes.length < preamble.length && preamble.compare(bytes, 0, bytes.length, 0, bytes.length) === 0

const hostAndPort = (origin: string): { readonly host: string; readonly port: number } | undefined => {
  try {
    const url = new URL(origin)
    const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
    return { host, port: Number(url.port || 80) }
  } catch {
    return undefined
  }
}

const codeOf = (error: unknown): string =>
  error !== null && typeof error === "object" && "code" in error && typeof error.code === "string"
    ? error.code
    : String(error)

/**
 * The router: `route` names the owner gateway of a Session key (or not), `unreachable` hears of an owner gateway that
 * could not be connected to, with the Session that asked for it; `maxHeadBytes` bounds the head read before routing
 * (a longer head is served here, where the HTTP server answers it 431).
 */
export const make = (
  route: Route,
  unreachable: (sessionKey: string, origin: string, detail: string) => void,
  maxHeadBytes: number
): Router => {
  const live = new Set<Socket>()
  const targets = new Map<string, { readonly host: string; readonly port: number } | undefined>()

  const targetOf = (origin: string) => {
    if (!targets.has(origin)) targets.set(origin, hostAndPort(origin))
    return targets.get(origin)
  }

  const splice = (
    client: Socket,
    read: Buffer,
    key: string,
    origin: string,
    serve: (socket: Socket) => void
  ): void => {
    const target = targetOf(origin)
    if (target === undefined) {
      unreachable(key, origin, "not an http origin")
      return serveHere(client, read, serve)
    }
    const upstream = new Socket()
    let connected = false
    // The agent went away while the owner's gateway was being connected to.
    const onEarlyGone = () => upstream.destroy()
    client.on("error", onEarlyGone)
    client.once("close", onEarlyGone)
    const settle = () => {
      clearTimeout(timer)
      client.off("error", onEarlyGone)
      client.off("close", onEarlyGone)
    }
    const timer = setTimeout(
      () => upstream.destroy(Object.assign(new Error("connect timeout"), { code: "ETIMEDOUT" })),
      connectTimeoutMs
    )
    upstream.once("error", (error) => {
      if (connected) return
      settle()
      if (client.destroyed) return
      unreachable(key, origin, `${origin}: ${codeOf(error)}`)
      serveHere(client, read, serve)
    })
    upstream.connect({ host: target.host, port: target.port, noDelay: true }, () => {
      connected = true
      settle()
      if (client.destroyed) return upstream.destroy()
      live.add(client)
      upstream.write(Buffer.concat([preamble, read]))
      const closeBoth = () => {
        live.delete(client)
        client.destroy()
        upstream.destroy()
      }
      client.on("error", closeBoth)
      upstream.on("error", closeBoth)
      client.once("close", closeBoth)
      upstream.once("close", closeBoth)
      client.pipe(upstream)
      upstream.pipe(client)
    })
  }

  const accept: Router["accept"] = (socket, serve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const stop = () => {
      socket.off("data", onData)
      socket.off("end", onGone)
      socket.off("error", onGone)
      socket.off("timeout", onGone)
      socket.setTimeout(0)
      socket.pause()
    }
    // The client closed, failed or stayed silent before a whole head: nothing to answer.
    const onGone = () => {
      stop()
      socket.destroy()
    }
    const onData = (chunk: Buffer) => {
      chunks.push(chunk)
      size += chunk.length
      const read = chunks.length === 1 ? chunk : Buffer.concat(chunks, size)
      if (couldBePreamble(read)) return
      if (startsWithPreamble(read)) {
        stop()
        spliced.add(socket)
        return serveHere(socket, read.subarray(preamble.length), serve)
      }
      const end = RequestHead.endOf(read)
      if (end < 0 && size <= maxHeadBytes) return
      stop()
      const key = end < 0 ? undefined : sessionKeyOf(read.subarray(0, end))
      const origin = key === undefined ? undefined : route(key)
      if (key === undefined || origin === undefined) return serveHere(socket, read, serve)
      splice(socket, read, key, origin, serve)
    }
    socket.on("data", onData)
    socket.once("end", onGone)
    socket.once("error", onGone)
    socket.setTimeout(headTimeoutMs)
    socket.once("timeout", onGone)
  }

  return {
    accept,
    closeAll: () => {
      for (const socket of live) socket.destroy()
      live.clear()
    }
  }
}

/**
 * Headers that say a connection may carry other clients' requests: one relayed by another runner (`OwnerRelay`: it is
 * answered here or refused, never sent on), and those an HTTP proxy adds (a load balancer that pools its connections
 * to the runners mixes Sessions on one connection).
 */
const sharedConnectionHeaders = [OwnerRelay.forwardedHeader, "x-forwarded-for", "forwarded", "via"] as const

/**
 * Whether a request's connection is one agent's own, so it may be spliced: no header says it is relayed or comes
 * through an HTTP proxy. Only such a connection is closed to be routed again (`Exchange.closeAfter`).
 */
export const ownConnection = (headers: Readonly<Record<string, unknown>>): boolean =>
  sharedConnectionHeaders.every((name) => headers[name] === undefined)

const routingHeaders: ReadonlySet<string> = new Set(["authorization", "x-api-key", ...sharedConnectionHeaders])

/** The Session key a connection is routed by: its first request's API key, on one agent's own connection. */
const sessionKeyOf = (head: Uint8Array): string | undefined => {
  const found = RequestHead.headers(head, routingHeaders)
  if (sharedConnectionHeaders.some((name) => found.has(name))) return undefined
  const key = ApiKey.parse({ authorization: found.get("authorization"), "x-api-key": found.get("x-api-key") })
  return Result.isSuccess(key) ? key.success : undefined
}

/** Hand a connection to the HTTP server with the bytes read from it put back. */
const serveHere = (socket: Socket, read: Buffer, serve: (socket: Socket) => void): void => {
  if (read.length > 0) socket.unshift(read)
  serve(socket)
  socket.resume()
}
