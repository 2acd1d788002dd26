/**
 * The coding example's agent server (examples/coding-agent/server.ts) as a real process for tests: started on a free
 * loopback port, watched through its `GET /status?after=` endpoint (no clock polling), stopped with the scope.
 */
import { Effect, type Scope } from "effect"
import { spawn } from "node:child_process"
import * as Path from "node:path"

const server = Path.join(import.meta.dirname, "..", "..", "examples", "coding-agent", "server.ts")

/** What `GET /status` reports. */
export interface ServerStatus {
  readonly version: number
  readonly slots: number
  readonly running: number
  readonly queued: number
  readonly awaiting_model: number
  readonly peak_running: number
  readonly submitted: number
  readonly completed: number
  readonly failed: number
  readonly cancelled: number
}

/** Start the server with `slots` slots; its URL once it listens. Killed (and awaited) when the scope closes. */
export const start = (slots: number): Effect.Effect<string, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ readonly url: string; readonly stop: () => Promise<void> }, Error>((resume) => {
      const child = spawn(process.execPath, [server, "--slots", String(slots)], {
        stdio: ["ignore", "pipe", "inherit"]
      })
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      const stop = () => {
        child.kill("SIGTERM")
        return exited
      }
      let out = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        out += chunk
        const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1]
        if (url !== undefined) resume(Effect.succeed({ url, stop }))
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`the agent server exited with ${code}: ${out}`))))
    }),
    (started) => Effect.promise(started.stop)
  ).pipe(Effect.map((started) => started.url))

/** The status after `version` (the current one for -1). */
const statusAfter = (url: string, version: number): Effect.Effect<ServerStatus, Error> =>
  Effect.tryPromise({
    try: async (signal) => (await (await fetch(`${url}/status?after=${version}`, { signal })).json()) as ServerStatus,
    catch: (error) => new Error(`GET ${url}/status failed: ${String(error)}`)
  })

/** The current status. */
export const status = (url: string) => statusAfter(url, -1)

/** Wait for the first status that satisfies `predicate`, watching every change. */
export const waitFor = (
  url: string,
  predicate: (status: ServerStatus) => boolean
): Effect.Effect<ServerStatus, Error> =>
  Effect.gen(function*() {
    let current = yield* status(url)
    while (!predicate(current)) current = yield* statusAfter(url, current.version)
    return current
  })
