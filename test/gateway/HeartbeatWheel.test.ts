/**
 * The held requests' heartbeats from one timer (`layers/gateway/HeartbeatWheel.ts`), under the TestClock: each
 * request's beats one interval apart on its own phase (the first at most a tick early), a request stopped or gone
 * gets no more, and an emptied wheel starts again on its next request.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import * as HeartbeatWheel from "../../layers/gateway/HeartbeatWheel.ts"

describe("HeartbeatWheel", () => {
  it.effect("beats every interval from each request's own tick, until stopped or gone, and starts again when empty", () =>
    Effect.gen(function*() {
      const context = yield* Effect.context<never>()
      const clock = yield* Clock.Clock
      const wheel = HeartbeatWheel.make(Duration.seconds(10), (effect) => void Effect.runForkWith(context)(effect))
      const beats: Record<string, Array<number>> = { a: [], b: [], c: [] }
      let aThere = true
      const beat = (name: string, there: () => boolean = () => true) => () => {
        if (!there()) return false
        beats[name]!.push(clock.currentTimeMillisUnsafe())
        return true
      }
      wheel.add(beat("a", () => aThere))
      yield* TestClock.adjust("3500 millis")
      const stopB = wheel.add(beat("b"))
      yield* TestClock.adjust("31500 millis")
      // a from 0 s; b registered at 3.5 s, in the tick from 3 s: 9.5 s later, then every 10 s.
      assert.deepStrictEqual(beats["a"], [10_000, 20_000, 30_000])
      assert.deepStrictEqual(beats["b"], [13_000, 23_000, 33_000])
      stopB()
      aThere = false
      yield* TestClock.adjust("12 seconds")
      assert.deepStrictEqual(beats["a"], [10_000, 20_000, 30_000])
      assert.deepStrictEqual(beats["b"], [13_000, 23_000, 33_000])
      // The wheel stopped when it was empty: a new request starts it again, on its own ticks (from 47.5 s, not 47 s).
      yield* TestClock.adjust("500 millis")
      wheel.add(beat("c"))
      yield* TestClock.adjust("25 seconds")
      assert.deepStrictEqual(beats["c"], [57_500, 67_500])
    }))
})
