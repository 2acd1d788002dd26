/**
 * `rollout/parser_failures` counts every training Session's unparsed turns in the step it ended, whether its Group was
 * accepted or dropped: a trainer sees all of them in the step's metrics, not only those of the exported samples. The
 * real Rollout, GroupPool, Generation (qwen25 tool-call parser) and Credit under the TestClock, in-process agents; the
 * model always calls a tool the request does not define, so every turn is one parser failure.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Result } from "effect"
import { TestClock } from "effect/testing"
import { join, resolve } from "node:path"
import { Credit } from "../../layers/credit/Credit.ts"
import { EmbeddedEngine } from "../../layers/engine/EmbeddedEngine.ts"
import type { Engine } from "../../layers/engine/Engine.ts"
import { Forests } from "../../layers/generation/Forests.ts"
import { Generation } from "../../layers/generation/Generation.ts"
import { Rollout } from "../../layers/rollout/Rollout.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as Telemetry from "../../layers/runtime/Telemetry.ts"
import { GroupPool } from "../../layers/schedule/GroupPool.ts"
import { Sessions } from "../../layers/schedule/Sessions.ts"
import { type InProcessAgent, Supervisor } from "../../layers/session/Supervisor.ts"
import { Tokenizer } from "../../layers/tokenizer/Tokenizer.ts"
import * as Settings from "../../src/config/Settings.ts"
import { creditOptions } from "../../src/index.ts"
import { calcTool } from "../fixtures/gateway/policy.ts"
import * as Requests from "../support/requests.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")
const unknownCall = "<tool_call>\n{\"name\": \"launch_rockets\", \"arguments\": {\"count\": 3}}\n</tool_call>"

let services: Layer.Layer<Sessions | Generation | Forests | Tokenizer | Engine>

/** One model turn, then: the first Session started crashes (dropping its Group); the others report reward 1. */
const agent = (started: { count: number }): InProcessAgent => (input) =>
  Effect.gen(function*() {
    const first = started.count++ === 0
    const entry = yield* (yield* Sessions).lookup(input.sessionId)
    yield* (yield* Generation).generate(
      entry,
      Requests.canonicalRequest({ messages: [...(input.input.messages ?? [])], tools: [calcTool] })
    )
    // Crashes once its sibling has finished its own turn (and Session), so both turns were committed.
    if (first) return yield* Effect.sleep("10 seconds").pipe(Effect.andThen(Effect.fail(new Error("agent crashed"))))
    return { reward: 1 }
  }).pipe(Effect.provide(services))

describe("rollout/parser_failures", () => {
  it.effect("counts the unparsed turns of dropped Groups' Sessions too", () =>
    Effect.gen(function*() {
      const settings = yield* Settings.resolve({
        promptData: join(fixtures, "train.jsonl"),
        rolloutBatchSize: 2,
        nSamplesPerPrompt: 2,
        numRollout: 1,
        agenticConcurrency: 2,
        agenticToolCallParser: "qwen25",
        rolloutMaxResponseLen: 64
      })
      const generationOptions = Generation.optionsOf(settings)
      if (Result.isFailure(generationOptions)) return yield* Effect.die(generationOptions.failure)
      const sink = Telemetry.memorySink()
      const core = Layer.mergeAll(Sessions.layer, Forests.layer, Tokenizer.layer.pipe(Layer.orDie))
      const generation = Generation.layer(generationOptions.success).pipe(
        Layer.provideMerge(EmbeddedEngine.layer({ ...EmbeddedEngine.instant, policy: () => unknownCall })),
        Layer.provideMerge(core)
      )
      services = Layer.succeedContext(yield* Layer.build(generation))
      const started = { count: 0 }
      const rollout = Rollout.layer.pipe(
        Layer.provide(Layer.mergeAll(
          RolloutConfig.RolloutConfig.layerSettings(settings),
          Supervisor.layerInProcess(agent(started), { timeoutSeconds: settings.agentTimeout }),
          Credit.layer(creditOptions(settings)).pipe(Layer.orDie),
          GroupPool.layer.pipe(Layer.provide(Telemetry.Telemetry.layerSink(sink))),
          Telemetry.Telemetry.layerSink(sink),
          services
        )),
        Layer.orDie
      )
      const fiber = yield* Effect.gen(function*() {
        return yield* (yield* Rollout).runStep(0)
      }).pipe(Effect.provide(rollout), Effect.forkChild)
      // Advance in steps: each turn finishes between adjustments, before its agent's next sleep is registered.
      for (let second = 0; second < 3600 && fiber.pollUnsafe() === undefined; second++) {
        yield* TestClock.adjust("1 second")
      }
      const step = yield* Fiber.join(fiber)
      assert.strictEqual(step.groups.accepted, 2)
      assert.strictEqual(step.groups.dropped, 1)
      assert.strictEqual(step.samples.length, 4)
      // Every Session that ran had one unparsed turn: the 4 exported ones, and the dropped Group's 2.
      assert.strictEqual(started.count, 6)
      assert.strictEqual(step.metrics["rollout/parser_failures"], 6)
      assert.strictEqual(step.metrics["rollout/parser_failures/qwen25"], 6)
    }).pipe(Effect.scoped))
})
