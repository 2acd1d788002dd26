/**
 * The head of an HTTP/1.x request read from a connection's first bytes, before any HTTP parser saw them: where it ends
 * and the headers an API key comes in (`ApiKey`). Cluster mode routes a new connection by its first request's key
 * (docs/scale-out.md "One address for agents").
 *
 * **Details**
 * Only what routing needs is read, with Node's rules for the two headers: names are case-insensitive, a repeated
 * `Authorization` keeps its first value, a repeated `x-api-key` is joined with `", "`, values lose their surrounding
 * whitespace. The HTTP server that answers the request parses it again in full, so a head this reads differently
 * from Node can only cost a route, never an answer.
 */
import type * as ApiKey from "./ApiKey.ts"

const headTerminator = Buffer.from("\r\n\r\n")

/** The index just past the blank line that ends the request head in `bytes`, or `-1` while it is incomplete. */
export const endOf = (bytes: Uint8Array): number => {
  const at = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf(headTerminator)
  return at < 0 ? -1 : at + headTerminator.length
}

/** The key headers of a complete request head (its bytes up to {@link endOf}). */
export const keyHeaders = (head: Uint8Array): ApiKey.KeyHeaders => {
  const text = Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString("latin1")
  let authorization: string | undefined
  let apiKey: string | undefined
  // Line 0 is the request line.
  let start = text.indexOf("\r\n") + 2
  while (start > 1 && start < text.length) {
    const end = text.indexOf("\r\n", start)
    const line = text.slice(start, end < 0 ? text.length : end)
    start = end < 0 ? text.length : end + 2
    const colon = line.indexOf(":")
    if (colon <= 0) continue
    const name = line.slice(0, colon).toLowerCase()
    if (name === "authorization") {
      authorization ??= line.slice(colon + 1).trim()
    } else if (name === "x-api-key") {
      const value = line.slice(colon + 1).trim()
      apiKey = apiKey === undefined ? value : `${apiKey}, ${value}`
    }
  }
  return { authorization, "x-api-key": apiKey }
}
