/**
 * Where the controller places a Group (layers/cluster/PlaceGroup.ts), against a scripted fleet: by room first (a fresh
 * runner takes it although the Group's key falls on a busy runner's shard), the hash candidates when the room the
 * controller heard of is stale, a wait while no runner has room, and a reservation the runner's cluster interrupted
 * counted as unanswered.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import * as PlaceGroup from "../../layers/cluster/PlaceGroup.ts"
import * as Placement from "../../src/cluster/Placement.ts"
import * as Slots from "../../src/cluster/Slots.ts"
import * as ClusterRollout from "../support/clusterRollout.ts"

interface FakeRunner {
  readonly name: string
  readonly capacity: number | undefined
  used: number
}

const group = ClusterRollout.plannedGroup(2)

/**
 * A fleet where entity `<runner>-<n>` lands on runner `<runner>`'s shard, the Group's candidate keys are `hot-0`,
 * `fresh-1`, `hot-2`, … (its plain key on the hot runner's shard), and the controller heard `heard` of the rooms.
 */
const fleet = (runners: ReadonlyArray<FakeRunner>, heard: () => ReadonlyArray<Placement.Room>) => {
  const asked: Array<string> = []
  const place = PlaceGroup.make({
    candidates: () => (attempt) => `${runners[attempt % runners.length]!.name}-${attempt}`,
    reserve: (at, key, slots) =>
      Effect.sync(() => {
        asked.push(`${at} for ${key}`)
        const runner = runners.find((r) => at.startsWith(`${r.name}-`))!
        const decision = Slots.decide({
          capacity: runner.capacity,
          used: runner.used,
          size: slots,
          known: false,
          draining: false
        })
        if (decision === "granted") runner.used += slots
        return Option.some({
          runner: runner.name,
          address: `${runner.name}:1`,
          decision,
          used: runner.used,
          free: Slots.free(runner.capacity, runner.used) ?? null,
          capacity: runner.capacity ?? null
        })
      }),
    byRoom: (key, size) => Placement.choose(heard(), size, runners.find((r) => key.startsWith(`${r.name}-`))?.name),
    unanswered: () => {}
  })
  return { place, asked }
}

const room = (runner: FakeRunner): Placement.Room => ({
  runner: runner.name,
  key: `${runner.name}-known`,
  used: runner.used,
  free: Slots.free(runner.capacity, runner.used) ?? null,
  draining: false
})

describe("PlaceGroup", () => {
  it.effect("a fresh runner takes the Group although its key falls on a busy runner's shard; the key stays", () =>
    Effect.gen(function*() {
      const runners = [{ name: "hot", capacity: undefined, used: 6 }, { name: "fresh", capacity: undefined, used: 0 }]
      const { place, asked } = fleet(runners, () => runners.map(room))
      assert.deepStrictEqual(yield* place(group), { key: "hot-0", runner: "fresh" })
      assert.deepStrictEqual(asked, ["fresh-known for hot-0"])
    }))

  it.effect("a stale room (the runner filled meanwhile) sends the Group to the hash candidates", () =>
    Effect.gen(function*() {
      const runners = [{ name: "hot", capacity: 8, used: 4 }, { name: "fresh", capacity: 4, used: 4 }]
      const stale = [{ ...room(runners[0]!) }, { ...room(runners[1]!), used: 0, free: 4 }]
      const { place, asked } = fleet(runners, () => stale)
      assert.deepStrictEqual(yield* place(group), { key: "hot-0", runner: "hot" })
      assert.deepStrictEqual(asked, ["fresh-known for hot-0", "hot-0 for hot-0"])
    }))

  it.effect("no runner with room: the Group waits, and is placed once one has room", () =>
    Effect.gen(function*() {
      const runners = [{ name: "hot", capacity: 2, used: 2 }, { name: "fresh", capacity: 2, used: 2 }]
      const { place } = fleet(runners, () => runners.map(room))
      const placing = yield* Effect.forkChild(place(group))
      yield* TestClock.adjust("1 second")
      assert.isUndefined(placing.pollUnsafe())
      runners[1]!.used = 0
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(yield* Fiber.join(placing), { key: "hot-0", runner: "fresh" })
    }))

  it.effect("a reservation the runner's cluster interrupted counts as unanswered: the next candidate takes the Group", () =>
    Effect.gen(function*() {
      const asked: Array<string> = []
      const forgotten: Array<string> = []
      const place = PlaceGroup.make({
        candidates: () => (attempt) => `key-${attempt}`,
        reserve: (at, key) =>
          Effect.suspend(() => {
            asked.push(`${at} for ${key}`)
            // The runner by room dropped its shards: its entity's call comes back interrupted.
            return at === "dropped-known"
              ? Effect.failCause(Cause.interrupt(7))
              : Effect.succeed(Option.some({
                runner: "other",
                address: "other:1",
                decision: "granted" as const,
                used: 2,
                free: null,
                capacity: null
              }))
          }),
        byRoom: () => ({ runner: "dropped", key: "dropped-known", used: 0, free: null, draining: false }),
        unanswered: (room) => void forgotten.push(room.runner)
      })
      assert.deepStrictEqual(yield* place(group), { key: "key-0", runner: "other" })
      assert.deepStrictEqual(asked, ["dropped-known for key-0", "key-0 for key-0"])
      assert.deepStrictEqual(forgotten, ["dropped"])
    }))
})
