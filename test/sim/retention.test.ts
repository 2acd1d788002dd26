/**
 * The Group pool's cross-step retention under the TestClock (partial rollout / fully async), with in-process agents
 * that sleep per turn: leased Groups still running at a step's close stay leased and pay the next step's debt, and a
 * fully-async step closes once its debt is matched by interrupted resident Groups.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import * as PoolContract from "../../layers/schedule/PoolContract.ts"
import * as Sim from "../support/simPool.ts"

/**
 * Agents whose Group `seq` starts up (1 s) and runs `turns(seq)` turns: a model request (through the ticket, 2 s),
 * then, between turns, a 10 s tool call. A Session is interrupted (in the gate's sense) while it is in a tool call.
 */
const toolAgents = (turns: (seq: number) => number, timeline: Array<Sim.Entry>) => {
  const inTool = new Set<string>()
  const listeners: Array<() => void> = []
  const changed = () => listeners.forEach((l) => l())
  const runner: PoolContract.GroupRunner<Sim.Group, number, number, never> = {
    session: (group, ticket) =>
      Effect.gen(function*() {
        const log = (what: Sim.Entry["what"]) =>
          Clock.currentTimeMillis.pipe(Effect.map((ms) => {
            timeline.push({ t: ms / 1000, group: group.seq, position: ticket.position, what })
          }))
        yield* log("start")
        yield* Effect.sleep("1 second")
        for (let turn = 0; turn < turns(group.seq); turn++) {
          yield* log("request")
          yield* ticket.awaitLease.pipe(Effect.orDie)
          yield* Effect.sleep("2 seconds")
          if (turn === turns(group.seq) - 1) break
          inTool.add(ticket.sessionId)
          changed()
          yield* Effect.sleep("10 seconds")
          inTool.delete(ticket.sessionId)
          changed()
        }
        yield* log("exit")
        return group.seq
      }).pipe(Effect.onInterrupt(() =>
        Clock.currentTimeMillis.pipe(Effect.map((ms) => {
          timeline.push({ t: ms / 1000, group: group.seq, position: ticket.position, what: "interrupted" })
        }))
      )),
    reward: (group) => Effect.succeed(PoolContract.accepted(group.seq))
  }
  return {
    runner,
    interruption: {
      isSessionInterrupted: (sessionId: string) => inTool.has(sessionId),
      onChange: (listener: () => void) => {
        listeners.push(listener)
      }
    }
  }
}

/** A training pool of capacity 2 whose Groups of one Session run `agents`. */
const poolOf = (agents: ReturnType<typeof toolAgents>): Sim.PoolSetup => ({
  capacity: 2,
  groupSize: 1,
  runner: () => agents.runner,
  interruption: agents.interruption
})

describe("cross-step retention in the Group pool", () => {
  it.effect("keeps a leased Group still running at the close; it pays the next step's debt, not a new Group", () => {
    const timeline: Array<Sim.Entry> = []
    // Group 0: 1 turn; group 1: 4 turns (the straggler); later Groups: 1 turn.
    const agents = toolAgents((seq) => (seq === 1 ? 4 : 1), timeline)
    return Sim.runPool(poolOf(agents), (pool) =>
      Effect.gen(function*() {
        const first = yield* pool.runStep(Sim.plan(0, 1, { nextStep: true, surplus: 1, retain: true })).pipe(
          Effect.orDie
        )
        const closedAt = (yield* Clock.currentTimeMillis) / 1000
        const second = yield* pool.runStep(Sim.plan(1, 1, { nextStep: true, retain: false })).pipe(Effect.orDie)
        return { first, second, closedAt }
      }), { minutes: 60 }).pipe(Effect.map(({ value: { closedAt, first, second } }) => {
        assert.deepStrictEqual(first.accepted.map((a) => a.value), [0])
        assert.strictEqual(first.retainedGroups, 1)
        assert.strictEqual(first.debt, 0)
        // The straggler was not interrupted at the close; it finished in step 1 and paid its debt.
        assert.deepStrictEqual(Sim.of(timeline, "interrupted"), [])
        assert.deepStrictEqual(second.accepted.map((a) => a.value), [1])
        assert.strictEqual(second.retainedGroups, 0)
        assert.isAbove(timeline.find((e) => e.group === 1 && e.what === "exit")!.t, closedAt)
        // No Group beyond the straggler was needed for step 1's debt of 1 (debt 1 + surplus 0 − 1 leased).
        assert.deepStrictEqual(Sim.of(timeline, "start").map((s) => s.split("#")[0]), ["0", "1"])
      }))
  })

  it.effect("fully async closes once the debt is matched by interrupted resident Groups, and carries the debt", () => {
    const timeline: Array<Sim.Entry> = []
    // Group 0: 1 turn; group 1: 3 turns, in a tool call between them.
    const agents = toolAgents((seq) => (seq === 0 ? 1 : 3), timeline)
    return Sim.runPool(poolOf(agents), (pool) =>
      Effect.gen(function*() {
        const first = yield* pool.runStep(Sim.plan(0, 2, { nextStep: true, retain: true, maxCarriedDebt: 2 })).pipe(
          Effect.orDie
        )
        const closedAt = (yield* Clock.currentTimeMillis) / 1000
        // The final backfill: only the carried debt, no retention.
        const backfill = yield* pool.runStep(Sim.plan(1, first.debt, { nextStep: true, retain: false })).pipe(
          Effect.orDie
        )
        return { first, backfill, closedAt }
      }), { minutes: 60 }).pipe(Effect.map(({ value: { backfill, closedAt, first } }) => {
        assert.deepStrictEqual(first.accepted.map((a) => a.value), [0])
        assert.strictEqual(first.debt, 1)
        assert.strictEqual(first.interruptedGroups, 1)
        assert.strictEqual(first.retainedGroups, 1)
        // Group 0 exits at 3 s (1 s start-up, 2 s generation), when Group 1 enters its first tool call: debt 1 <= 1
        // interrupted Group.
        assert.strictEqual(closedAt, 3)
        assert.deepStrictEqual(backfill.accepted.map((a) => a.value), [1])
        assert.deepStrictEqual(Sim.of(timeline, "interrupted"), [])
      }))
  })
})
