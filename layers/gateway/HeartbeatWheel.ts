/**
 * The heartbeats of every held Buffered-SSE request of a gateway, written from one timer: a request is an entry in one
 * of {@link TICKS} buckets, and each tick writes its bucket's frames.
 *
 * **Details**
 * A heartbeat fiber per held request (a sleep, a suspension and a timer a beat) made every beat allocate objects that
 * live one interval: with 10,000 held requests and 1 s heartbeats, ~5 MB a second survived the young generation's
 * collections and each scavenge took 30–60 ms (docs/performance.md, section 3, "Issue 41, third pass"). Here a beat
 * is one write. A request registered during tick `k` is due at tick `k + TICKS` and every {@link TICKS} ticks after:
 * its heartbeats are one interval apart, the first one interval after the tick it was registered in (at most a
 * tenth of an interval earlier than one interval after the request). The writes of a tick run as tasks of the
 * scheduler, {@link WRITES_PER_TASK} at a time. The wheel's fiber runs only while a request is registered.
 */
import { Clock, Duration, Effect } from "effect"
import * as FairScheduler from "../platform/FairScheduler.ts"

/** Ticks per heartbeat interval. */
export const TICKS = 10

/** Heartbeat writes per task of the scheduler. */
export const WRITES_PER_TASK = 64

/** One held request's heartbeat (one function a request): writes its frame, `false` when it could not (gone). */
export type Beat = () => boolean

export interface HeartbeatWheel {
  /** Run `beat` every interval until it returns `false` or the returned function is called. */
  readonly add: (beat: Beat) => () => void
}

/**
 * A wheel for heartbeats every `interval`; `run` starts its fiber (on the gateway's context and in its scope, so the
 * gateway's clock and scheduler drive it and its shutdown ends it).
 */
export const make = (interval: Duration.Duration, run: (effect: Effect.Effect<void>) => void): HeartbeatWheel => {
  const tickMs = Duration.toMillis(interval) / TICKS
  const buckets: ReadonlyArray<Set<Beat>> = Array.from({ length: TICKS }, () => new Set<Beat>())
  let size = 0
  let running = false
  let tick = 0
  const held = () => size > 0
  const remove = (bucket: Set<Beat>, beat: Beat) => {
    if (bucket.delete(beat)) size--
  }
  const loop = Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    // `size` changes in `remove` and `add`, between the loop's turns.
    while (held()) {
      const now = yield* Clock.currentTimeMillis
      // Sleep to the next tick's time from the start (a late tick does not move the ones after it).
      yield* Effect.sleep(Math.max(0, start + (tick + 1) * tickMs - now))
      tick++
      const bucket = buckets[tick % TICKS]!
      // The entries due now: one registered during this tick goes into this bucket for the next lap.
      const due = [...bucket]
      for (let i = 0; i < due.length; i++) {
        const beat = due[i]!
        if (bucket.has(beat) && !beat()) remove(bucket, beat)
        if ((i + 1) % WRITES_PER_TASK === 0) yield* FairScheduler.continueAsTask
      }
    }
  }).pipe(Effect.ensuring(Effect.sync(() => void (running = false))))
  return {
    add: (beat) => {
      const starting = !running
      if (starting) tick = 0
      const bucket = buckets[tick % TICKS]!
      bucket.add(beat)
      size++
      // After the entry is in (the fiber may run at once, and it stops when the wheel is empty).
      if (starting) {
        running = true
        run(loop)
      }
      return () => remove(bucket, beat)
    }
  }
}
