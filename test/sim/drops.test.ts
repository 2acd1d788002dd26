/**
 * The consecutive-drop guard under the TestClock: an agent that fails on every Group stops the rollout after
 * `--agentic-max-consecutive-drops` drops in a row instead of being refilled forever.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { join, resolve } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as Rollout from "../../layers/rollout/Rollout.ts"
import * as GroupPool from "../../layers/schedule/GroupPool.ts"
import * as PoolContract from "../../layers/schedule/PoolContract.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as InProcessRollout from "../support/inProcessRollout.ts"
import * as Sim from "../support/simPool.ts"

/** Every Session that started also ended (exited, crashed or was interrupted): no agent is left running. */
const assertAllEnded = (timeline: ReadonlyArray<Sim.Entry>) => {
  const key = (e: Sim.Entry) => `${e.group}#${e.position}`
  const started = new Set(timeline.filter((e) => e.what === "start").map(key))
  const ended = new Set(
    timeline.filter((e) => e.what === "exit" || e.what === "crash" || e.what === "interrupted").map(key)
  )
  assert.deepStrictEqual([...started].filter((k) => !ended.has(k)), [])
}

const dropLines = (sink: ReturnType<typeof Telemetry.memorySink>) =>
  sink.captured.lines.filter((l) => l === "AGENTIC Dropped 1 group")

describe("the consecutive-drop guard", () => {
  it.effect("stops the step after exactly N Groups dropped in a row and reaps every agent, Prepare ones too", () =>
    Sim.runPool(
      {
        capacity: 3,
        prelaunch: true,
        groupSize: 2,
        script: (_, position) => position === 0 ? { crash: "after-lease", turnSeconds: 2 } : { turns: 3 },
        dropStreak: GroupPool.dropStreak(3)
      },
      (pool) =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(pool.runStep(Sim.plan(0, 1, { nextStep: true })))
          return { error, state: yield* pool.state }
        }),
      { minutes: 60 }
    ).pipe(Effect.map(({ sink, timeline, value: { error, state } }) => {
      assert.strictEqual(error._tag, "TooManyDroppedGroupsError")
      assert.strictEqual(error.dropped, 3)
      assert.strictEqual(error.last.type, "AgentCrashed")
      assert.include(error.message, "3 Groups were dropped in a row")
      assert.include(error.message, "error_type=AgentCrashed")
      assert.include(error.message, "| Managed command agent exited with code 3.")
      assert.include(error.message, "relax-agentic check")
      assert.include(error.message, "--agentic-max-consecutive-drops")
      assert.strictEqual(dropLines(sink).length, 3)
      assert.deepStrictEqual(Sim.of(timeline, "crash").length, 3)
      // Prelaunched Groups still waiting in Prepare were interrupted before the error came back.
      assert.isAbove(Sim.of(timeline, "interrupted").length, 3)
      assertAllEnded(timeline)
      assert.deepStrictEqual({ resident: state.resident, preparing: state.preparing, ready: state.ready }, {
        resident: 0,
        preparing: 0,
        ready: 0
      })
    })))

  it.effect("does not stop when drops are interleaved with accepted and filtered Groups", () =>
    Sim.runPool(
      {
        capacity: 1,
        groupSize: 1,
        // 0 A, 1 D, 2 D, 3 F, 4 D, 5 D, 6 A, 7 D, 8 D, 9 A: never 3 drops in a row.
        script: (g) => g.seq % 3 === 0 ? {} : { crash: "after-lease" },
        verdict: (g) => g.seq === 3 ? PoolContract.filtered() : PoolContract.accepted(g.seq),
        dropStreak: GroupPool.dropStreak(3)
      },
      (pool) => pool.runStep(Sim.plan(0, 3)),
      { minutes: 60 }
    ).pipe(Effect.map(({ sink, value: outcome }) => {
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value), [0, 6, 9])
      assert.strictEqual(outcome.dropped, 6)
      assert.strictEqual(outcome.filtered, 1)
      assert.strictEqual(dropLines(sink).length, 6)
    })))

  it.effect("0 is unlimited: failed Groups are refilled until the step succeeds", () =>
    Sim.runPool(
      {
        capacity: 1,
        groupSize: 1,
        script: (g) => g.seq < 40 ? { crash: "after-lease" } : {},
        dropStreak: GroupPool.dropStreak(0)
      },
      (pool) => pool.runStep(Sim.plan(0, 1)),
      { minutes: 60 }
    ).pipe(Effect.map(({ value: outcome }) => {
      assert.strictEqual(outcome.dropped, 40)
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value), [40])
    })))

  it.effect("counts across pools and steps (Eval then training) and stays stopped afterwards", () => {
    const { layer } = Sim.telemetry()
    const timeline: Array<Sim.Entry> = []
    const next = Sim.groups()
    const streak = GroupPool.dropStreak(3)
    const crashing = Sim.runner(() => ({ crash: "after-lease" }), timeline)
    return Sim.simulate(
      Effect.scoped(Effect.gen(function*() {
        const evalOutcome = yield* Effect.scoped(Effect.gen(function*() {
          const pool = yield* GroupPool.makePool({
            capacity: 2,
            prelaunch: false,
            mode: "eval",
            next: next(1),
            runner: crashing,
            dropStreak: streak
          })
          return yield* pool.runStep(Sim.plan(0, 2, { refill: false }))
        }))
        const afterEval = streak.count()
        const train = yield* GroupPool.makePool({
          capacity: 1,
          prelaunch: false,
          mode: "train",
          next: next(1),
          runner: crashing,
          dropStreak: streak
        })
        const first = yield* Effect.flip(train.runStep(Sim.plan(0, 1)))
        const startedBefore = Sim.of(timeline, "start").length
        const again = yield* Effect.flip(train.runStep(Sim.plan(1, 1)))
        return { evalOutcome, afterEval, first, again, startedBefore }
      })),
      layer,
      60
    ).pipe(
      Effect.result,
      Effect.map((result) => {
        assert.isTrue(result._tag === "Success")
        if (result._tag !== "Success") return
        const { evalOutcome, afterEval, first, again, startedBefore } = result.success
        assert.strictEqual(evalOutcome.dropped, 2)
        assert.strictEqual(afterEval, 2)
        // The first training drop is the third in a row.
        assert.strictEqual(first.dropped, 3)
        assert.strictEqual(first.last.groupId, "train:prepare_group_2")
        assert.strictEqual(again, first)
        assert.strictEqual(Sim.of(timeline, "start").length, startedBefore)
        assertAllEnded(timeline)
      })
    )
  })
})

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")

describe("a whole rollout whose agent always fails", () => {
  it.effect("fails with TooManyDroppedGroupsError after the default max(8, 2 * capacity) drops", () =>
    Effect.gen(function*() {
      const settings = yield* Settings.resolve({
        promptData: join(fixtures, "train.jsonl"),
        rolloutBatchSize: 2,
        nSamplesPerPrompt: 2,
        agenticConcurrency: 2
      })
      assert.strictEqual(settings.agenticMaxConsecutiveDrops, 8)
      let started = 0
      let running = 0
      const agent = () =>
        Effect.gen(function*() {
          started += 1
          running += 1
          yield* Effect.sleep("2 seconds")
          return yield* Effect.fail(new Error("ModuleNotFoundError: No module named 'harness'"))
        }).pipe(Effect.ensuring(Effect.sync(() => {
          running -= 1
        })))
      const { rollout, sink } = yield* InProcessRollout.build(settings, {
        engine: EmbeddedEngine.EmbeddedEngine.layer(EmbeddedEngine.EmbeddedEngine.instant),
        agent: () => agent
      })
      const fiber = yield* Effect.gen(function*() {
        const r = yield* Rollout.Rollout
        return yield* r.run
      }).pipe(Effect.provide(rollout), Effect.flip, Effect.forkChild)
      yield* TestClock.adjust("30 minutes")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TooManyDroppedGroupsError")
      if (error._tag !== "TooManyDroppedGroupsError") return
      assert.strictEqual(error.dropped, 8)
      assert.strictEqual(error.last.type, "AgentExecutionError")
      assert.include(error.message, "8 Groups were dropped in a row (--agentic-max-consecutive-drops 8)")
      assert.include(error.message, "ModuleNotFoundError: No module named 'harness'")
      assert.strictEqual(dropLines(sink).length, 8)
      assert.strictEqual(running, 0)
      assert.isAtLeast(started, 16)
    }))
})
