/**
 * A TestClock for large simulations: Effect's `TestClock` with its pending sleeps in a heap
 * ({@link WakeQueue.WakeQueue}), so a sleep costs O(log n) instead of O(pending sleeps).
 *
 * **Details**
 * Provide {@link layer} where `TestClock.layer()` would go; `TestClock.adjust`, `TestClock.setTime` and
 * `TestClock.withLive` from `effect/testing` work with it unchanged (they act on the clock in the context). It moves
 * time as Effect's TestClock does (4.1): `adjust` first lets forked fibers start, then wakes the due sleeps one at a
 * time, earliest first and equal times in registration order, each at its own time, and waits until the woken fiber
 * (and every fiber it resumed or forked) has suspended before waking the next; it warns when a test sleeps without
 * ever moving the clock and when a woken fiber does not suspend within the warning delay.
 * Effect's TestClock keeps its sleeps in an array sorted by time, spliced on every sleep and searched with `indexOf`
 * on every release: with 10,000 simulated agents sleeping at once that was a fifth of a simulation's CPU
 * (docs/performance.md, section 4). `test/platform/SimulationClock.test.ts` runs the same programs under both clocks.
 */
import { Clock, Console, Context, Duration, Effect, Fiber, Layer, Scheduler, Semaphore } from "effect"
import type { TestClock } from "effect/testing"
import * as WakeQueue from "../../src/platform/WakeQueue.ts"

export interface Options {
  /** How long a test may sleep without moving the clock, or a woken fiber run without suspending, before a warning. */
  readonly warningDelay?: Duration.Input | undefined
}

const sleepingWithoutAdjust = "A test is using time, but is not advancing the test clock, which may result in the " +
  "test hanging. Use TestClock.adjust to manually advance the time."
const busyAfterWake = "A fiber woken by the test clock is still running without suspending, so the test clock " +
  "stopped waiting for it. Sleeps it starts later may be scheduled relative to a later time."

/** Tasks scheduled while one sleeper wakes (and tasks those schedule): `run` waits until none is left. */
interface WakeTracker {
  pending: number
  onIdle: (() => void) | undefined
}

type Resume = (effect: Effect.Effect<void>) => void

const nanosPerMilli = BigInt(1_000_000)
const millisToNanos = (millis: number): bigint => {
  const whole = Math.floor(millis)
  return BigInt(whole) * nanosPerMilli + BigInt(Math.floor((millis - whole) * 1_000_000))
}

/** The live clock behind each simulation clock, so one made inside another still reaches real time. */
const liveClocks = new WeakMap<Clock.Clock, Clock.Clock>()

/** A simulation clock and the scheduler that lets it wait for the fibers it wakes; see {@link layer}. */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const warningDelay = options?.warningDelay ?? "1 second"
  const sleeps = new WakeQueue.WakeQueue<Resume>()
  const currentClock = yield* Clock.clockWith(Effect.succeed)
  const liveClock = liveClocks.get(currentClock) ?? currentClock
  const liveConsole = yield* Console.Console
  const parentScheduler = yield* Scheduler.Scheduler
  const scope = yield* Effect.scope
  let currentTimestamp = 0
  let currentWallNanos = BigInt(0)
  let currentMonotonicNanos = BigInt(0)
  // Start: no sleep and no adjust yet; pending: a sleep started the warning; done: the clock was moved.
  let warning: "start" | Fiber.Fiber<void> | "done" = "start"

  const withLive = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(effect, Clock.Clock, liveClock)
  const logWarning = (message: string) =>
    Effect.provideService(Effect.logWarning(message), Console.Console, liveConsole)

  const startWarning = Effect.suspend(() => {
    if (warning !== "start") return Effect.void
    return logWarning(sleepingWithoutAdjust).pipe(
      Effect.delay(warningDelay),
      withLive,
      Effect.forkIn(scope),
      Effect.flatMap((fiber) =>
        Effect.sync(() => {
          if (warning === "start") warning = fiber
          else fiber.interruptUnsafe()
        })
      )
    )
  })
  const doneWarning = Effect.suspend(() => {
    const pending = warning
    warning = "done"
    return typeof pending === "string" ? Effect.void : Fiber.interrupt(pending)
  })

  const sleep = (duration: Duration.Duration): Effect.Effect<void> => {
    const end = currentTimestamp + Duration.toMillis(duration)
    if (end <= currentTimestamp) return Effect.void
    const wait = Effect.callback<void>((resume) => {
      const entry = sleeps.push(end, resume)
      return Effect.sync(() => sleeps.cancel(entry))
    })
    return warning === "done" ? wait : Effect.andThen(startWarning, wait)
  }

  let currentTracker: WakeTracker | undefined
  const runTracked = (tracker: WakeTracker, f: () => void): void => {
    const previous = currentTracker
    currentTracker = tracker
    try {
      f()
    } finally {
      currentTracker = previous
    }
  }
  const scheduler: Scheduler.Scheduler = {
    executionMode: parentScheduler.executionMode,
    shouldYield: (fiber) => parentScheduler.shouldYield(fiber),
    makeDispatcher() {
      const dispatcher = parentScheduler.makeDispatcher()
      return {
        scheduleTask(task, priority) {
          const tracker = currentTracker
          if (tracker === undefined) return dispatcher.scheduleTask(task, priority)
          tracker.pending++
          dispatcher.scheduleTask(() => {
            try {
              runTracked(tracker, task)
            } finally {
              if (--tracker.pending === 0) tracker.onIdle?.()
            }
          }, priority)
        },
        flush() {
          dispatcher.flush()
        }
      }
    }
  }

  /** Resume one sleeper and wait until it, and whatever it started, has suspended. */
  const wake = (resume: Resume): Effect.Effect<void> =>
    Effect.suspend(() => {
      const tracker: WakeTracker = { pending: 0, onIdle: undefined }
      runTracked(tracker, () => resume(Effect.void))
      if (tracker.pending === 0) return Effect.yieldNow
      return Effect.callback<void>((resumeRun) => {
        if (tracker.pending === 0) return resumeRun(Effect.void)
        tracker.onIdle = () => resumeRun(Effect.void)
        return Effect.sync(() => {
          tracker.onIdle = undefined
        })
      }).pipe(
        Effect.timeoutOrElse({ duration: warningDelay, orElse: () => logWarning(busyAfterWake) }),
        withLive,
        Effect.andThen(Effect.yieldNow)
      )
    })

  const advanceTo = (timestamp: number): void => {
    const deltaMillis = timestamp - currentTimestamp
    if (deltaMillis > 0 && Number.isFinite(deltaMillis)) {
      currentMonotonicNanos += BigInt(Math.round(deltaMillis * 1_000_000))
    }
    if (Number.isFinite(timestamp)) currentWallNanos = millisToNanos(timestamp)
    currentTimestamp = timestamp
  }

  const runSemaphore = yield* Semaphore.make(1)
  const run = (step: (now: number) => number, adjustmentNanos?: bigint) =>
    runSemaphore.withPermits(1)(Effect.gen(function*() {
      // Let fibers forked before this call start (and register their sleeps) first.
      yield* Fiber.await(yield* Effect.forkChild(Effect.yieldNow))
      const initialWallNanos = currentWallNanos
      const initialMonotonicNanos = currentMonotonicNanos
      const endTimestamp = step(currentTimestamp)
      for (;;) {
        const entry = sleeps.takeDue(endTimestamp)
        if (entry === undefined) break
        advanceTo(entry.timestamp)
        yield* wake(entry.value)
      }
      advanceTo(endTimestamp)
      if (adjustmentNanos !== undefined && Number.isFinite(endTimestamp)) {
        currentWallNanos = initialWallNanos + adjustmentNanos
        if (adjustmentNanos > BigInt(0)) currentMonotonicNanos = initialMonotonicNanos + adjustmentNanos
      }
    }))

  const testClock: TestClock.TestClock = {
    currentTimeMillisUnsafe: () => currentTimestamp,
    currentTimeNanosUnsafe: () => currentWallNanos,
    monotonicTimeNanosUnsafe: () => currentMonotonicNanos,
    currentTimeMillis: Effect.sync(() => currentTimestamp),
    currentTimeNanos: Effect.sync(() => currentWallNanos),
    monotonicTimeNanos: Effect.sync(() => currentMonotonicNanos),
    sleep,
    adjust(input) {
      const duration = Duration.fromInputUnsafe(input)
      const millis = Duration.toMillis(duration)
      const nanos = Number.isFinite(millis) ? Duration.toNanosUnsafe(duration) : undefined
      return Effect.andThen(doneWarning, run((now) => now + millis, nanos))
    },
    setTime: (timestamp) => Effect.andThen(doneWarning, run(() => timestamp)),
    withLive
  }
  yield* Effect.addFinalizer(() => doneWarning)
  liveClocks.set(testClock, liveClock)
  return { clock: testClock, scheduler, pendingSleeps: () => sleeps.size }
})

/**
 * The simulation clock as the context's Clock and Scheduler, in place of `TestClock.layer()`.
 *
 * @example
 * ```ts
 * program.pipe(Effect.provide(SimulationClock.layer()))   // TestClock.adjust("1 second") moves it
 * ```
 */
export const layer = (options?: Options): Layer.Layer<never> =>
  Layer.effectContext(
    Effect.map(make(options), ({ clock, scheduler }) =>
      Context.make(Clock.Clock, clock).pipe(Context.add(Scheduler.Scheduler, scheduler)))
  )
