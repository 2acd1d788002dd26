/**
 * Faults at scale, under the TestClock: at least 1,000 Sessions of the real Rollout, GroupPool, Sessions, Forests,
 * generation core and Credit, whose in-process agents crash at random points, hang (before their first request too),
 * ignore the stop signal for a while, start children of their own, write corrupt output or exit without a request, over
 * an engine that errors, stalls or drops connections. After every step: no agent or child fiber left running and no span
 * of the step's work (Sessions, agents, model requests) still open; at the end no resident slot left, no Session still
 * accepting requests, and every accepted sample intact (its tokens, mask and logprobs line up, its reward is the one
 * its agent reported). The counts are printed. The real-process sample is in test/e2e/faults.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Result } from "effect"
import { TestClock } from "effect/testing"
import { join, resolve } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Rollout from "../../layers/rollout/Rollout.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as Dataset from "../../src/schedule/Dataset.ts"
import * as AgentTurn from "../support/agentTurn.ts"
import * as InProcessRollout from "../support/inProcessRollout.ts"
import * as ScriptedEngine from "../support/scriptedEngine.ts"
import * as Tracing from "../support/tracing.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")

const agentFaults = [
  ["normal", 0.51],
  ["crash-before-request", 0.05],
  ["hang-before-request", 0.04],
  ["crash-after-turn", 0.08],
  ["hang", 0.06],
  ["ignore-stop", 0.06],
  ["children", 0.08],
  ["corrupt-output", 0.06],
  ["no-request", 0.06]
] as const
type AgentFault = (typeof agentFaults)[number][0]

const pick = (random: () => number): AgentFault => {
  let r = random()
  for (const [fault, p] of agentFaults) {
    if (r < p) return fault
    r -= p
  }
  return "normal"
}

interface Ledger {
  readonly faults: Map<string, number>
  readonly engineFaults: Map<string, number>
  readonly rewards: Map<string, number>
  readonly sessionIds: Array<string>
  running: number
  children: number
  childrenStarted: number
}

const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)

/** The agent: draws its fault, then runs two model turns (or fails, hangs, ...) and exports implicitly. */
const agent =
  (ledger: Ledger, random: () => number) =>
  (services: Layer.Layer<InProcessRollout.GenerationServices>): Supervisor.InProcessAgent =>
  (input) =>
    Effect.gen(function*() {
      const fault = pick(random)
      count(ledger.faults, fault)
      ledger.sessionIds.push(input.sessionId)
      ledger.running++
      const sessions = yield* Sessions.Sessions
      const generation = yield* Generation.Generation
      yield* Effect.sleep("2 seconds")
      if (fault === "crash-before-request") return yield* Effect.fail(new Error("agent crashed at start"))
      if (fault === "no-request") return { reward: 1 }
      // Never reaches Runtime, so the active-time budget never runs: the first-request deadline must stop it.
      if (fault === "hang-before-request") return yield* Effect.never
      if (fault === "children") {
        // Children that would run forever: the agent's end must take them down.
        for (let i = 0; i < 2; i++) {
          ledger.childrenStarted++
          ledger.children++
          yield* Effect.forkChild(
            Effect.forever(Effect.sleep("1 second")).pipe(Effect.ensuring(Effect.sync(() => ledger.children--)))
          )
        }
      }
      const entry = yield* sessions.lookup(input.sessionId)
      yield* AgentTurn.checkedTurns(generation, entry, input.input.messages ?? [], 2, (turn) => {
        if (fault === "crash-after-turn") return Effect.fail(new Error(`agent crashed after turn ${turn}`))
        if (fault === "hang") return Effect.never
        // Ignores the stop for 10 s (what SIGKILL after the grace period ends for a process), then hangs.
        if (fault === "ignore-stop") {
          return Effect.uninterruptible(Effect.sleep("10 seconds")).pipe(Effect.andThen(Effect.never))
        }
        return Effect.void
      })
      if (fault === "corrupt-output") return "{\"reward\": 1, "
      const reward = random() < 0.5 ? 0 : 1
      ledger.rewards.set(input.sessionId, reward)
      return { reward }
    }).pipe(
      Effect.ensuring(Effect.sync(() => ledger.running--)),
      Effect.provide(services)
    )

/** The engine: errors, stalls and dropped connections on a seeded share of the requests. */
const faultyEngine = (ledger: Ledger, random: () => number) =>
  ScriptedEngine.wrapGenerate((generate) => (request) =>
    Effect.suspend(() => {
      const r = random()
      if (r < 0.02) {
        count(ledger.engineFaults, "error")
        return Effect.fail(new Engine.EngineError({ reason: "status", detail: "SGLang returned 503", status: 503 }))
      }
      if (r < 0.03) {
        count(ledger.engineFaults, "dropped-connection")
        return Effect.fail(new Engine.EngineError({ reason: "unreachable", detail: "socket hang up" }))
      }
      if (r < 0.04) {
        count(ledger.engineFaults, "stall")
        return Effect.never
      }
      return generate(request)
    })
  )

const build = (input: RolloutOptions.RolloutOptionsInput, ledger: Ledger) =>
  Effect.gen(function*() {
    const policy = (request: { readonly turn: number }) => `Answer ${request.turn}: 4.`
    return yield* InProcessRollout.build(yield* Settings.resolve(input), {
      engine: faultyEngine(ledger, Dataset.seededRandom(7)).pipe(
        Layer.provide(
          EmbeddedEngine.EmbeddedEngine.layer({ policy, decodeTokensPerSecond: 20, prefillTokensPerSecond: 0 })
        )
      ),
      agent: agent(ledger, Dataset.seededRandom(2026))
    })
  })

/** Every span the run opens (the generation core, GroupPool and Supervisor work in `Effect.fn` spans). */
const { spans, tracer } = Tracing.recordingTracer()

describe("faults at scale (TestClock)", () => {
  it.effect(
    "1,000+ Sessions with crashing, hanging, stubborn, forking, corrupt and silent agents over a faulty engine",
    () =>
      Effect.gen(function*() {
        const ledger: Ledger = {
          faults: new Map(),
          engineFaults: new Map(),
          rewards: new Map(),
          sessionIds: [],
          running: 0,
          children: 0,
          childrenStarted: 0
        }
        const { rollout, sink, sessions } = yield* build({
          promptData: join(fixtures, "train.jsonl"),
          rolloutBatchSize: 8,
          nSamplesPerPrompt: 2,
          numRollout: 1000,
          agenticConcurrency: 8,
          agenticMaxConsecutiveDrops: 0,
          agentTimeout: 120,
          rolloutMaxResponseLen: 8
        }, ledger)
        const spanNames: Array<string> = []
        let spansOpened = 0
        const openSpans = () => spans.filter((span) => span.status._tag === "Started").map((span) => span.name)
        let steps = 0
        let accepted = 0
        let dropped = 0
        const checked: Array<string> = []
        while (ledger.sessionIds.length < 1000) {
          const fiber = yield* Effect.gen(function*() {
            return yield* (yield* Rollout.Rollout).runStep(steps)
          }).pipe(Effect.provide(rollout), Effect.forkChild)
          yield* TestClock.adjust("3 hours")
          const step = yield* Fiber.join(fiber)
          steps++
          accepted += step.groups.accepted
          dropped += step.groups.dropped
          // Between steps (no prelaunch) nothing of the step may still run.
          assert.strictEqual(ledger.running, 0, `agents still running after step ${step.rolloutId}`)
          assert.strictEqual(ledger.children, 0, `agent children still running after step ${step.rolloutId}`)
          // No work of the step is left running: every span it opened (Sessions, agents, model requests) has ended.
          assert.deepStrictEqual(openSpans(), [], `work still running after step ${step.rolloutId}`)
          spanNames.push(...new Set(spans.map((span) => span.name)))
          spansOpened += spans.length
          spans.length = 0
          assert.strictEqual(step.samples.length, 16)
          for (const sample of step.samples) {
            assert.strictEqual(sample.loss_mask.length, sample.response_length)
            assert.strictEqual(sample.rollout_log_probs.length, sample.response_length)
            assert.isAbove(sample.response_length, 0)
            assert.strictEqual(sample.status, "completed")
            assert.include(sample.response, "Answer 0: 4.")
            assert.include(sample.response, "Answer 1: 4.")
            assert.strictEqual(sample.reward, ledger.rewards.get(sample.session_id))
            checked.push(sample.session_id)
          }
        }
        const residents = sink.captured.lines
          .filter((line) => line.includes("event=accounting_end"))
          .map((line) => /resident_groups=(\d+)/.exec(line)?.[1])
        assert.strictEqual(residents.length, steps)
        assert.isTrue(residents.every((n) => n === "0"), `resident Groups left after a step: ${residents.join(",")}`)
        // Every Session is dead: its id no longer opens the model API.
        for (const sessionId of ledger.sessionIds) {
          assert.isTrue(
            Result.isFailure(yield* sessions.lookup(sessionId).pipe(Effect.result)),
            `${sessionId} still live`
          )
        }
        assert.isAtLeast(ledger.sessionIds.length, 1000)
        assert.isTrue(sink.captured.lines.some((line) => line.includes("without sending its first model request")))
        assert.strictEqual(new Set(checked).size, checked.length)
        assert.isAbove(dropped, 0)
        for (const name of ["SessionRunner.session", "Generation.attempt", "Rollout.runStep"]) {
          assert.include(spanNames, name)
        }
        for (const [fault] of agentFaults) {
          assert.isAbove(ledger.faults.get(fault) ?? 0, 0, `no ${fault} agent was drawn`)
        }
        for (const fault of ["error", "dropped-connection", "stall"]) {
          assert.isAbove(ledger.engineFaults.get(fault) ?? 0, 0, `no engine ${fault} was drawn`)
        }
        console.log(
          `faults: ${ledger.sessionIds.length} Sessions in ${steps} steps; Groups accepted ${accepted}, dropped ${dropped}; ` +
            `samples checked ${checked.length}; agents ${JSON.stringify(Object.fromEntries(ledger.faults))}; ` +
            `engine ${
              JSON.stringify(Object.fromEntries(ledger.engineFaults))
            }; children started ${ledger.childrenStarted}, ` +
            `left running ${ledger.children}; agents left running ${ledger.running}; spans opened ${spansOpened}, left open 0`
        )
      }).pipe(Effect.withTracer(tracer)),
    120_000
  )
})
