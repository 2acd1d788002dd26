/**
 * The Group pool with a runner that runs a Group's Sessions together (`GroupRunner.group`, the cluster controller's
 * way), under the TestClock: every scenario runs twice, once per Session (`session`) and once together, and the two
 * must agree on every Session's timeline, the step's outcome and the log — the first-request barrier, per-Session
 * results in order, drops (a crash, an exit before the first request, a defect), and a fully-async close that counts
 * the Sessions already finished.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import * as PoolContract from "../../layers/schedule/PoolContract.ts"
import * as Sim from "../support/simPool.ts"

type Runner = PoolContract.GroupRunner<Sim.Group, number, number, Sim.AgentCrashed>

/**
 * `runner` with a `group` that runs each Session's `session` and reports its end; each Session's first request goes
 * through `arrive` before its `awaitLease` (as the controller hears of it from its runner).
 */
const together = (runner: Runner): Runner => ({
  ...runner,
  group: (group, sessions, ended) =>
    Effect.forEach(
      sessions.tickets,
      (ticket) =>
        runner.session(group, {
          ...ticket,
          awaitLease: Effect.andThen(sessions.arrive(ticket.position), ticket.awaitLease)
        }).pipe(Effect.exit, Effect.flatMap((exit) => ended(ticket.position, exit))),
      { concurrency: "unbounded", discard: true }
    )
})

/** The scripted runner, with `group`'s Session `position` of Group `seq` dying with a defect after 1 s. */
const dyingAt = (seq: number, position: number) => (timeline: Array<Sim.Entry>): Runner => {
  const scripted = Sim.runner(() => ({ turns: 2 }), timeline)
  return {
    ...scripted,
    session: (group, ticket) =>
      group.seq === seq && ticket.position === position
        ? Effect.sleep("1 second").pipe(Effect.andThen(Effect.die(new Error("bug in the runner"))))
        : scripted.session(group, ticket)
  }
}

/** `run` on a TestClock of its own (a later run on a shared one would start among the earlier run's timers). */
const ownClock = <A, E>(run: Effect.Effect<A, E>) => Effect.provide(run, TestClock.layer())

/** A log line without the stack frames of an error it prints (they name the fibers that ran the Session). */
const withoutStack = (line: string) => line.split("\n").filter((l) => !l.trimStart().startsWith("at ")).join("\n")

/** Run `setup` both ways; each run's outcome, timeline and log lines. */
const bothWays = <A, E>(
  setup: Sim.PoolSetup,
  use: (pool: PoolContract.Pool<Sim.Group, number>) => Effect.Effect<A, E, never>,
  mode: PoolContract.PoolOptions<Sim.Group, number, number, Sim.AgentCrashed>["mode"] = "train"
) => {
  const run = (join: boolean) => {
    let minted = 0
    return ownClock(Sim.runPool(
      {
        ...setup,
        mode,
        // The same Session ids both ways, so the log lines compare.
        sessionId: Effect.sync(() => `session-${minted++}`),
        runner: (timeline) => {
          const own = setup.runner?.(timeline) ?? Sim.runner(setup.script ?? (() => ({})), timeline, setup.verdict)
          return join ? together(own) : own
        }
      },
      (pool) => Effect.exit(use(pool)),
      { minutes: 60 }
    )).pipe(
      Effect.map(({ sink, timeline, value }) => ({ value, timeline, lines: sink.captured.lines.map(withoutStack) }))
    )
  }
  return Effect.all({ perSession: run(false), together: run(true) })
}

describe("the Group pool with a runner that runs a Group together", () => {
  it.effect("leases at the barrier and collects every Session's result, as per Session", () =>
    bothWays(
      {
        capacity: 2,
        groupSize: 3,
        script: (g, position) => ({ startup: 1 + position, turns: 1 + ((g.seq + position) % 3), turnSeconds: 2 })
      },
      (pool) => pool.runStep(Sim.plan(0, 3))
    ).pipe(Effect.map(({ perSession, together }) => {
      assert.deepStrictEqual(together.timeline, perSession.timeline)
      assert.deepStrictEqual(together.value, perSession.value)
      assert.deepStrictEqual(together.lines, perSession.lines)
      // The barrier held every Group's first requests until its slowest Session's (3 s), then leased it.
      assert.deepStrictEqual(Sim.of(together.timeline, "leased").slice(0, 3), ["0#0@3", "0#1@3", "0#2@3"])
      assert.strictEqual(together.value._tag, "Success")
      if (together.value._tag === "Success") assert.strictEqual(together.value.value.accepted.length, 3)
    })))

  it.effect("a crash drops the Group and ends its other Sessions, as per Session", () =>
    bothWays(
      {
        capacity: 1,
        groupSize: 3,
        script: (g, position) =>
          g.seq === 0 && position === 1 ? { crash: "after-lease", turnSeconds: 2 } : { turns: 3, turnSeconds: 2 }
      },
      (pool) => pool.runStep(Sim.plan(0, 1))
    ).pipe(Effect.map(({ perSession, together }) => {
      assert.deepStrictEqual(together.timeline, perSession.timeline)
      assert.deepStrictEqual(together.value, perSession.value)
      assert.deepStrictEqual(together.lines, perSession.lines)
      assert.deepStrictEqual(Sim.of(together.timeline, "interrupted"), ["0#0@3", "0#2@3"])
      assert.isTrue(together.lines.some((l) => l.includes("error_type=AgentCrashed")))
    })))

  it.effect("an exit before the first request drops the Group (Eval logs it), as per Session", () =>
    bothWays(
      {
        capacity: 1,
        groupSize: 2,
        script: (g, position) => g.seq === 0 && position === 0 ? { silentExit: true } : { startup: 2 }
      },
      (pool) => pool.runStep(Sim.plan(0, 1)),
      "eval"
    ).pipe(Effect.map(({ perSession, together }) => {
      assert.deepStrictEqual(together.timeline, perSession.timeline)
      assert.deepStrictEqual(together.value, perSession.value)
      assert.deepStrictEqual(together.lines, perSession.lines)
      assert.isTrue(together.lines.some((l) => l.includes("error_type=silent-success")))
      assert.deepStrictEqual(Sim.of(together.timeline, "interrupted"), ["0#1@1"])
    })))

  it.effect("a Session that dies drops its Group as RunnerDied, as per Session", () =>
    bothWays({ capacity: 1, groupSize: 2, runner: dyingAt(0, 1) }, (pool) => pool.runStep(Sim.plan(0, 1))).pipe(
      Effect.map(({ perSession, together }) => {
        assert.deepStrictEqual(together.timeline, perSession.timeline)
        assert.deepStrictEqual(together.value, perSession.value)
        assert.deepStrictEqual(together.lines, perSession.lines)
        assert.isTrue(together.lines.some((l) => l.includes("error_type=RunnerDied")))
      })
    ))

  it.effect("fully async: a Group whose finished Sessions are done and the rest in a tool call is interrupted", () => {
    // Group 1's second Session runs 3 turns with 10 s tool calls between; every other Session 1 turn.
    const agents = (timeline: Array<Sim.Entry>) => {
      const inTool = new Set<string>()
      const listeners: Array<() => void> = []
      const changed = () => listeners.forEach((l) => l())
      const runner: Runner = {
        session: (group, ticket) =>
          Effect.gen(function*() {
            const log = (what: Sim.Entry["what"]) =>
              Effect.map(Clock.currentTimeMillis, (ms) => {
                timeline.push({ t: ms / 1000, group: group.seq, position: ticket.position, what })
              })
            const turns = group.seq === 1 && ticket.position === 1 ? 3 : 1
            yield* log("start")
            yield* Effect.sleep("1 second")
            for (let turn = 0; turn < turns; turn++) {
              yield* log("request")
              yield* ticket.awaitLease.pipe(Effect.orDie)
              yield* Effect.sleep("2 seconds")
              if (turn === turns - 1) break
              inTool.add(ticket.sessionId)
              changed()
              yield* Effect.sleep("10 seconds")
              inTool.delete(ticket.sessionId)
              changed()
            }
            yield* log("exit")
            return group.seq
          }),
        reward: (group) => Effect.succeed({ _tag: "Accepted", value: group.seq })
      }
      return {
        runner,
        interruption: {
          isSessionInterrupted: (sessionId: string) => inTool.has(sessionId),
          onChange: (listener: () => void) => void listeners.push(listener)
        }
      }
    }
    // The interruption view must be the same runner's: built once per run through `runner`.
    const run = (join: boolean) => {
      let view: ReturnType<typeof agents>["interruption"] | undefined
      return ownClock(Sim.runPool(
        {
          capacity: 2,
          groupSize: 2,
          runner: (timeline) => {
            const built = agents(timeline)
            view = built.interruption
            return join ? together(built.runner) : built.runner
          },
          interruption: {
            isSessionInterrupted: (sessionId) => view?.isSessionInterrupted(sessionId) ?? false,
            onChange: (listener) => view?.onChange(listener)
          }
        },
        (pool) =>
          Effect.gen(function*() {
            const step = yield* pool.runStep(Sim.plan(0, 2, { nextStep: true, retain: true, maxCarriedDebt: 2 }))
            return { step, closedAt: (yield* Clock.currentTimeMillis) / 1000 }
          }),
        { minutes: 60 }
      )).pipe(Effect.map(({ timeline, value }) => ({ ...value, timeline })))
    }
    return Effect.all({ perSession: run(false), together: run(true) }).pipe(
      Effect.map(({ perSession, together }) => {
        assert.deepStrictEqual(together, perSession)
        // At 3 s Group 0 is done and Group 1's first Session too, its second in a tool call: interrupted, so the
        // step (debt 2, one accepted) closes then.
        assert.strictEqual(together.closedAt, 3)
        assert.strictEqual(together.step.interruptedGroups, 1)
      })
    )
  })

  it.effect("a Group whose placement does not take is placed again under new ids, never dropped", () => {
    // Each Group's first placement is refused (`group` answers `refused` before any Session starts, as the cluster's
    // controller does when the runner chosen by room is full or draining); the second takes.
    const minted: Array<string> = []
    const refusedIds: Array<string> = []
    const ran: Array<string> = []
    return ownClock(Sim.runPool(
      {
        capacity: 2,
        groupSize: 2,
        runner: (timeline) => {
          const own = together(Sim.runner(() => ({ turns: 1, turnSeconds: 2 }), timeline))
          const placements = new Map<number, number>()
          return {
            ...own,
            newGroupIds: (group) =>
              Effect.sync(() => {
                const n = placements.get(group.seq) ?? 0
                placements.set(group.seq, n + 1)
                const ids = [0, 1].map((i) => `g${group.seq}-placement${n}-${i}`)
                minted.push(...ids)
                return ids
              }),
            group: (group, sessions, ended) => {
              const ids = sessions.tickets.map((t) => t.sessionId)
              if (ids.some((id) => id.includes("placement0"))) {
                refusedIds.push(...ids)
                return Effect.succeed(PoolContract.refused)
              }
              ran.push(...ids)
              return own.group!(group, sessions, ended)
            }
          }
        }
      },
      (pool) => pool.runStep(Sim.plan(0, 2)),
      { minutes: 60 }
    )).pipe(Effect.map(({ sink, timeline, value }) => {
      assert.strictEqual(value.accepted.length, 2)
      assert.strictEqual(value.dropped, 0)
      assert.isFalse(sink.captured.lines.some((l) => l.includes("Dropping")))
      // Two placements a Group; its Sessions ran once each, under the second placement's ids only.
      assert.strictEqual(minted.length, 8)
      assert.deepStrictEqual(
        [...ran].sort(),
        ["g0-placement1-0", "g0-placement1-1", "g1-placement1-0", "g1-placement1-1"]
      )
      assert.strictEqual(refusedIds.length, 4)
      assert.strictEqual(Sim.of(timeline, "start").length, 4)
    }))
  })
})
