/**
 * Whole rollouts under the TestClock: the real Rollout, GroupPool, Sessions, Forests, generation core, embedded engine
 * (latency on the TestClock) and Credit, with in-process agents that call the generation core directly.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { join, resolve } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Rollout from "../../layers/rollout/Rollout.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as AgentTurn from "../support/agentTurn.ts"
import * as InProcessRollout from "../support/inProcessRollout.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")

interface Trace {
  readonly mode: string
  readonly start: number
  end: number
}

/** An agent that starts up for `startup` seconds, asks the model twice, and exports implicitly. */
const agent =
  (traces: Array<Trace>, startup: number) =>
  (services: Layer.Layer<InProcessRollout.GenerationServices>): Supervisor.InProcessAgent =>
  (input) =>
    Effect.gen(function*() {
      const sessions = yield* Sessions.Sessions
      const generation = yield* Generation.Generation
      const trace: Trace = { mode: input.rolloutMode, start: yield* Clock.currentTimeMillis, end: -1 }
      traces.push(trace)
      yield* Effect.sleep(`${startup} seconds`)
      const entry = yield* sessions.lookup(input.sessionId)
      yield* AgentTurn.checkedTurns(generation, entry, input.input.messages ?? [], 2)
      trace.end = yield* Clock.currentTimeMillis
      return { reward: trace.start % 2 }
    }).pipe(Effect.provide(services))

const build = (input: RolloutOptions.RolloutOptionsInput, traces: Array<Trace>, startup: number) =>
  Effect.gen(function*() {
    const policy = (request: { readonly turn: number }) => `Answer ${request.turn}: 4.`
    return yield* InProcessRollout.build(yield* Settings.resolve(input), {
      engine: EmbeddedEngine.EmbeddedEngine.layer({ policy, decodeTokensPerSecond: 10, prefillTokensPerSecond: 0 }),
      agent: agent(traces, startup)
    })
  })

describe("whole rollouts under the TestClock", () => {
  it.effect("prelaunch hides the next step's agent start-up behind the current step", () =>
    Effect.gen(function*() {
      const traces: Array<Trace> = []
      const { rollout, sink } = yield* build(
        {
          promptData: join(fixtures, "train.jsonl"),
          rolloutBatchSize: 1,
          nSamplesPerPrompt: 2,
          numRollout: 2,
          agenticConcurrency: 2,
          agenticPrelaunch: true,
          rolloutMaxResponseLen: 8
        },
        traces,
        30
      )
      const fiber = yield* Effect.gen(function*() {
        const r = yield* Rollout.Rollout
        return [yield* r.runStep(0), yield* r.runStep(1)] as const
      }).pipe(Effect.provide(rollout), Effect.forkChild)
      yield* TestClock.adjust("20 minutes")
      const [first, second] = yield* Fiber.join(fiber)
      assert.strictEqual(first.samples.length, 2)
      assert.strictEqual(second.samples.length, 2)
      // Both Groups start at t = 0: step 1's Group was prelaunched while step 0 ran.
      assert.deepStrictEqual(traces.slice(0, 4).map((t) => t.start), [0, 0, 0, 0])
      // Step 1's sessions end after step 0's: their first request was held until step 1's lease.
      const [a, b, c, d] = traces.map((t) => t.end)
      assert.isAbove(Math.min(c!, d!), Math.max(a!, b!))
      // The slot step 0's Group freed was filled by prelaunch too; after the last step that Group is interrupted.
      const late = traces.slice(4)
      assert.isTrue(late.length > 0 && late.every((t) => t.start > 0 && t.end === -1))
      assert.deepStrictEqual(second.samples.map((s) => s.rollout_id), [1, 1])
      assert.isTrue(
        sink.captured.lines.some((l) => l.startsWith("AGENTIC ROLLOUT event=accounting_end rollout=1 groups=1 rows=2"))
      )
    }))

  it.effect("Eval runs each dataset with ceil(T / G_d) resident prompt Groups as singleton Runtime Groups", () =>
    Effect.gen(function*() {
      const traces: Array<Trace> = []
      const { rollout } = yield* build(
        {
          promptData: join(fixtures, "train.jsonl"),
          rolloutBatchSize: 1,
          nSamplesPerPrompt: 2,
          evalPromptData: [{ name: "arith", path: join(fixtures, "train.jsonl") }],
          nSamplesPerEvalPrompt: 2,
          rolloutMaxResponseLen: 8
        },
        traces,
        10
      )
      const fiber = yield* Effect.gen(function*() {
        const r = yield* Rollout.Rollout
        return yield* r.runEval(0)
      }).pipe(Effect.provide(rollout), Effect.forkChild)
      yield* TestClock.adjust("20 minutes")
      const result = yield* Fiber.join(fiber)
      const [arith] = result.datasets
      assert.strictEqual(arith?.samples.length, 6)
      assert.deepStrictEqual(arith?.samples.map((s) => s.index), [0, 1, 2, 3, 4, 5])
      assert.deepStrictEqual(arith?.samples.map((s) => s.group_index), [0, 0, 1, 1, 2, 2])
      assert.isTrue(traces.every((t) => t.mode === "eval"))
      // T = 1 * 2, G_d = 2 → C_d = 1 prompt Group → 2 Eval sessions resident at once.
      let peak = 0
      for (const t of traces) peak = Math.max(peak, traces.filter((o) => o.start <= t.start && o.end > t.start).length)
      assert.strictEqual(peak, 2)
      assert.deepStrictEqual(traces.map((t) => t.start).slice(0, 2), [0, 0])
    }))
})
