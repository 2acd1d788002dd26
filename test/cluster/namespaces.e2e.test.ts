/**
 * Runners on hosts of their own (issue 42, "Real hosts"): each runner runs in a network namespace the test creates, with
 * its own address on a bridge the test creates (`10.213.<n>.0/24`, a range checked unused first), listening on every
 * interface (`--host 0.0.0.0`) and named by `--runner-address <its address>`; PostgreSQL, the controller and a TCP
 * load balancer (the agents' one address) stay in the root namespace. A training step must complete with every
 * Session hosted by one of the namespaced runners and the agents' requests through the load balancer.
 *
 * **Details**
 * Needs root (`ip netns`, a bridge and veth pairs); where they cannot be made the test is skipped with the reason.
 * Traffic goes only to the addresses the test made: the bridge's own (the load balancer and a relay to the embedded
 * PostgreSQL, which listens on 127.0.0.1) and the runners'. The namespaces, the veth pairs and the bridge are removed
 * when the test ends, also when it fails.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

const ip = (...args: ReadonlyArray<string>): string => execFileSync("ip", args, { encoding: "utf8", stdio: "pipe" })

/** Why namespaces cannot be made here (`undefined`: they can): a namespace is made and removed again to find out. */
const unavailable = ((): string | undefined => {
  if (process.platform !== "linux") return `network namespaces are Linux only (this is ${process.platform})`
  const probe = `rlx-probe-${process.pid}`
  try {
    ip("netns", "add", probe)
    ip("netns", "del", probe)
    return undefined
  } catch (error) {
    return `\`ip netns add\` failed (root and iproute2 needed): ${String(error).split("\n")[0]}`
  }
})()

/** A /24 under 10.213.0.0/16 that no address or route of this machine uses yet. */
const freeSubnet = (): string => {
  const used = ip("-4", "-o", "addr", "show") + ip("-4", "route", "show", "table", "all")
  for (let tries = 0; tries < 50; tries++) {
    const subnet = `10.213.${1 + Math.floor(Math.random() * 254)}`
    if (!used.includes(`${subnet}.`)) return subnet
  }
  throw new Error("no unused 10.213.x.0/24 found")
}

/** Tolerates a link or namespace that is already gone (the cleanup runs after a partial setup too). */
const quietly = (...args: ReadonlyArray<string>) => {
  try {
    ip(...args)
  } catch {
    // already removed
  }
}

/**
 * A bridge with `subnet`.1 and `count` namespaces, namespace i with `subnet`.(10 + i) on a veth pair to the bridge;
 * everything removed when the scope closes.
 */
const network = (count: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const id = (process.pid % 100_000).toString(36)
      const subnet = freeSubnet()
      const bridge = `rlxbr${id}`
      const namespaces = Array.from({ length: count }, (_, i) => `rlx-${id}-${i}`)
      const made = { bridge, namespaces, hostEnds: namespaces.map((_, i) => `rlxh${id}${i}`), subnet }
      try {
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", `${subnet}.1/24`, "dev", bridge)
        ip("link", "set", bridge, "up")
        namespaces.forEach((ns, i) => {
          const hostEnd = made.hostEnds[i]!
          const nsEnd = `rlxn${id}${i}`
          ip("netns", "add", ns)
          ip("link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd)
          ip("link", "set", hostEnd, "master", bridge)
          ip("link", "set", hostEnd, "up")
          ip("link", "set", nsEnd, "netns", ns)
          ip("-n", ns, "addr", "add", `${subnet}.${10 + i}/24`, "dev", nsEnd)
          ip("-n", ns, "link", "set", nsEnd, "up")
          ip("-n", ns, "link", "set", "lo", "up")
        })
      } catch (error) {
        removeNetwork(made)
        throw error
      }
      return made
    }),
    (made) => Effect.sync(() => removeNetwork(made))
  )

const removeNetwork = (made: {
  readonly bridge: string
  readonly namespaces: ReadonlyArray<string>
  readonly hostEnds: ReadonlyArray<string>
}) => {
  for (const ns of made.namespaces) quietly("netns", "del", ns)
  for (const link of made.hostEnds) quietly("link", "del", link)
  quietly("link", "del", made.bridge)
}

/**
 * A TCP forwarder listening on `host` (port 0) to the target `pick` names per connection; counts its connections and
 * closes with the scope.
 */
const forwarder = (host: string, pick: () => { readonly host: string; readonly port: number }) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: Net.Server; readonly port: number; readonly connections: () => number }>(
      (resume) => {
        let connections = 0
        const server = Net.createServer((socket) => {
          connections += 1
          const target = pick()
          const upstream = Net.connect(target.port, target.host)
          socket.pipe(upstream).pipe(socket)
          socket.on("error", () => upstream.destroy())
          upstream.on("error", () => socket.destroy())
        })
        server.listen(0, host, () =>
          resume(Effect.succeed({
            server,
            port: (server.address() as Net.AddressInfo).port,
            connections: () => connections
          })))
      }
    ),
    ({ server }) => Effect.sync(() => server.close())
  )

const runnerPort = 34431
const gatewayPort = 18080

describe("runners in their own network namespaces", () => {
  it.live.skipIf(unavailable !== undefined)(
    "a controller and a load balancer in the root namespace, two runners on a bridge: the step completes on them" +
      (unavailable === undefined ? "" : ` (skipped: ${unavailable})`),
    () =>
      Effect.scoped(Effect.gen(function*() {
        const net = yield* network(2)
        const bridgeAddress = `${net.subnet}.1`
        const runnerHosts = net.namespaces.map((_, i) => `${net.subnet}.${10 + i}`)
        const db = yield* EmbeddedPg.start
        const pgUrl = new URL(db.url)
        const pg = yield* forwarder(bridgeAddress, () => ({ host: "127.0.0.1", port: Number(pgUrl.port) }))
        const runnerDbUrl = new URL(db.url)
        runnerDbUrl.hostname = bridgeAddress
        runnerDbUrl.port = String(pg.port)
        // The agents' one address: round robin over the runners' gateways.
        let next = 0
        const balancer = yield* forwarder(bridgeAddress, () => ({
          host: runnerHosts[next++ % runnerHosts.length]!,
          port: gatewayPort
        }))
        const work = yield* Processes.workDir("relax-netns-")
        const reports = Path.join(work, "reports")
        Fs.mkdirSync(reports)
        const flags = (outputDir: string) =>
          Processes.memberFlags({
            agent: "protocols.mjs",
            agentEnv: [`REPORT_DIR=${reports}`],
            policy: "cluster",
            batchSize: 4,
            numRollout: 1,
            outputDir
          })
        const runners = yield* Effect.forEach(net.namespaces, (ns, i) =>
          Processes.runner(
            [
              ...flags(Path.join(work, `runner${i}`)),
              ...Processes.clusterFlags(runnerDbUrl.toString()),
              "--runner-address",
              `${runnerHosts[i]}:${runnerPort}`,
              "--host",
              "0.0.0.0",
              "--port",
              String(gatewayPort),
              "--gateway-public-url",
              `http://${bridgeAddress}:${balancer.port}/agentic_api/`
            ],
            {},
            [],
            ["ip", "netns", "exec", ns]
          ), { concurrency: "unbounded" })
        for (const [i, runner] of runners.entries()) {
          assert.include(runner.output(), `joined the cluster at ${runnerHosts[i]}:${runnerPort}`)
        }

        const outputDir = Path.join(work, "controller")
        yield* Processes.run(["rollout", ...flags(outputDir), ...Processes.clusterFlags(db.url)])
        const samples = Processes.samplesOf(outputDir, 0)
        assert.strictEqual(samples.length, 8)
        // Every Session ran on a namespaced runner, and its agent's requests came through the load balancer.
        const hosted = new Set(runners.flatMap((r) => Processes.hostedBy(r)))
        for (const sample of samples) assert.isTrue(hosted.has(sample.session_id), `${sample.session_id} not hosted`)
        assert.isAtLeast(balancer.connections(), samples.length)
        for (const file of Fs.readdirSync(reports)) {
          const report = Fs.readFileSync(Path.join(reports, file), "utf8")
          assert.notInclude(report, `"ok":false`, `${file}: ${report.slice(0, 500)}`)
        }
      })),
    600_000
  )
})
