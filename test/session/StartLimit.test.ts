/**
 * `--agent-max-starting` under TestClock: at most N agents between their launch and their first model request; a
 * first request, an agent's end and an interruption each give the permit back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as StartLimit from "../../layers/session/StartLimit.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as SessionLaunch from "../support/sessionLaunch.ts"

const launch = SessionLaunch.sessionLaunch

describe("StartLimit (--agent-max-starting)", () => {
  it.effect("launches at most N agents until their first model request; the end and interruption free a permit", () =>
    Effect.gen(function*() {
      // Second each agent was launched at; each agent's first request (completed by the agent itself).
      const launched = new Map<string, number>()
      const first = new Map<string, Deferred.Deferred<void>>()
      const ids = ["a", "b", "c", "d", "e", "f"]
      for (const id of ids) first.set(id, yield* Deferred.make<void>())
      const executor = Supervisor.Supervisor.inProcess((input) =>
        Effect.gen(function*() {
          launched.set(input.sessionId, (yield* Clock.currentTimeMillis) / 1000)
          // "a" exits during its start-up, before any model request; the others ask after 1 s and work 10 s.
          if (input.sessionId === "a") return yield* Effect.sleep("3 seconds").pipe(Effect.as({ reward: 0 }))
          yield* Effect.sleep("1 second")
          yield* Deferred.succeed(first.get(input.sessionId)!, undefined)
          yield* Effect.sleep("10 seconds")
          return { reward: 1 }
        })
      )
      const limited = yield* StartLimit.limit(executor, 2)
      const fibers = yield* Effect.forEach(
        ids,
        (id) => Effect.forkChild(limited.run(launch(id, Deferred.await(first.get(id)!))))
      )
      yield* TestClock.adjust("0 seconds")
      assert.deepStrictEqual([...launched.keys()], ["a", "b"])
      // b asks at 1 s: c starts; a is still starting.
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual([...launched.keys()], ["a", "b", "c"])
      // c asks at 2 s: d starts.
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual([...launched.keys()], ["a", "b", "c", "d"])
      // a ends at 3 s without a model request: its permit goes to e; d asks at 3 s: its permit goes to f.
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(launched.get("e"), 3)
      assert.deepStrictEqual(launched.get("f"), 3)
      assert.deepStrictEqual([...launched.values()], [0, 0, 1, 2, 3, 3])
      // Interrupted while starting (e, f), they give their permits back: a new agent starts at once.
      yield* Fiber.interrupt(fibers[4]!)
      yield* Fiber.interrupt(fibers[5]!)
      const g = yield* Deferred.make<void>()
      first.set("g", g)
      const late = yield* Effect.forkChild(limited.run(launch("g", Deferred.await(g))))
      yield* TestClock.adjust("0 seconds")
      assert.strictEqual(launched.get("g"), 3)
      yield* TestClock.adjust("20 seconds")
      const outcome = yield* Fiber.join(late)
      assert.strictEqual(outcome.exitCode, 0)
    }))
})
