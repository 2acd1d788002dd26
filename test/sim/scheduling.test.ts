import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as GroupPool from "../../layers/schedule/GroupPool.ts"
import * as PoolContract from "../../layers/schedule/PoolContract.ts"
import * as Sim from "../support/simPool.ts"

describe("resident capacity", () => {
  it.effect("keeps at most agentic_concurrency Groups resident and pays the batch debt", () =>
    Sim.runPool(
      { capacity: 2, groupSize: 2, script: () => ({ startup: 1, turns: 2, turnSeconds: 5 }) },
      (pool) => pool.runStep(Sim.plan(0, 5))
    ).pipe(Effect.map(({ timeline, value: outcome }) => {
      assert.strictEqual(outcome.accepted.length, 5)
      assert.strictEqual(outcome.dropped, 0)
      assert.strictEqual(Sim.peakResidentGroups(timeline), 2)
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value).sort(), [0, 1, 2, 3, 4])
    })))

  it.effect("frees a slot when a Group's Sessions finish, before Reward is done", () =>
    Sim.runPool(
      {
        capacity: 1,
        groupSize: 1,
        // Reward takes 100 s; the next Group must not wait for it.
        runner: (timeline) => ({
          ...Sim.runner(() => ({ startup: 1, turns: 1, turnSeconds: 5 }), timeline),
          reward: (g) => Effect.sleep("100 seconds").pipe(Effect.as(PoolContract.accepted(g.seq)))
        })
      },
      (pool) => pool.runStep(Sim.plan(0, 2))
    ).pipe(Effect.map(({ timeline }) => {
      // Group 1 starts when group 0's agent exits (t = 6), not after its Reward (t = 106).
      assert.deepStrictEqual(Sim.of(timeline, "start"), ["0#0@0", "1#0@6"])
    })))
})

describe("first-request barrier", () => {
  it.effect("holds every request until every Session of the Group has sent its first one", () =>
    Sim.runPool(
      { capacity: 1, groupSize: 3, script: (_, position) => ({ startup: [1, 4, 9][position]! }) },
      (pool) => pool.runStep(Sim.plan(0, 1))
    ).pipe(Effect.map(({ timeline, value: outcome }) => {
      assert.strictEqual(outcome.accepted.length, 1)
      assert.deepStrictEqual(Sim.of(timeline, "request"), ["0#0@1", "0#1@4", "0#2@9"])
      // All three are released together when the slowest first request arrives.
      assert.deepStrictEqual(Sim.of(timeline, "leased"), ["0#0@9", "0#1@9", "0#2@9"])
    })))

  it.effect("drops a Group whose agent exits before every first request, with the reference's warning, and refills", () =>
    Sim.runPool(
      {
        capacity: 1,
        groupSize: 2,
        script: (g, position) =>
          g.seq === 0 && position === 1 ? { startup: 2, crash: "before-first-request" } : { startup: 1 }
      },
      (pool) => pool.runStep(Sim.plan(0, 1))
    ).pipe(Effect.map(({ sink, timeline, value: outcome }) => {
      assert.strictEqual(outcome.dropped, 1)
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value), [1])
      // The sibling that was waiting for its lease is reaped with the Group.
      assert.deepStrictEqual(Sim.of(timeline, "interrupted"), ["0#0@2"])
      assert.deepStrictEqual(Sim.of(timeline, "start").filter((s) => s.startsWith("1#")), ["1#0@2", "1#1@2"])
      const text = sink.captured.lines.join("\n")
      assert.include(text, "Dropping failed resident agentic session session_id=")
      assert.include(text, "group_id=train:prepare_group_0 error_type=AgentCrashed")
      assert.include(
        text,
        "WARNING Dropping group train:prepare_group_0 because an agent exited before every first IR existed"
      )
      assert.include(sink.captured.lines, "AGENTIC Dropped 1 group")
    })))

  it.effect("drops a Group whose agent exits successfully without sending a request", () =>
    Sim.runPool(
      { capacity: 1, groupSize: 1, mode: "eval", script: (g) => g.seq === 0 ? { silentExit: true } : {} },
      (pool) => pool.runStep(Sim.plan(0, 2, { refill: false }))
    ).pipe(Effect.map(({ sink, value: outcome }) => {
      assert.strictEqual(outcome.dropped, 1)
      assert.strictEqual(outcome.accepted.length, 1)
      assert.isTrue(
        sink.captured.lines.some((l) =>
          l.startsWith("ERROR Dropping agentic eval session that exited before its first request") &&
          l.endsWith("group_id=train:prepare_group_0 error_type=silent-success")
        )
      )
    })))

  it.effect("answers held requests of a dropped Group with SessionClosedError", () => {
    const outcomes: Array<string> = []
    return Sim.runPool(
      {
        capacity: 1,
        groupSize: 2,
        runner: () => ({
          session: (g, ticket) =>
            g.seq === 0 && ticket.position === 1
              ? Effect.sleep("3 seconds").pipe(
                Effect.andThen(Effect.fail(new Sim.AgentCrashed({ sessionId: ticket.sessionId })))
              )
              : Effect.gen(function*() {
                // A request handler of the gateway runs outside the agent's fiber.
                const held = yield* ticket.awaitLease.pipe(
                  Effect.map(() => "leased"),
                  Effect.catchTag("SessionClosedError", (e) => Effect.succeed(`closed:${e.message}`)),
                  Effect.tap((answer) => Effect.sync(() => outcomes.push(answer))),
                  Effect.forkDetach
                )
                yield* Fiber.join(held)
                return 1
              }),
          reward: (g) => Effect.succeed(PoolContract.accepted(g.seq))
        })
      },
      (pool) => pool.runStep(Sim.plan(0, 1))
    ).pipe(Effect.map(() => {
      assert.isTrue(
        outcomes.some((o) => o.startsWith("closed:Session ") && o.endsWith("accepts no more model requests."))
      )
    }))
  })
})

describe("dropped and filtered Groups", () => {
  it.effect("a Session failing after the lease drops its Group, reaps its siblings, and the step goes on", () =>
    Sim.runPool(
      {
        capacity: 2,
        groupSize: 2,
        script: (g, position) =>
          g.seq === 1 && position === 0 ? { crash: "after-lease", turnSeconds: 2 } : { turns: 2, turnSeconds: 5 }
      },
      (pool) => pool.runStep(Sim.plan(0, 2))
    ).pipe(Effect.map(({ sink, timeline, value: outcome }) => {
      assert.strictEqual(outcome.dropped, 1)
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value).sort(), [0, 2])
      assert.deepStrictEqual(Sim.of(timeline, "crash"), ["1#0@3"])
      assert.deepStrictEqual(Sim.of(timeline, "interrupted"), ["1#1@3"])
      // The replacement starts as soon as the slot is free.
      assert.deepStrictEqual(Sim.of(timeline, "start").filter((s) => s.startsWith("2#")), ["2#0@3", "2#1@3"])
      assert.strictEqual(sink.captured.lines.filter((l) => l === "AGENTIC Dropped 1 group").length, 1)
    })))

  it.effect("a filtered Group creates new demand", () =>
    Sim.runPool(
      {
        capacity: 2,
        groupSize: 1,
        verdict: (g) => g.seq % 2 === 0 ? PoolContract.filtered() : PoolContract.accepted(g.seq)
      },
      (pool) => pool.runStep(Sim.plan(0, 2))
    ).pipe(Effect.map(({ sink, value: outcome }) => {
      assert.strictEqual(outcome.filtered, 2)
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value).sort(), [1, 3])
      assert.strictEqual(sink.captured.lines.filter((l) => l === "AGENTIC Filtered 1 group").length, 2)
    })))

  it.effect("over-sampled Groups still running when the debt is paid are interrupted", () =>
    Sim.runPool(
      { capacity: 3, groupSize: 1, script: (g) => ({ turnSeconds: g.seq === 2 ? 100 : 5 }) },
      (pool) => pool.runStep(Sim.plan(0, 2, { surplus: 1 }))
    ).pipe(Effect.map(({ timeline, value: outcome }) => {
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value).sort(), [0, 1])
      assert.deepStrictEqual(Sim.of(timeline, "interrupted"), ["2#0@6"])
    })))
})

describe("prelaunch", () => {
  it.effect("starts the next step's agents while capacity is free and holds their first request until the lease", () =>
    Sim.runPool(
      { capacity: 4, prelaunch: true, groupSize: 1, script: () => ({ startup: 20, turnSeconds: 5 }) },
      (pool) =>
        Effect.gen(function*() {
          const first = yield* pool.runStep(Sim.plan(0, 2, { nextStep: true }))
          const second = yield* pool.runStep(Sim.plan(1, 2, { nextStep: false }))
          return { first, second }
        })
    ).pipe(Effect.map(({ timeline, value: { first, second } }) => {
      assert.deepStrictEqual(first.accepted.map((a) => a.value).sort(), [0, 1])
      assert.deepStrictEqual(second.accepted.map((a) => a.value).sort(), [2, 3])
      // All four agents start at t = 0; the next step's two send their first request at t = 20 ...
      assert.deepStrictEqual(Sim.of(timeline, "start").slice(0, 4), ["0#0@0", "1#0@0", "2#0@0", "3#0@0"])
      // ... and get their lease only when step 1 begins (step 0 ends at t = 25).
      assert.deepStrictEqual(Sim.of(timeline, "leased"), ["0#0@20", "1#0@20", "2#0@25", "3#0@25"])
    })))

  it.effect("without prelaunch starts only the Groups the step needs", () =>
    Sim.runPool(
      { capacity: 4, groupSize: 1, script: () => ({ startup: 20, turnSeconds: 5 }) },
      (pool) => pool.runStep(Sim.plan(0, 2, { nextStep: true })).pipe(Effect.andThen(pool.runStep(Sim.plan(1, 2))))
    ).pipe(Effect.map(({ timeline }) => {
      assert.deepStrictEqual(Sim.of(timeline, "start"), ["0#0@0", "1#0@0", "2#0@25", "3#0@25"])
    })))
})

describe("step boundary", () => {
  it.effect("without prelaunch no training Group stays resident after its step, and its dataset row starts again next step", () =>
    Sim.runPool(
      {
        capacity: 2,
        groupSize: 1,
        // Group 1 (the over-sampled one) is still starting up when group 0 pays the step's debt.
        script: (g) => ({ startup: g.seq === 1 ? 100 : 1, turnSeconds: 5 })
      },
      (pool) =>
        Effect.gen(function*() {
          const first = yield* pool.runStep(Sim.plan(0, 1, { surplus: 1, nextStep: true }))
          // Eval would run here: training must hold no resident capacity (required slots max(T, E_peak)).
          const between = yield* pool.state
          const second = yield* pool.runStep(Sim.plan(1, 1))
          return { first, between, second }
        })
    ).pipe(Effect.map(({ timeline, value: { between, first, second } }) => {
      assert.deepStrictEqual(first.accepted.map((a) => a.value), [0])
      assert.strictEqual(first.residentGroups, 0)
      assert.strictEqual(between.resident, 0)
      assert.deepStrictEqual(Sim.of(timeline, "interrupted"), ["1#0@6"])
      // The interrupted Group's input is not lost: it starts again, first, in the next step.
      assert.deepStrictEqual(Sim.of(timeline, "start"), ["0#0@0", "1#0@0", "1#0@6"])
      assert.deepStrictEqual(second.accepted.map((a) => a.value), [1])
    })))
})

describe("progress, heartbeat and shutdown", () => {
  it.effect("emits idle_heartbeat after 30 s without progress", () =>
    Sim.runPool(
      { capacity: 1, groupSize: 1, script: () => ({ startup: 1, turnSeconds: 70 }) },
      (pool) => pool.runStep(Sim.plan(0, 1))
    ).pipe(Effect.map(({ sink }) => {
      const beats = sink.captured.lines.filter((l) => l.includes("event=idle_heartbeat"))
      assert.strictEqual(beats.length, 2)
      assert.include(beats[0], "AGENTIC ROLLOUT event=idle_heartbeat rollout=0 debt=1 state={'active_rollout_id': 0,")
      assert.include(beats[0], "'runtime_reward_group_count': 1")
    })))

  it.effect("counts completed sessions as scored on the step's progress", () =>
    Sim.runPool(
      { capacity: 3, groupSize: 2 },
      (pool) =>
        Effect.gen(function*() {
          const telemetry = yield* Telemetry.Telemetry
          const progress = yield* telemetry.progress({
            description: "Rollout 0 generation",
            total: 6,
            unit: "session",
            showPrepared: true
          })
          yield* pool.runStep(Sim.plan(0, 3, { progress }))
          return yield* progress.snapshot
        }),
      { isTTY: true }
    ).pipe(Effect.map(({ sink, value: snapshot }) => {
      assert.deepStrictEqual(snapshot, { scored: 6, total: 6, prepared: 0 })
      assert.include(sink.captured.frames.at(-1), "6/6 session [scored=6, prepared=0]")
    })))

  it.effect("closing the rollout's scope interrupts every agent, prepared or running", () => {
    const { layer } = Sim.telemetry()
    const timeline: Array<Sim.Entry> = []
    const next = Sim.groups()
    return Effect.gen(function*() {
      const fiber = yield* Effect.scoped(Effect.gen(function*() {
        const pool = yield* GroupPool.makePool({
          capacity: 3,
          prelaunch: true,
          mode: "train",
          next: next(2),
          runner: Sim.runner(() => ({ startup: 1, turnSeconds: 1000 }), timeline)
        })
        return yield* pool.runStep(Sim.plan(0, 1, { nextStep: true }))
      })).pipe(Effect.provide(layer), Effect.forkChild)
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(Sim.of(timeline, "start").length, 6)
      assert.strictEqual(Sim.of(timeline, "interrupted").length, 6)
    })
  })
})

describe("eval", () => {
  it.effect("runs every Group once, bounded by the eval concurrency, and leaves dropped Groups missing", () =>
    Sim.runPool(
      { capacity: 2, groupSize: 1, mode: "eval", script: (g) => g.seq === 1 ? { crash: "before-first-request" } : {} },
      (pool) => pool.runStep(Sim.plan(0, 5, { refill: false }))
    ).pipe(Effect.map(({ timeline, value: outcome }) => {
      assert.strictEqual(outcome.dropped, 1)
      assert.deepStrictEqual(outcome.accepted.map((a) => a.value).sort(), [0, 2, 3, 4])
      assert.strictEqual(Sim.of(timeline, "start").length, 5)
      assert.strictEqual(Sim.peakResidentGroups(timeline), 2)
    })))
})
