import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Metric } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Instruments from "../../layers/observability/Instruments.ts"
import * as GenerationGate from "../../layers/schedule/GenerationGate.ts"
import * as ActiveBudget from "../../layers/session/ActiveBudget.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"

const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]
// prefill 10 ms, then one token every 100 ms; no end of turn, so a request ends by its token budget.
const timed = { prefillTokensPerSecond: 900, decodeTokensPerSecond: 10, model: { eosProbability: 0 } }

interface Turn {
  readonly ids: ReadonlyArray<number>
  readonly logprobs: ReadonlyArray<number>
  readonly attempts: number
  readonly rids: ReadonlyArray<string>
  readonly versions: ReadonlyArray<string>
}

/** The generation core's attempt loop, reduced to what the gate sees: resume from prompt ++ pending after an abort. */
const turn = (
  engine: Engine.EngineShape,
  session: GenerationGate.SessionGate,
  name: string,
  maxNewTokens: number,
  reportDelay?: Duration.Input
) =>
  session.request((live) =>
    Effect.gen(function*() {
      const ids: Array<number> = []
      const logprobs: Array<number> = []
      const rids: Array<string> = []
      const versions: Array<string> = []
      let abortCount = 0
      for (let attempt = 0;; attempt++) {
        const rid = `${name}-${String(attempt).padStart(12, "0")}`
        rids.push(rid)
        const result: Engine.GenerateResult = yield* live.attempt(
          rid,
          engine.generate({
            inputIds: [...prompt, ...ids],
            sampling: {
              maxNewTokens: maxNewTokens - ids.length,
              temperature: 1,
              topP: 1,
              topK: -1,
              stop: [],
              stopTokenIds: [],
              seed: 9
            },
            rid,
            returnLogprob: true,
            resumedTokens: ids.length
          }).pipe(Effect.orDie)
        )
        ids.push(...result.outputIds)
        logprobs.push(...result.logprobs)
        versions.push(result.weightVersion)
        if (result.finishReason.type !== "abort") {
          return { ids, logprobs, attempts: attempt + 1, rids, versions } satisfies Turn
        }
        abortCount++
        // The generation core may take a while between the attempt's end and its report of the abort.
        if (reportDelay !== undefined) yield* Effect.sleep(reportDelay)
        yield* live.aborted(abortCount)
      }
    })
  )

const setup = (mode: { readonly maxAbortedCount?: number } = {}) =>
  Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const engine = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, timed)
    const reference = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
      ...timed,
      ...EmbeddedEngine.EmbeddedEngine.instant
    })
    const gate = yield* GenerationGate.make({
      abort: engine.abort,
      mode: { partialRollout: true, fullyAsync: false, maxAbortedCount: mode.maxAbortedCount }
    })
    return { engine, reference, gate }
  })

const seconds = (d: Duration.Duration) => Duration.toMillis(d) / 1000

describe("generation gate (partial rollout)", () => {
  it.effect("pause aborts a running generation and parks it; resume continues it to exactly the uninterrupted tokens", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { engine, reference, gate } = yield* setup()
        const budget = yield* ActiveBudget.make(100)
        const session = yield* gate.register("s1", budget)
        yield* budget.start
        const whole = yield* turn(reference, yield* gate.register("ref", undefined), "ref", 20)
        const fiber = yield* turn(engine, session, "s1", 20).pipe(Effect.forkChild)
        yield* TestClock.adjust("510 millis")
        assert.isFalse(gate.isInterrupted("s1"))
        const parked = Metric.value(Instruments.sessionsParked).pipe(Effect.map((state) => state.value))
        const parkedBefore = yield* parked
        const report = yield* gate.pause
        assert.deepStrictEqual(report, { aborted: 1, pausedSessions: 1 })
        assert.isTrue(gate.isInterrupted("s1"))
        // The retained Session is parked until the next step (relax_agentic_sessions_parked).
        assert.strictEqual((yield* parked) - parkedBefore, 1)
        assert.strictEqual(seconds(yield* budget.remaining), 100 - 0.51)
        // Parked: nothing runs and the budget does not count while the gate is closed.
        yield* TestClock.adjust("1 hour")
        assert.isUndefined(fiber.pollUnsafe())
        assert.strictEqual(seconds(yield* budget.remaining), 100 - 0.51)
        yield* gate.resume
        assert.strictEqual(yield* parked, parkedBefore)
        yield* TestClock.adjust("1 hour")
        const resumed = yield* Fiber.join(fiber)
        assert.strictEqual(resumed.attempts, 2)
        assert.notStrictEqual(resumed.rids[0], resumed.rids[1])
        assert.deepStrictEqual(resumed.ids, whole.ids)
        assert.deepStrictEqual(resumed.logprobs, whole.logprobs)
        // Answered: the agent is between requests again.
        assert.isTrue(gate.isInterrupted("s1"))
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("a pause returns once the aborted request is parked, not as soon as its attempt ends", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { engine, gate } = yield* setup()
        const session = yield* gate.register("s1", undefined)
        yield* turn(engine, session, "s1", 20, "1 second").pipe(Effect.forkChild)
        yield* TestClock.adjust("510 millis")
        const pausing = yield* gate.pause.pipe(Effect.forkChild)
        // The attempt has ended (aborted), the core has not reported it yet: the Session is neither running nor
        // parked, and the pause is still waiting.
        yield* TestClock.adjust("100 millis")
        assert.isUndefined(pausing.pollUnsafe())
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* Fiber.join(pausing), { aborted: 1, pausedSessions: 0 })
        assert.isTrue(gate.isInterrupted("s1"))
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("a Session between requests is interrupted; one waiting on a never-aborted running request is not", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { engine, gate } = yield* setup()
        yield* gate.register("idle", undefined)
        const busy = yield* gate.register("busy", undefined)
        assert.isTrue(gate.isInterrupted("idle"))
        const fiber = yield* turn(engine, busy, "busy", 5).pipe(Effect.forkChild)
        yield* TestClock.adjust("100 millis")
        assert.isFalse(gate.isInterrupted("busy"))
        assert.isFalse(gate.isInterrupted("unknown"))
        yield* TestClock.adjust("1 second")
        assert.strictEqual((yield* Fiber.join(fiber)).attempts, 1)
        assert.isTrue(gate.isInterrupted("busy"))
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("a request aborted N times is protected from the next resume: never aborted again, budget keeps counting, the pause waits for it", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { engine, reference, gate } = yield* setup({ maxAbortedCount: 2 })
        const budget = yield* ActiveBudget.make(1000)
        const whole = yield* Effect.scoped(Effect.gen(function*() {
          return yield* turn(reference, yield* gate.register("ref", undefined), "ref", 30)
        }))
        // The Session lives (is registered) for one turn, as an agent that exits after its answer.
        const fiber = yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* gate.register("s1", budget)
          yield* budget.start
          return yield* turn(engine, session, "s1", 30)
        })).pipe(Effect.forkChild)
        yield* TestClock.adjust("1 millis")
        // Two step boundaries abort it twice; protection is pending until the next resume.
        for (let boundary = 0; boundary < 2; boundary++) {
          yield* TestClock.adjust("310 millis")
          assert.strictEqual((yield* gate.pause).aborted, 1)
          assert.isFalse(gate.isProtected("s1"))
          yield* TestClock.adjust("10 seconds")
          yield* gate.resume
        }
        assert.isTrue(gate.isProtected("s1"))
        yield* TestClock.adjust("310 millis")
        const before = seconds(yield* budget.remaining)
        // The pause aborts nothing and returns only once the protected Session has finished.
        const pause = yield* gate.pause.pipe(Effect.forkChild)
        yield* TestClock.adjust("1 second")
        assert.isUndefined(pause.pollUnsafe())
        assert.isFalse(gate.isInterrupted("s1"))
        yield* TestClock.adjust("1 hour")
        const result = yield* Fiber.join(fiber)
        assert.deepStrictEqual(yield* Fiber.join(pause), { aborted: 0, pausedSessions: 0 })
        assert.strictEqual(result.attempts, 3)
        assert.deepStrictEqual(result.ids, whole.ids)
        // The protected Session's budget counted through the pause.
        assert.isBelow(seconds(yield* budget.remaining), before - 1)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("a request arriving while the gate is closed waits before its first backend attempt, then runs whole", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { engine, reference, gate } = yield* setup()
        const whole = yield* turn(reference, yield* gate.register("ref", undefined), "ref", 10)
        yield* gate.pause
        const fiber = yield* turn(engine, yield* gate.register("late", undefined), "late", 10).pipe(Effect.forkChild)
        yield* TestClock.adjust("1 hour")
        // Parked before any backend call: nothing ran, nothing was aborted. A queued request never aborted does not make
        // its Session interrupted (Relax: every live request queued and at least one aborted).
        assert.isUndefined(fiber.pollUnsafe())
        assert.isFalse(gate.isInterrupted("late"))
        yield* gate.resume
        yield* TestClock.adjust("1 hour")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.attempts, 1)
        assert.deepStrictEqual(result.ids, whole.ids)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))

  it.effect("a paused Session that never started its budget (prelaunched) is not started by resume", () =>
    Effect.scoped(
      Effect.gen(function*() {
        const { gate } = yield* setup()
        const budget = yield* ActiveBudget.make(10)
        yield* gate.register("waiting", budget)
        assert.strictEqual((yield* gate.pause).pausedSessions, 0)
        yield* gate.resume
        assert.isFalse(yield* budget.isActive)
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
    ))
})

describe("generation gate (a trainer's weight push)", () => {
  it.effect("pauseBudgets stops every counting budget, Eval's included; resumeBudgets restarts exactly those", () =>
    Effect.scoped(Effect.gen(function*() {
      const gate = yield* GenerationGate.make({
        abort: () => Effect.void,
        mode: { partialRollout: false, fullyAsync: false }
      })
      const training = yield* ActiveBudget.make(100)
      const evaluation = yield* ActiveBudget.make(100)
      const waiting = yield* ActiveBudget.make(100)
      for (const budget of [training, evaluation, waiting]) yield* gate.trackBudget(budget)
      yield* training.start
      yield* evaluation.start
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* gate.pauseBudgets, 2)
      // The push takes a minute: no budget counts it.
      yield* TestClock.adjust("60 seconds")
      assert.deepStrictEqual([seconds(yield* training.remaining), seconds(yield* evaluation.remaining)], [90, 90])
      yield* gate.resumeBudgets
      assert.deepStrictEqual([yield* training.isActive, yield* evaluation.isActive, yield* waiting.isActive], [
        true,
        true,
        false
      ])
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(seconds(yield* training.remaining), 85)
    })))
})
