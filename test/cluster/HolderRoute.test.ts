/**
 * A placed Group's route to its holder (layers/cluster/HolderRoute.ts) over a scripted directory: a message that
 * reaches another runner (`NotHolderError`) is sent again through the entity the directory finds, and later messages
 * go there at once; a holder the directory finds nowhere fails the call with `RunnerLostError`. A call the holder's
 * cluster interrupted (its entity stopped when the runner dropped its shards) is followed the same way, unless the
 * route is for calls sent once only; the caller's own interruption is never followed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber } from "effect"
import type * as Directory from "../../layers/cluster/Directory.ts"
import * as HolderRoute from "../../layers/cluster/HolderRoute.ts"
import * as ClusterError from "../../src/cluster/ClusterError.ts"

/** A directory that knows `holder` at `key` (after one was missed), or nowhere. */
const directory = (found: string | undefined, asked: Array<[string, string | undefined]>): Directory.Directory => ({
  route: (holder, missed) =>
    Effect.sync(() => {
      asked.push([holder, missed])
      return found
    }),
  learn: () => {},
  known: () => undefined,
  ownerOf: () => undefined,
  refresh: Effect.void,
  rooms: () => [],
  learnRoom: () => {},
  heardRoom: () => {},
  wantsRoom: () => false,
  forgetRoom: () => {}
})

/** Entity `key` answers as the runner `owner`: its own messages, or `NotHolderError` for another holder's. */
const send = (owners: Record<string, string>, sent: Array<string>) => (key: string) =>
  Effect.suspend(() => {
    sent.push(key)
    const runner = owners[key] ?? "nobody"
    return runner === "r1"
      ? Effect.succeed(`answered by ${runner} through ${key}`)
      : Effect.fail(new ClusterError.NotHolderError({ holder: "r1", runner }))
  })

describe("HolderRoute", () => {
  it.effect("follows its holder to another entity once a message reaches another runner", () =>
    Effect.gen(function*() {
      const asked: Array<[string, string | undefined]> = []
      const sent: Array<string> = []
      // The Group was placed under "group-key"; its shard moved to r2 since, while r1 still owns "fleet-7".
      const route = HolderRoute.make(directory("fleet-7", asked), "r1", "group-key")
      const owners = { "group-key": "r2", "fleet-7": "r1" }
      assert.strictEqual(yield* route.call(send(owners, sent)), "answered by r1 through fleet-7")
      assert.deepStrictEqual(asked, [["r1", "group-key"]])
      // The next message goes to the holder's entity at once.
      assert.strictEqual(yield* route.call(send(owners, sent)), "answered by r1 through fleet-7")
      assert.deepStrictEqual(sent, ["group-key", "fleet-7", "fleet-7"])
      assert.strictEqual(route.current(), "fleet-7")
    }))

  it.effect("a holder the directory finds nowhere is lost: RunnerLostError, naming the runner that answered", () =>
    Effect.gen(function*() {
      const asked: Array<[string, string | undefined]> = []
      const route = HolderRoute.make(directory(undefined, asked), "r1", "group-key")
      const error = yield* route.call(send({ "group-key": "r2" }, [])).pipe(Effect.flip)
      assert.instanceOf(error, ClusterError.RunnerLostError)
      assert.deepStrictEqual([error.expected, error.actual], ["r1", "r2"])
    }))

  it.effect("other failures pass through untouched", () =>
    Effect.gen(function*() {
      const route = HolderRoute.make(directory("x", []), "r1", "group-key")
      const error = yield* route.call(() => Effect.fail("boom" as const)).pipe(Effect.flip)
      assert.strictEqual(error, "boom")
    }))

  it.effect("a call the holder's cluster interrupted is sent again through the entity the directory finds", () =>
    Effect.gen(function*() {
      const asked: Array<[string, string | undefined]> = []
      const sent: Array<string> = []
      const route = HolderRoute.make(directory("fleet-7", asked), "r1", "group-key")
      // The first delivery's answer is an interrupt (the entity was stopped on r1), the second an answer.
      const answer = yield* route.call((key) =>
        Effect.suspend(() => {
          sent.push(key)
          return sent.length === 1 ? Effect.failCause(Cause.interrupt(7)) : Effect.succeed(`answered through ${key}`)
        })
      )
      assert.strictEqual(answer, "answered through fleet-7")
      assert.deepStrictEqual(sent, ["group-key", "fleet-7"])
      assert.deepStrictEqual(asked, [["r1", "group-key"]])
    }))

  it.effect("an interrupted call to a holder found nowhere is lost: RunnerLostError", () =>
    Effect.gen(function*() {
      const route = HolderRoute.make(directory(undefined, []), "r1", "group-key")
      const error = yield* route.call(() => Effect.failCause(Cause.interrupt(7))).pipe(Effect.flip)
      assert.instanceOf(error, ClusterError.RunnerLostError)
    }))

  it.effect("a route for calls sent once only passes the interrupt through", () =>
    Effect.gen(function*() {
      const sent: Array<string> = []
      const route = HolderRoute.make(directory("fleet-7", []), "r1", "group-key", { followInterrupts: false })
      const exit = yield* Effect.exit(route.call((key) =>
        Effect.suspend(() => {
          sent.push(key)
          return Effect.failCause(Cause.interrupt(7))
        })
      ))
      assert.isTrue(Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause))
      assert.deepStrictEqual(sent, ["group-key"])
    }))

  it.effect("the caller's own interruption is not followed", () =>
    Effect.gen(function*() {
      const asked: Array<[string, string | undefined]> = []
      const sent: Array<string> = []
      const route = HolderRoute.make(directory("fleet-7", asked), "r1", "group-key")
      const waiting = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(route.call((key) =>
        Effect.suspend(() => {
          sent.push(key)
          return Effect.andThen(Deferred.succeed(waiting, undefined), Effect.never)
        })
      ))
      yield* Deferred.await(waiting)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(sent, ["group-key"])
      assert.deepStrictEqual(asked, [])
    }))
})
