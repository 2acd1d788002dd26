/**
 * The directory's room refresh (layers/cluster/Directory.ts) on the cluster's in-memory test runner, one runner owning
 * every one of 300 shards: the first refresh asks every shard, and so do the next `sweepEvery - 1` (a sweep found a
 * runner it did not know: the fleet is forming); then one entity of the known runner, every `sweepEvery`-th every
 * shard again; a runner answering under a new incarnation makes the sweeps come every refresh again for a cycle; a
 * runner that does not answer a refresh is not offered for placement; and a runner whose room an answer brought since
 * the last refresh (a Group's poll) is not asked by the next refresh that is not a sweep.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Ref } from "effect"
import { Entity, TestRunner } from "effect/cluster"
import * as Directory from "../../layers/cluster/Directory.ts"
import * as GroupEntity from "../../layers/cluster/GroupEntity.ts"

/**
 * The Group entity as far as the directory uses it: its `Where` alone (runner `runner`, counted), silent while `silent`
 * is set; the directory's client sends it to the entity type of the real Group entity.
 */
const whereOnly = (asked: Ref.Ref<number>, silent: Ref.Ref<boolean>, runner: Ref.Ref<string>) =>
  Entity.make(GroupEntity.Group.type, [GroupEntity.Where]).toLayer(
    Effect.succeed({
      Where: () =>
        Effect.andThen(
          Ref.update(asked, (n) => n + 1),
          Effect.flatMap(Ref.get(silent), (quiet) =>
            quiet
              ? Effect.never
              : Effect.map(
                Ref.get(runner),
                (answering) => ({ runner: answering, address: "127.0.0.1:1", used: 0, free: null, draining: false })
              ))
        )
    }),
    { concurrency: "unbounded" }
  )

/**
 * A directory over 300 shards of the {@link whereOnly} entity (answering as runner `r1` until `runner` changes, silent
 * while `silent` is set); `refresh` runs one refresh and gives the number of `Where` it sent.
 */
const withDirectory = <A, E>(
  body: (env: {
    readonly directory: Directory.Directory
    readonly refresh: Effect.Effect<number>
    readonly runner: Ref.Ref<string>
    readonly silent: Ref.Ref<boolean>
  }) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const asked = yield* Ref.make(0)
    const silent = yield* Ref.make(false)
    const runner = yield* Ref.make("r1")
    return yield* Effect.scoped(Effect.gen(function*() {
      const directory = yield* Directory.make({ shards: 300, callTimeout: Duration.seconds(1) })
      const refresh = Effect.andThen(Ref.set(asked, 0), Effect.andThen(directory.refresh, Ref.get(asked)))
      return yield* body({ directory, refresh, runner, silent })
    })).pipe(Effect.provide(whereOnly(asked, silent, runner).pipe(Layer.provideMerge(TestRunner.layer))))
  })

describe("Directory", () => {
  it.live("refreshes the rooms by asking every shard now and then, one entity of each known runner otherwise", () =>
    withDirectory(({ directory, refresh, runner, silent }) =>
      Effect.gen(function*() {
        // The first refresh asks every shard; the runner answers for all of them. It was not known: the fleet is
        // forming, so the next refreshes ask every shard too, for one cycle.
        assert.strictEqual(yield* refresh, 300)
        assert.deepStrictEqual([...directory.rooms()].map((r) => r.runner), ["r1"])
        for (let i = 1; i < Directory.sweepEvery; i++) assert.strictEqual(yield* refresh, 300)
        // Then the cycle's sweep, and one entity of the one known runner until the sweep comes round again.
        assert.strictEqual(yield* refresh, 300)
        for (let i = 1; i < Directory.sweepEvery; i++) assert.strictEqual(yield* refresh, 1)
        // A runner the sweep did not know (here the shards' owner under a new incarnation): every refresh sweeps for
        // a cycle again, then the cadence is back.
        yield* Ref.set(runner, "r2")
        assert.strictEqual(yield* refresh, 300)
        assert.deepStrictEqual([...directory.rooms()].map((r) => r.runner), ["r2"])
        for (let i = 1; i < Directory.sweepEvery; i++) assert.strictEqual(yield* refresh, 300)
        assert.strictEqual(yield* refresh, 300)
        for (let i = 1; i < Directory.sweepEvery; i++) assert.strictEqual(yield* refresh, 1)
        assert.strictEqual(yield* refresh, 300)
        // A runner that does not answer within the deadline is not offered for placement until it answers again.
        yield* Ref.set(silent, true)
        assert.strictEqual(yield* refresh, 1)
        assert.deepStrictEqual([...directory.rooms()], [])
        yield* Ref.set(silent, false)
        assert.strictEqual(yield* refresh, 1)
        assert.deepStrictEqual([...directory.rooms()].map((r) => r.runner), ["r2"])
      })
    ))

  it.live("learns a runner's room from an answer: the next refresh that is not a sweep does not ask it", () =>
    withDirectory(({ directory, refresh }) =>
      Effect.gen(function*() {
        // The fleet forms (a sweep, the cycle's sweeps after it, the next cycle's sweep), then one entity a refresh.
        for (let i = 0; i <= Directory.sweepEvery; i++) assert.strictEqual(yield* refresh, 300)
        assert.strictEqual(yield* refresh, 1)
        assert.isTrue(directory.wantsRoom("r1"))
        // A poll's answer brings the room: no poll asks for it again, and the next refresh asks nothing.
        const key = directory.known("r1")!
        directory.heardRoom({ runner: "r1", key, used: 5, free: 3, draining: false })
        assert.isFalse(directory.wantsRoom("r1"))
        assert.deepStrictEqual([...directory.rooms()].map((r) => [r.runner, r.used, r.free]), [["r1", 5, 3]])
        assert.strictEqual(yield* refresh, 0)
        assert.deepStrictEqual([...directory.rooms()].map((r) => [r.runner, r.used]), [["r1", 5]])
        // Nothing heard since: the refresh asks it (its `Where` answers used 0), and a poll asks for it again.
        assert.isTrue(directory.wantsRoom("r1"))
        assert.strictEqual(yield* refresh, 1)
        assert.deepStrictEqual([...directory.rooms()].map((r) => [r.runner, r.used]), [["r1", 0]])
        // Placement by counting (`learnRoom`) is not hearing from the runner.
        directory.learnRoom({ runner: "r1", key, used: 8, free: null, draining: false })
        assert.isTrue(directory.wantsRoom("r1"))
        assert.strictEqual(yield* refresh, 1)
        // The cycle's sweep asks every shard whatever was heard.
        directory.heardRoom({ runner: "r1", key, used: 2, free: null, draining: false })
        assert.strictEqual(yield* refresh, 300)
        // A runner forgotten (its placing poll went unanswered) is asked again even though an answer came before.
        directory.heardRoom({ runner: "r1", key, used: 2, free: null, draining: false })
        directory.forgetRoom("r1")
        assert.isTrue(directory.wantsRoom("r1"))
        assert.deepStrictEqual([...directory.rooms()], [])
        assert.strictEqual(yield* refresh, 1)
        assert.deepStrictEqual([...directory.rooms()].map((r) => r.runner), ["r1"])
      })
    ))
})
