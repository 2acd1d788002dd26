/**
 * `rollout/parser_failures` counts every training Session's unparsed turns in the step it ended, whether its Group was
 * accepted or dropped: a trainer sees all of them in the step's metrics, not only those of the exported samples. The
 * real Rollout, GroupPool, Generation (qwen25 tool-call parser) and Credit under the TestClock, in-process agents; the
 * model always calls a tool the request does not define, so every turn is one parser failure.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { join, resolve } from "node:path"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import type * as Supervisor from "../../layers/session/Supervisor.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as InProcessRollout from "../support/inProcessRollout.ts"
import * as Requests from "../support/requests.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")
const unknownCall = "<tool_call>\n{\"name\": \"launch_rockets\", \"arguments\": {\"count\": 3}}\n</tool_call>"

/** One model turn, then: the first Session started crashes (dropping its Group); the others report reward 1. */
const agent =
  (started: { count: number }) =>
  (services: Layer.Layer<InProcessRollout.GenerationServices>): Supervisor.InProcessAgent =>
  (input) =>
    Effect.gen(function*() {
      const first = started.count++ === 0
      const entry = yield* (yield* Sessions.Sessions).lookup(input.sessionId)
      yield* (yield* Generation.Generation).generate(
        entry,
        Requests.canonicalRequest({ messages: [...(input.input.messages ?? [])], tools: [Policy.calcTool] })
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
      const started = { count: 0 }
      const { step } = yield* InProcessRollout.runStep(settings, {
        policy: () => unknownCall,
        agent: agent(started),
        maxSeconds: 3600
      })
      assert.strictEqual(step.groups.accepted, 2)
      assert.strictEqual(step.groups.dropped, 1)
      assert.strictEqual(step.samples.length, 4)
      // Every Session that ran had one unparsed turn: the 4 exported ones, and the dropped Group's 2.
      assert.strictEqual(started.count, 6)
      assert.strictEqual(step.metrics["rollout/parser_failures"], 6)
      assert.strictEqual(step.metrics["rollout/parser_failures/qwen25"], 6)
    }).pipe(Effect.scoped))
})
