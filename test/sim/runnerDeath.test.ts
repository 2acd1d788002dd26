/**
 * A Session runner that dies at each stage of its Group's life, by a typed failure (an agent error, a Session
 * directory that cannot be prepared) or by a defect (a bug, a rejected promise): the Group is dropped, its slot freed,
 * and the step refills and completes. Under the TestClock; no real processes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Data, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as GroupPool from "../../layers/schedule/GroupPool.ts"
import * as PoolContract from "../../layers/schedule/PoolContract.ts"

class RunnerFailed extends Data.TaggedError("RunnerFailed")<{ readonly stage: string }> {
  override get message() {
    return `the runner failed in ${this.stage}`
  }
}

const stages = ["prepare", "barrier", "runtime", "after-exit", "reward"] as const
type Stage = (typeof stages)[number]
type Death = "failure" | "defect"

interface Group extends PoolContract.GroupLike {
  readonly seq: number
}

const die = (how: Death, stage: Stage): Effect.Effect<never, RunnerFailed> =>
  how === "failure" ? Effect.fail(new RunnerFailed({ stage })) : Effect.die(new Error(`bug in ${stage}`))

/** Group 0's first Session (or its Reward) dies at `stage`; every other Session takes one 5 s turn. */
const runner = (
  stage: Stage,
  how: Death,
  started: Array<number>
): PoolContract.GroupRunner<Group, number, number, RunnerFailed> => ({
  session: (group, ticket) =>
    Effect.gen(function*() {
      const dies = group.seq === 0 && ticket.position === 0
      if (ticket.position === 0) started.push(group.seq)
      // The sibling is slower to start, so the first Session waits in the barrier for a while.
      yield* Effect.sleep(ticket.position === 0 ? "1 second" : "3 seconds")
      if (dies && stage === "prepare") return yield* die(how, stage)
      if (dies && stage === "barrier") {
        return yield* Effect.raceFirst(
          ticket.awaitLease.pipe(Effect.orDie, Effect.as(0)),
          Effect.sleep("1 second").pipe(Effect.andThen(die(how, stage)))
        )
      }
      yield* ticket.awaitLease.pipe(Effect.orDie)
      yield* Effect.sleep("2 seconds")
      if (dies && stage === "runtime") return yield* die(how, stage)
      yield* Effect.sleep("3 seconds")
      if (dies && stage === "after-exit") return yield* die(how, stage)
      return 1
    }),
  reward: (group) =>
    group.seq === 0 && stage === "reward" ? die(how, stage) : Effect.succeed(PoolContract.accepted(group.seq))
})

describe("a Session runner that dies", () => {
  for (const stage of stages) {
    for (const how of ["failure", "defect"] as const) {
      it.effect(`in ${stage} by a ${how}: the Group is dropped, its slot freed, and the step refills`, () => {
        const sink = Telemetry.memorySink(false)
        const started: Array<number> = []
        return Effect.gen(function*() {
          const program = Effect.scoped(Effect.gen(function*() {
            let seq = 0
            const pool = yield* GroupPool.makePool<Group, number, number, RunnerFailed>({
              capacity: 1,
              prelaunch: false,
              mode: "train",
              next: Effect.sync(() => ({ groupId: `train:prepare_group_${seq}`, seq: seq++, size: 2 })),
              runner: runner(stage, how, started)
            })
            const outcome = yield* pool.runStep({ rolloutId: 0, debt: 2, surplus: 0, nextStep: false, refill: true })
            return { outcome, state: yield* pool.state }
          })).pipe(Effect.provide(Telemetry.Telemetry.layerSink(sink)))
          const fiber = yield* Effect.forkChild(program)
          yield* TestClock.adjust("10 minutes")
          const { outcome, state } = yield* Fiber.join(fiber)
          assert.deepStrictEqual(outcome.accepted.map((a) => a.value), [1, 2])
          assert.strictEqual(outcome.dropped, 1)
          assert.strictEqual(state.resident, 0, "no slot leaked")
          assert.strictEqual(state.runtime + state.reward + state.preparing + state.ready, 0, "no Group left running")
          // Capacity 1: group 1 could only start once group 0's slot was freed.
          assert.deepStrictEqual(started, [0, 1, 2])
          const text = sink.captured.lines.join("\n")
          assert.include(text, "Dropping")
          assert.include(text, "train:prepare_group_0")
          if (how === "defect") assert.include(text, `bug in ${stage}`)
        })
      }, 10_000)
    }
  }
})
