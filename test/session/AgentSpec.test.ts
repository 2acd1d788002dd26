import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as AgentSpec from "../../src/session/AgentSpec.ts"

const failure = <A, E>(result: Result.Result<A, E>): E => {
  if (Result.isSuccess(result)) throw new Error("expected a failure")
  return result.failure
}

describe("agent spec", () => {
  it("splits --agent-env on the first '=', trimming the key and keeping the value verbatim", () => {
    assert.deepStrictEqual(Result.getOrThrow(AgentSpec.parseEnv([" FOO =bar", "URL=a=b ", "EMPTY="])), {
      FOO: "bar",
      URL: "a=b ",
      EMPTY: ""
    })
  })

  it("rejects --agent-env entries without '=' or with an empty key", () => {
    assert.strictEqual(
      failure(AgentSpec.parseEnv(["FOO"])).message,
      "--agent-env: entry 'FOO' must have the form KEY=VALUE"
    )
    assert.strictEqual(failure(AgentSpec.parseEnv(["=x"])).message, "--agent-env: entry '=x' has an empty key")
  })

  it("rejects --agent-env keys starting with RELAX_", () => {
    const error = failure(AgentSpec.parseEnv(["OK=1", "RELAX_SESSION_ID=x"]))
    assert.strictEqual(error.option, "--agent-env")
    assert.match(
      error.message,
      /^--agent-env: key 'RELAX_SESSION_ID' is reserved: keys starting with RELAX_ are set by Relax/
    )
  })

  it("trims the command and defaults the timeout to 1800 seconds", () => {
    assert.deepStrictEqual(Result.getOrThrow(AgentSpec.make({ command: " bash run.sh\n", cwd: "/tmp" })), {
      command: "bash run.sh",
      cwd: "/tmp",
      env: {},
      timeoutSeconds: 1800
    })
  })

  it("rejects an empty command, a missing cwd and a non-positive timeout", () => {
    assert.strictEqual(failure(AgentSpec.make({ command: "  ", cwd: "/tmp" })).option, "--agent-command")
    assert.include(
      failure(AgentSpec.make({ command: "  ", cwd: "/tmp" })).message,
      "managed agent command must be non-empty"
    )
    assert.strictEqual(failure(AgentSpec.make({ command: "x", cwd: undefined })).option, "--agent-cwd")
    for (const timeoutSeconds of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const error = failure(AgentSpec.make({ command: "x", cwd: "/tmp", timeoutSeconds }))
      assert.strictEqual(error.option, "--agent-timeout")
      assert.include(error.message, "managed agent timeout must be positive")
    }
  })

  it("builds the process environment: parent, then --agent-env, then the Relax variables", () => {
    const spec = Result.getOrThrow(AgentSpec.make({ command: "x", cwd: "/tmp", env: ["FOO=agent", "PATH=/agent/bin"] }))
    const env = AgentSpec.environment(
      { PATH: "/usr/bin", FOO: "parent", HOME: "/root", GONE: undefined, RELAX_SESSION_ID: "stale" },
      spec,
      {
        RELAX_INPUT_JSON: "/io/session_input.json",
        RELAX_OUTPUT_JSON: "/io/session_output.json",
        RELAX_SESSION_IO_DIR: "/io",
        RELAX_BASE_URL: "http://127.0.0.1:1/agentic_api/",
        RELAX_SESSION_ID: "s-1",
        RELAX_ROLLOUT_MODE: "eval",
        RELAX_GROUP_ID: "g-1"
      }
    )
    assert.deepStrictEqual(env, {
      PATH: "/agent/bin",
      FOO: "agent",
      HOME: "/root",
      RELAX_SESSION_ID: "s-1",
      RELAX_INPUT_JSON: "/io/session_input.json",
      RELAX_OUTPUT_JSON: "/io/session_output.json",
      RELAX_SESSION_IO_DIR: "/io",
      RELAX_BASE_URL: "http://127.0.0.1:1/agentic_api/",
      RELAX_ROLLOUT_MODE: "eval",
      RELAX_GROUP_ID: "g-1"
    })
  })
})
