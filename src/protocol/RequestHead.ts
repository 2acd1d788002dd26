/**
 * The head of an HTTP/1.x request read from a connection's first bytes, before any HTTP parser saw them: where it ends
 * and the values of a few headers. Cluster mode routes a new connection by its first request's key (`ApiKey`;
 * docs/scale-out.md "One address for agents").
 *
 * **Details**
 * Only the headers asked for are read, with Node's rules: names are case-insensitive, a repeated `Authorization` keeps
 * its first value, other repeated headers are joined with `", "`, values lose their surrounding whitespace. The HTTP
 * server that answers the request parses it again in full, so a head this reads differently from Node can only cost
 * a route, never an answer.
 */

const headTerminator = Buffer.from("\r\n\r\n")

/** The index just past the blank line that ends the request head in `bytes`, or `-1` while it is incomplete. */
export const endOf = (bytes: Uint8Array): number => {
  const at = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf(headTerminator)
  return at < 0 ? -1 : at + headTerminator.length
}

/**
 * The values of the headers `names` (lower case) in a complete request head (its bytes up to {@link endOf}), with
 * Node's rules: a repeated `authorization` keeps its first value, other repeated headers are joined with `", "`.
 */
export const headers = (head: Uint8Array, names: ReadonlySet<string>): ReadonlyMap<string, string> => {
  const text = Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString("latin1")
  const found = new Map<string, string>()
  // Line 0 is the request line.
  let start = text.indexOf("\r\n") + 2
  while (start > 1 && start < text.length) {
    const end = text.indexOf("\r\n", start)
    const line = text.slice(start, end < 0 ? text.length : end)
    start = end < 0 ? text.length : end + 2
    const colon = line.indexOf(":")
    if (colon <= 0) continue
    const name = line.slice(0, colon).toLowerCase()
    if (!names.has(name)) continue
    const value = line.slice(colon + 1).trim()
    const before = found.get(name)
    if (before === undefined) found.set(name, value)
    else if (name !== "authorization") found.set(name, `${before}, ${value}`)
  }
  return found
}
