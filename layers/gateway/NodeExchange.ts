/**
 * One HTTP exchange on a plain `node:http` request and response: what the gateway's model routes use instead of
 * Effect's `HttpServerRequest` / `HttpServerResponse` (see "The model routes on node:http" in docs/architecture.md).
 *
 * **Details**
 * Connection handling is the one of `@effect/platform-node`'s `NodeHttpServer`, which serves every other route of
 * the same server, so a client sees the same bytes whichever path answered: `Connection: close` when more than
 * 256 KiB of a declared body would stay unread (or a `100 Continue` was never sent), and after the response an unread
 * body is drained up to 256 KiB to keep the connection alive, else the connection is closed after a grace period.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http"

/**
 * Node's own fields of a request and its response, used as NodeHttpServer uses them: `_last` is set when a response
 * closes its connection, and `_consuming` keeps Node from dumping an unread body itself; `_header` is the response's
 * head as Node wrote it, kept until the response is gone. Not in Node's types.
 */
interface NodeInternals {
  readonly request: IncomingMessage & { _consuming: boolean }
  readonly response: ServerResponse & { _last: boolean; readonly _header: string | null }
}

/** Unread request body discarded after the response to keep the connection alive; past this it closes. */
const maxDrainBytes = 256 * 1024
/** Time the client gets to read the response after the FIN, before a destroy can reset the connection. */
const closeGracePeriodMs = 500

/** A request, its response, and what the connection handling needs to know about the body. */
export interface Exchange {
  readonly request: IncomingMessage
  readonly response: ServerResponse
  /** Body bytes read so far. */
  bytesRead: number
  /** The client sent `Expect: 100-continue` and no `100 Continue` went out yet. */
  continuePending: boolean
  /** Headers every answer of this exchange carries unless it sets them (cluster mode: how the request came here). */
  answerHeaders: Readonly<Record<string, string>> | undefined
  /** Close the connection after the answer (cluster mode: the client's next connection is routed again). */
  closeAfter: boolean
}

export const exchange = (request: IncomingMessage, response: ServerResponse, continuePending: boolean): Exchange => ({
  request,
  response,
  bytesRead: 0,
  continuePending,
  answerHeaders: undefined,
  closeAfter: false
})

/** Whether the answer must close the connection (decided when the headers are written, as `NodeHttpServer` does). */
const closesConnection = (ex: Exchange, streaming: boolean): boolean => {
  const request = ex.request
  if (request.httpVersionMajor !== 1 || request.complete) return false
  if (ex.continuePending) return true
  const declared = request.headers["content-length"]
  return !streaming && declared !== undefined && Number(declared) - ex.bytesRead > maxDrainBytes
}

/** Whether the response can still be written (the client is there and nothing was answered yet or it is open). */
export const writable = (ex: Exchange): boolean => !ex.response.destroyed && !ex.response.writableEnded

/**
 * Write `chunk` to the socket now, in this task: Node's HTTP response corks its socket on a write and sends on the next
 * tick, after the scheduler's slice, so a slice of many writes (a tick of heartbeats) would send them all in one go
 * outside the slice's time.
 */
export const writeNow = (ex: Exchange, chunk: string): void => {
  const socket = ex.response.socket
  socket?.cork()
  ex.response.write(chunk)
  socket?.uncork()
}

/**
 * Write the status and headers (nothing is sent before the first body write). A streaming answer's head is made one
 * flat string: Node builds it by concatenating each header's pieces, a tree of ~24 small strings that the response
 * keeps for as long as it is open, and a held request (waiting for its lease) is open for seconds, so each of those
 * strings would be copied by every young-generation collection it survives (docs/performance.md, section 3, "Issue
 * 41, fourth pass").
 */
export const writeHead = (ex: Exchange, status: number, headers: OutgoingHttpHeaders, streaming: boolean): void => {
  const all = ex.answerHeaders === undefined ? headers : { ...ex.answerHeaders, ...headers }
  ex.response.writeHead(
    status,
    ex.closeAfter || closesConnection(ex, streaming) ? { ...all, connection: "close" } : all
  )
  if (streaming) flattenHead(ex.response)
}

/**
 * Reading a character of a concatenated string makes V8 flatten it in place: the string becomes one copy of its
 * characters and the pieces it was made of are garbage. Its value does not change.
 */
const flattenHead = (response: ServerResponse): void => {
  // Node's response carries `_header` (see NodeInternals); its types do not declare it.
  ;(response as NodeInternals["response"])._header?.charCodeAt(0)
}

/** Answer with a complete JSON text: headers and body leave in one write. */
export const sendJson = (ex: Exchange, status: number, text: string, headers: OutgoingHttpHeaders = {}): void => {
  if (!writable(ex)) return
  writeHead(
    ex,
    status,
    { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) },
    false
  )
  ex.response.end(text)
}

/** How reading a body ended. */
export type BodyRead =
  | { readonly _tag: "Body"; readonly bytes: Buffer }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Aborted" }

/**
 * The whole body at once when Node already holds all of it, else `undefined` (then {@link readBody}). A request whose
 * head and body came in the reads that parsed its head (a client writes both together; on one connection that is the
 * usual case up to ~128 KiB, where Node stops reading under backpressure) is complete before the scheduler runs its task: its body is taken from the
 * stream's buffer in one `read()`, with no listeners and no wait, and the same bytes {@link readBody} would join.
 */
export const readBuffered = (ex: Exchange, maxBytes: number): BodyRead | undefined => {
  const request = ex.request
  if (
    !request.complete || request.destroyed || ex.continuePending || ex.bytesRead !== 0 ||
    request.readableFlowing === true || request.readableEncoding !== null
  ) return undefined
  const length = request.readableLength
  if (length > maxBytes) return { _tag: "TooLarge" }
  if (length === 0) return { _tag: "Body", bytes: Buffer.alloc(0) }
  // Decoding boundary: a byte stream with no encoding reads as one Buffer of all it holds (its chunks joined).
  const bytes = request.read() as Buffer
  ex.bytesRead = bytes.length
  return { _tag: "Body", bytes }
}

/**
 * Read the whole body, at most `maxBytes` (more is `TooLarge`, and reading stops), as the chunks that arrived joined
 * once; a request that ends before its body is complete (the client went away) is `Aborted`.
 */
export const readBody = (ex: Exchange, maxBytes: number, done: (read: BodyRead) => void): void => {
  const request = ex.request
  // The request starts as a scheduled task: its connection may have gone away before it ran (Node destroyed the
  // request, and no `close` or `end` is coming any more).
  if (request.destroyed) return done({ _tag: "Aborted" })
  if (ex.continuePending) {
    ex.continuePending = false
    if (!ex.response.headersSent) ex.response.writeContinue()
  }
  const chunks: Array<Buffer> = []
  let settled = false
  const settle = (read: BodyRead): void => {
    if (settled) return
    settled = true
    request.off("data", onData)
    request.off("end", onEnd)
    request.off("error", onAbort)
    request.off("close", onAbort)
    done(read)
  }
  const onData = (chunk: Buffer): void => {
    ex.bytesRead += chunk.length
    if (ex.bytesRead > maxBytes) {
      request.pause()
      settle({ _tag: "TooLarge" })
    } else chunks.push(chunk)
  }
  const onEnd = (): void =>
    settle({ _tag: "Body", bytes: chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks) })
  const onAbort = (): void => settle({ _tag: "Aborted" })
  request.on("data", onData)
  request.on("end", onEnd)
  request.on("error", onAbort)
  request.on("close", onAbort)
}

/**
 * After the response: drain an unread body up to 256 KiB to keep the connection alive, else close the connection
 * (Node would drain a body in full, or reset a closing connection while body bytes are still queued and lose the
 * response). Register with `response.prependListener("finish", ...)` so it runs before Node's own `finish` listener.
 */
export const teardownBody = (request: IncomingMessage, response: ServerResponse): void => {
  if (request.complete || request.destroyed) return
  const socket = request.socket
  // Node's objects carry these fields (see NodeInternals); its types do not declare them.
  const internals = { request, response } as NodeInternals
  if (internals.response._last) {
    // Skips Node's dump of the body; unlike `_dumped`, it keeps the parser applying backpressure.
    internals.request._consuming = true
    internals.response._last = false
    return closeSocket(socket)
  }
  let bytes = 0
  request.on("data", (chunk: Buffer) => {
    bytes += chunk.length
    if (bytes > maxDrainBytes) {
      request.pause()
      closeSocket(socket)
    }
  })
  request.resume()
}

const closeSocket = (socket: IncomingMessage["socket"]): void => {
  if (socket.destroyed) return
  socket.end()
  const timer = setTimeout(() => socket.destroy(), closeGracePeriodMs)
  socket.once("close", () => clearTimeout(timer))
}
