/**
 * Agents slow to start (docs/troubleshooting.md "Agents are slow to start"): the decision and its line as a table, and
 * the watch over a Supervisor under TestClock (launch → first request timed on the Clock, one line, the login shell's
 * time read only when the line is due).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as SlowStartWatch from "../../layers/session/SlowStartWatch.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as StartupDiagnosis from "../../src/session/StartupDiagnosis.ts"
import * as SessionLaunch from "../support/sessionLaunch.ts"

describe("StartupDiagnosis.slowStartLine", () => {
  it("says nothing while agents start within a second, or before four Sessions", () => {
    assert.isUndefined(StartupDiagnosis.slowStartLine([0.2, 0.4, 1, 0.3], 0.9))
    assert.isUndefined(StartupDiagnosis.slowStartLine([5, 5, 5], 4))
    // The median decides: one slow agent among fast ones is not a slow start.
    assert.isUndefined(StartupDiagnosis.slowStartLine([0.3, 0.3, 0.4, 30], 0.1))
  })

  it("names the login shell when it takes at least half the median", () => {
    assert.strictEqual(
      StartupDiagnosis.slowStartLine([2.1, 2.4, 2.2, 2.6, 9], 1.3),
      "Agents are slow to start: 2.4 s from launch to first model request (median of 5 Sessions). A login shell " +
        "(bash -lc true) takes 1.3 s here: agents start under bash -lc, so most of it is your login profile (e.g. " +
        "pyenv init). See docs/troubleshooting.md \"Agents are slow to start\"."
    )
  })

  it("names the agent's own startup when the login shell is fast, or unknown", () => {
    const fast = StartupDiagnosis.slowStartLine([3, 3, 3, 3], 0.02)
    assert.include(fast, "A login shell (bash -lc true) takes only 0.0 s here, so it is the agent's own startup")
    const unknown = StartupDiagnosis.slowStartLine([3, 3, 3, 3], undefined)
    assert.include(unknown, "The login shell's time could not be measured, so it is the agent's own startup")
  })
})

const launch = SessionLaunch.sessionLaunch

/** Six agents that send their first request `startSeconds` after their launch, watched; the lines reported. */
const watched = (startSeconds: number, shellSeconds: number) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    let shellReads = 0
    const executor = Supervisor.Supervisor.inProcess((input) =>
      Effect.gen(function*() {
        yield* Effect.sleep(`${startSeconds} seconds`)
        yield* Deferred.succeed(first.get(input.sessionId)!, undefined)
        yield* Effect.sleep("10 seconds")
        return { reward: 1 }
      })
    )
    const first = new Map<string, Deferred.Deferred<void>>()
    const ids = ["a", "b", "c", "d", "e", "f"]
    for (const id of ids) first.set(id, yield* Deferred.make<void>())
    const supervisor = yield* SlowStartWatch.watch(executor, {
      loginShell: Effect.sync(() => {
        shellReads++
        return shellSeconds
      }),
      report: (line) => Effect.sync(() => void lines.push(line))
    })
    const fibers = yield* Effect.forEach(
      ids,
      (id) => Effect.forkChild(supervisor.run(launch(id, Deferred.await(first.get(id)!))))
    )
    yield* TestClock.adjust("30 seconds")
    for (const fiber of fibers) assert.strictEqual((yield* Fiber.join(fiber)).exitCode, 0)
    return { lines, shellReads }
  })

describe("SlowStartWatch.watch", () => {
  it.effect("reports one line, with the login shell's time, when agents take 2 s to their first request", () =>
    Effect.gen(function*() {
      const { lines, shellReads } = yield* Effect.scoped(watched(2, 1.8))
      assert.deepStrictEqual(lines, [StartupDiagnosis.slowStartLine([2, 2, 2, 2], 1.8)!])
      assert.strictEqual(shellReads, 1)
    }))

  it.effect("reports nothing when agents ask within half a second", () =>
    Effect.gen(function*() {
      const { lines } = yield* Effect.scoped(watched(0.5, 1.8))
      assert.deepStrictEqual(lines, [])
    }))
})
