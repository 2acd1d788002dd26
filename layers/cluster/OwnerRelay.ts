/**
 * Cluster mode: the direct hop. A runner's gateway relays a model request for another runner's Session to that
 * runner's gateway over plain HTTP and pipes the answer back as it comes (docs/scale-out.md "One address for agents").
 *
 * **Details**
 * - The owner answers the relayed request exactly as one sent to it directly (its own SSE frames and heartbeats
 *   included, which pass through here as they are written); the request carries {@link forwardedHeader}, so an owner
 *   that no longer holds the Session answers 404 with {@link notOwnerHeader} instead of forwarding it again.
 * - Nothing of the request reached the owner when the connection could not be opened: that and a "not the owner"
 *   answer are `"fallback"` (the caller sends the request over the cluster, which knows the owner). A connection lost
 *   after the request was sent may have started a generation there: that is answered here, never re-sent (a 503
 *   `runner_unavailable` before the owner's headers, the protocol's SSE error frame or a cut connection after).
 * - A relayed request waits as long as its generation (no header or body timeout, as on the cluster path); the
 *   agent's disconnect aborts it, which the owner sees as its client's disconnect (the generation still completes
 *   and is committed there).
 * - Idle connections are kept 4 seconds, below Node's 5-second server keep-alive, so a request is never written onto a
 *   socket the owner is closing.
 */
import { Effect, type Scope } from "effect"
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http"
import { Agent, type Dispatcher, errors } from "undici"
import * as Exchange from "../gateway/NodeExchange.ts"

/** Marks a request relayed by another runner: the owner answers it itself or says it is not the owner. */
export const forwardedHeader = "x-relax-forwarded"
/** On a relayed request's 404: this runner does not hold the Session (the relaying runner asks the cluster). */
export const notOwnerHeader = "x-relax-not-owner"
/**
 * On a forwarded request's answer: how it reached the owner, `direct` (this relay), `spliced` (on a connection spliced
 * to the owner's gateway: OwnerSplice.ts) or `cluster` (an entity call).
 */
export const viaHeader = "x-relax-forwarded-via"

/** How a relay ended: answered (whatever the answer), or nothing reached the owner and the cluster should be asked. */
export type Outcome =
  | { readonly _tag: "Relayed" }
  | { readonly _tag: "Fallback"; readonly reason: "unreachable" | "not-owner"; readonly detail: string }

/** What the relay writes when the owner's connection fails after the request was sent. */
export interface Broken {
  /** The whole error answer, before any of the owner's answer was written. */
  readonly beforeHeaders: () => void
  /** The end of an SSE stream already under way (the protocol's error frame); a JSON answer is cut instead. */
  readonly sseTail: () => string
}

/** The relay: one pool of keep-alive connections per owner origin. */
export interface Relay {
  /**
   * Relay a request whose body was read, in Node's callbacks (no fiber: the gateway's route calls it from its request
   * handler); `done` gets the outcome once. The client's disconnect aborts it.
   */
  readonly start: (
    ex: Exchange.Exchange,
    origin: string,
    body: Uint8Array,
    broken: Broken,
    done: (outcome: Outcome) => void
  ) => void
}

/** Idle keep-alive time: below Node's server `keepAliveTimeout` (5 s). */
const keepAliveTimeoutMs = 4_000
/** Time to open a connection to an owner (a peer on the cluster's network answers in milliseconds). */
const connectTimeoutMs = 2_000

/** Request headers that belong to one connection, not to the request (RFC 9110 §7.6.1), and the ones set here. */
const hopHeaders = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "host",
  "content-length",
  "expect",
  forwardedHeader
])

const requestHeaders = (headers: IncomingHttpHeaders, length: number, by: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined || hopHeaders.has(name)) continue
    out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  out["content-length"] = String(length)
  out[forwardedHeader] = by
  return out
}

const responseHeaders = (headers: IncomingHttpHeaders): OutgoingHttpHeaders => {
  const out: OutgoingHttpHeaders = {}
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined || (hopHeaders.has(name) && name !== "content-length") || name === notOwnerHeader) continue
    out[name] = value
  }
  out[viaHeader] = "direct"
  return out
}

/** Errors raised before a connection to the owner existed: nothing of the request was sent. */
const notSentCodes = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT"
])

const codeOf = (error: unknown): string => {
  if (error !== null && typeof error === "object") {
    if ("code" in error && typeof error.code === "string") return error.code
    if ("cause" in error) return codeOf(error.cause)
  }
  return "unknown"
}

/**
 * The dispatch handler of one relayed request: the owner's answer is written to the client as it arrives (no response
 * stream, promise or abort signal per request), and the client's disconnect aborts the request.
 */
class Pipe implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined
  private aborted = false
  private started = false
  private streaming = false
  private notOwner = false
  private done = false
  private readonly onClientGone = () => {
    if (!this.ex.response.writableEnded) this.abort()
  }

  private readonly ex: Exchange.Exchange
  private readonly origin: string
  private readonly broken: Broken
  private readonly finish: (outcome: Outcome) => void

  constructor(ex: Exchange.Exchange, origin: string, broken: Broken, finish: (outcome: Outcome) => void) {
    this.ex = ex
    this.origin = origin
    this.broken = broken
    this.finish = finish
    ex.response.once("close", this.onClientGone)
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.aborted) controller.abort(new errors.RequestAbortedError())
    else this.controller = controller
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return
    this.started = true
    if (statusCode === 404 && headers[notOwnerHeader] !== undefined) {
      this.notOwner = true
      return
    }
    this.streaming = String(headers["content-type"] ?? "").startsWith("text/event-stream")
    if (Exchange.writable(this.ex)) Exchange.writeHead(this.ex, statusCode, responseHeaders(headers), true)
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.notOwner && Exchange.writable(this.ex)) this.ex.response.write(chunk)
  }

  onResponseEnd(): void {
    if (this.notOwner) {
      return this.end({ _tag: "Fallback", reason: "not-owner", detail: `${this.origin} does not hold the Session` })
    }
    if (Exchange.writable(this.ex)) this.ex.response.end()
    this.end({ _tag: "Relayed" })
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: unknown): void {
    if (this.done) return
    const code = codeOf(error)
    if (!this.started && notSentCodes.has(code)) {
      return this.end({ _tag: "Fallback", reason: "unreachable", detail: `${this.origin}: ${code}` })
    }
    if (Exchange.writable(this.ex)) {
      if (!this.started || this.notOwner) this.broken.beforeHeaders()
      else if (this.streaming) this.ex.response.end(this.broken.sseTail())
      else this.ex.response.destroy()
    }
    this.end({ _tag: "Relayed" })
  }

  /** Stop the request: now if it started, else as soon as undici starts it. */
  abort(): void {
    if (this.done) return
    if (this.controller !== undefined) this.controller.abort(new errors.RequestAbortedError())
    else this.aborted = true
  }

  private end(outcome: Outcome): void {
    if (this.done) return
    this.done = true
    this.ex.response.off("close", this.onClientGone)
    this.finish(outcome)
  }
}

/** The relay for this scope (its connections close with it); `by` names this runner in {@link forwardedHeader}. */
export const make = (by: string): Effect.Effect<Relay, never, Scope.Scope> =>
  Effect.gen(function*() {
    const agent = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Agent({
          keepAliveTimeout: keepAliveTimeoutMs,
          keepAliveMaxTimeout: keepAliveTimeoutMs,
          connectTimeout: connectTimeoutMs,
          headersTimeout: 0,
          bodyTimeout: 0
        })
      ),
      (agent) => Effect.promise(() => agent.destroy().catch(() => undefined))
    )
    const start: Relay["start"] = (ex, origin, body, broken, done) => {
      const pipe = new Pipe(ex, origin, broken, done)
      try {
        agent.dispatch({
          origin,
          path: ex.request.url ?? "/",
          method: "POST",
          headers: requestHeaders(ex.request.headers, body.byteLength, by),
          body
        }, pipe)
      } catch (error) {
        pipe.onResponseError(undefined, error)
      }
    }
    return { start }
  })
