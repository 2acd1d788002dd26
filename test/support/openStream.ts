/** Streamed HTTP requests to a test server, observed frame by frame. */
import { Deferred, Effect } from "effect"
import * as http from "node:http"

/**
 * A streamed request whose frames are observed as they arrive on the socket, so a test can act between frames
 * (waiting on real I/O, never on real time).
 */
export const openStream = (url: string, headers: Record<string, string>, body: string) =>
  Effect.gen(function*() {
    const status = yield* Deferred.make<number>()
    let received = ""
    const waiters: Array<{ readonly until: (text: string) => boolean; readonly resume: () => void }> = []
    const arrived = (until: (text: string) => boolean) =>
      Effect.callback<void>((resume) => {
        if (until(received)) return resume(Effect.void)
        waiters.push({ until, resume: () => resume(Effect.void) })
      })
    const done = yield* Effect.callback<string>((resume) => {
      const req = http.request(url, { method: "POST", headers }, (res) => {
        Deferred.doneUnsafe(status, Effect.succeed(res.statusCode ?? 0))
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          received += chunk
          for (const w of waiters.splice(0)) {
            if (w.until(received)) w.resume()
            else waiters.push(w)
          }
        })
        res.on("end", () => resume(Effect.succeed(received)))
      })
      req.on("error", (error) => resume(Effect.die(error)))
      req.end(body)
    }).pipe(Effect.forkChild)
    return { status, arrived, received: () => received, done }
  })
