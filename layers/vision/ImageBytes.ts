/**
 * The bytes of an image URL as agents send them in `image_url` parts: a `data:` URI (what dataset images become), an
 * `http(s)://` URL (fetched, 30 seconds at most), or a file path (`file://` or plain, returned as the path for sharp
 * or a reader to open).
 */
import { Effect } from "effect"
import * as Thrown from "../../src/Thrown.ts"

/** A short name for an image in messages (a data URI is cut). */
export const shortName = (url: string): string => (url.length > 64 ? `${url.slice(0, 60)}…` : url)

/** The image's bytes, or its file path; the failure says why it could not be fetched. */
export const of = (url: string): Effect.Effect<Buffer | string, string> => {
  const data = /^data:[^,]*?(;base64)?,/i.exec(url)
  if (data !== null) {
    const payload = url.slice(data[0].length)
    return Effect.succeed(
      data[1] === undefined ? Buffer.from(decodeURIComponent(payload)) : Buffer.from(payload, "base64")
    )
  }
  if (/^https?:\/\//i.test(url)) {
    return Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(url, { signal })
        if (!response.ok) throw new Error(`HTTP ${response.status}`)
        return Buffer.from(await response.arrayBuffer())
      },
      catch: (error) => `cannot fetch ${url}: ${Thrown.messageOf(error)}`
    }).pipe(
      Effect.timeoutOrElse({
        duration: "30 seconds",
        orElse: () => Effect.fail(`fetching ${url} took more than 30 seconds`)
      })
    )
  }
  return Effect.succeed(url.replace(/^file:\/\//i, ""))
}
