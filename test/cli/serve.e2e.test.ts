import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import { spawn } from "node:child_process"
import * as Path from "node:path"
import * as AgentProcesses from "../support/agentProcesses.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures", "rollout")

const rolloutArgs = [
  "--prompt-data",
  Path.join(fixtures, "train.jsonl"),
  "--label-key",
  "label",
  "--agent-command",
  `${JSON.stringify(process.execPath)} agent.mjs`,
  "--agent-cwd",
  fixtures,
  "--embedded-policy",
  Path.join(root, "test", "fixtures", "trainer", "policy.mjs"),
  "--n-samples-per-prompt",
  "2",
  "--rollout-batch-size",
  "1",
  "--rollout-max-response-len",
  "32"
]

interface Served {
  /** The URL `serve` printed. */
  readonly url: Effect.Effect<string>
  /** Exit code and everything printed, once the process ended. */
  readonly exited: Effect.Effect<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>
}

/** Start `relax-agentic serve` as a process; it is killed when the scope closes if it is still running. */
const serve = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.gen(function*() {
    const url = yield* Deferred.make<string>()
    const exited = yield* Deferred.make<{ code: number | null; stdout: string; stderr: string }>()
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [Path.join(root, "src", "cli.ts"), "serve", ...args], {
          cwd: root,
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGTERM"))
    )
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
      const found = /listening on (http:\/\/\S+\/rpc)/.exec(stdout)
      if (found !== null) Deferred.doneUnsafe(url, Effect.succeed(found[1]!))
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    child.on("close", (code) => Deferred.doneUnsafe(exited, Effect.succeed({ code, stdout, stderr })))
    return { url: Deferred.await(url), exited: Deferred.await(exited) } satisfies Served
  })

const call = (url: string, tag: string, payload: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers,
      body: `${JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })}\n`
    })
    return { status: response.status, text: await response.text() }
  })

describe("relax-agentic serve (end to end)", () => {
  it.live(
    "prints where it listens, serves a step, and exits 0 after Shutdown",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const served = yield* serve([...rolloutArgs, "--rpc-port", "0"])
        const url = yield* served.url
        assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/rpc$/)
        const step = yield* call(url, "Step", { rolloutId: 0 })
        assert.strictEqual(step.status, 200)
        const exit = JSON.parse(step.text) as { exit: { _tag: string; value: { samples: Array<unknown> } } }
        assert.strictEqual(exit.exit._tag, "Success")
        assert.strictEqual(exit.exit.value.samples.length, 2)
        const shutdown = yield* call(url, "Shutdown", {})
        assert.strictEqual(shutdown.text, `{"_tag":"Exit","requestId":"1","exit":{"_tag":"Success","value":null}}\n`)
        const ended = yield* served.exited
        assert.strictEqual(ended.code, 0, ended.stderr)
        assert.include(ended.stdout, "Shutdown requested; reaping agents and closing the servers")
      })),
    { timeout: 90_000 }
  )

  it.live("asks for the bearer token from RELAX_RPC_TOKEN", () =>
    Effect.scoped(Effect.gen(function*() {
      const served = yield* serve([...rolloutArgs, "--rpc-port", "0"], { RELAX_RPC_TOKEN: "tok" })
      const url = yield* served.url
      assert.strictEqual((yield* call(url, "Status", {})).status, 401)
      const status = yield* call(url, "Status", {}, { authorization: "Bearer tok" })
      assert.include(status.text, `"weightVersion":"0"`)
      yield* call(url, "Shutdown", {}, { authorization: "Bearer tok" })
      assert.strictEqual((yield* served.exited).code, 0)
    })), { timeout: 90_000 })

  it.live("refuses a public --rpc-host without a token, naming the fix", () =>
    Effect.scoped(Effect.gen(function*() {
      const served = yield* serve([...rolloutArgs, "--rpc-host", "0.0.0.0"])
      const ended = yield* served.exited
      assert.strictEqual(ended.code, 1)
      assert.include(ended.stderr, "--rpc-host 0.0.0.0: serving the trainer RPC beyond loopback needs a bearer token")
    })), { timeout: 90_000 })

  it.live(
    "Shutdown during a step reaps every agent and its children before serve exits",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const agents = yield* TempDir.scoped("serve-shutdown-")
        const served = yield* serve([
          "--prompt-data",
          Path.join(fixtures, "train.jsonl"),
          "--agent-command",
          "bash hang.sh",
          "--agent-cwd",
          fixtures,
          "--agent-env",
          `PIDS_DIR=${agents}`,
          "--n-samples-per-prompt",
          "2",
          "--rollout-batch-size",
          "2",
          "--rpc-port",
          "0"
        ])
        const url = yield* served.url
        // The step never finishes (the agents wait forever); its request is cut off by the shutdown.
        yield* call(url, "Step", { rolloutId: 0 }).pipe(Effect.ignore, Effect.forkScoped)
        yield* AgentProcesses.awaitAgents(agents, 4)
        const pids = AgentProcesses.recordedPids(agents)
        assert.lengthOf(pids, 8)
        assert.isTrue(pids.every(AgentProcesses.running), "every agent and its child run before Shutdown")
        assert.include((yield* call(url, "Shutdown", {})).text, `"exit":{"_tag":"Success","value":null}`)
        const ended = yield* served.exited
        assert.strictEqual(ended.code, 0, ended.stderr)
        assert.deepStrictEqual(pids.filter(AgentProcesses.running), [])
      })),
    { timeout: 90_000 }
  )
})
