/**
 * A lease already held (`SessionEntry.leaseHeld`) lets the generation core skip `awaitLease` and the
 * `FairScheduler.continueAsTask` after it while the request is still in the scheduler task it started in (issue 24,
 * eighth pass): the same completions, counters and SessionForest nodes, token for token and to the simulated
 * millisecond, as the awaited path, for Sessions taking turns on the embedded engine's clock while weight updates abort
 * their generations (resumed attempts), under the FairScheduler and under Effect's default scheduler.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"
import * as UpdateScenario from "../support/updateScenario.ts"

/** How the Sessions' lease is given: awaited only, or also reported held (`leaseHeld`). */
type Lease = "awaited" | "held" | "never held"

/** The scenario with each request starting as its own task, counting the lease's calls. */
const scenario = (lease: Lease) => {
  const calls = { awaitLease: 0, leaseHeld: 0 }
  return Effect.map(
    UpdateScenario.turnsUnderUpdates({
      settled: true,
      entry: () => ({
        awaitLease: Effect.sync(() => {
          calls.awaitLease++
        }),
        ...(lease === "awaited" ? {} : {
          leaseHeld: () => {
            calls.leaseHeld++
            return lease === "held"
          }
        })
      })
    }),
    (run) => ({ ...run, calls })
  )
}

describe("Generation with a lease already held", () => {
  it.effect("gives the awaited path's completions, counters and forest nodes, and skips the wait in its task", () =>
    Effect.gen(function*() {
      const awaited = yield* FairScheduler.provide(scenario("awaited"))
      const held = yield* FairScheduler.provide(scenario("held"))
      const neverHeld = yield* FairScheduler.provide(scenario("never held"))
      const heldDefault = yield* scenario("held")
      assert.isTrue(awaited.result.counters.some((c) => c.aborts > 0), "no generation was aborted")
      assert.deepStrictEqual(held.result, awaited.result)
      assert.deepStrictEqual(neverHeld.result, awaited.result)
      assert.deepStrictEqual(heldDefault.result, awaited.result)
      // Every attempt awaited its lease, unless it was held and the request still in its first task (first attempts;
      // an attempt resumed after an abort was resumed in a callback or another task, and awaits as before).
      assert.strictEqual(awaited.calls.awaitLease, awaited.attempts)
      assert.strictEqual(neverHeld.calls.awaitLease, neverHeld.attempts)
      assert.isTrue(held.calls.leaseHeld > 0)
      assert.isTrue(held.calls.awaitLease < held.attempts, `${held.calls.awaitLease} of ${held.attempts} awaited`)
      assert.isTrue(held.calls.awaitLease > 0, "resumed attempts still await")
      // Under Effect's default scheduler no request is in a FairScheduler task: every attempt awaits.
      assert.strictEqual(heldDefault.calls.awaitLease, heldDefault.attempts)
    }))
})
