import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type * as Supervisor from "../../layers/session/Supervisor.ts"
import * as Settings from "../../src/config/Settings.ts"
import { supervisorFromSettings } from "../../src/index.ts"
import * as SessionInput from "../../src/session/SessionInput.ts"
import * as TempDir from "../support/TempDir.ts"

const launch: Supervisor.SessionLaunch = {
  sessionId: "session-1",
  groupId: "group-1",
  rolloutMode: "train",
  input: Result.getOrThrow(SessionInput.fromRow({ input: "2+2?" }, 0))
}

/** `--agent-env` entries with spaces around the key and `=` inside the value. */
const agentEnv = [" KEY = v", "PLAIN=b=c"]
const given = ["KEY", "PLAIN"]

describe("--agent-env", () => {
  it.live("gives in-process and process agents the same variables (one parser for both executors)", () =>
    Effect.gen(function*() {
      const cwd = yield* TempDir.scoped("agent-env-test-")
      const settings = yield* Settings.resolve({
        promptData: "train.jsonl",
        rolloutBatchSize: 1,
        agentEnv,
        agentCwd: cwd,
        agentCommand: `env -0 > env.dump; printf '{}' > "$RELAX_OUTPUT_JSON"`
      })

      const seen: Array<Supervisor.InProcessAgentInput["env"]> = []
      const inProcess = yield* supervisorFromSettings(settings, "http://127.0.0.1:9/agentic_api/", {
        agent: (input) => Effect.sync(() => void seen.push(input.env))
      })
      yield* inProcess.run(launch)

      const process = yield* supervisorFromSettings(settings, "http://127.0.0.1:9/agentic_api/")
      yield* process.run(launch)
      const dumped = new Map(
        Fs.readFileSync(Path.join(cwd, "env.dump"), "utf8").split("\0").filter((line) => line.length > 0).map(
          (line) => {
            const eq = line.indexOf("=")
            return [line.slice(0, eq), line.slice(eq + 1)] as const
          }
        )
      )

      const inProcessEnv = seen[0] ?? {}
      assert.deepStrictEqual(Object.keys(inProcessEnv), given)
      assert.deepStrictEqual(inProcessEnv, { KEY: " v", PLAIN: "b=c" })
      for (const key of given) assert.strictEqual(dumped.get(key), inProcessEnv[key], key)
      assert.isFalse(dumped.has(" KEY "))
    }))

  it.effect("reports a malformed entry the same way from the configuration and the agent spec", () =>
    Effect.gen(function*() {
      const fromSettings = yield* Effect.flip(
        Settings.resolve({ promptData: "t.jsonl", rolloutBatchSize: 1, agentEnv: [" = x"] })
      )
      assert.strictEqual(fromSettings.message, "--agent-env: entry ' = x' has an empty key")
    }))
})
