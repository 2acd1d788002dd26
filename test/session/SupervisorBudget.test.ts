import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, type Schema } from "effect"
import { TestClock } from "effect/testing"
import * as ActiveBudget from "../../layers/session/ActiveBudget.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as SessionInput from "../../src/session/SessionInput.ts"

const launch = (budget?: ActiveBudget.ActiveBudget): Supervisor.SessionLaunch => ({
  sessionId: "s-0",
  groupId: "g-0",
  rolloutMode: "train",
  input: { messages: [{ role: "user", content: "Hi" }], metadata: { task: 1 }, images: [] },
  ...(budget === undefined ? {} : { budget })
})

const seconds = (budget: ActiveBudget.ActiveBudget) => budget.remaining.pipe(Effect.map(Duration.toSeconds))

describe("ActiveBudget", () => {
  it.effect("counts only while active and expires on the remaining time", () =>
    Effect.gen(function*() {
      const budget = yield* ActiveBudget.make(100)
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(yield* seconds(budget), 100)
      assert.isFalse(yield* budget.isActive)

      yield* budget.start
      yield* budget.start
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(yield* seconds(budget), 40)
      yield* budget.pause
      yield* budget.pause
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(yield* seconds(budget), 40)
      assert.isFalse(yield* budget.isExpired)

      yield* budget.resume
      yield* TestClock.adjust("39 seconds")
      assert.isFalse(yield* budget.isExpired)
      yield* TestClock.adjust("1 second")
      assert.isTrue(yield* budget.isExpired)
      assert.strictEqual(yield* seconds(budget), 0)
      yield* budget.expired
    }))

  it.effect("an expired budget stays expired when resumed", () =>
    Effect.gen(function*() {
      const budget = yield* ActiveBudget.make(5)
      yield* budget.start
      yield* TestClock.adjust("5 seconds")
      yield* budget.pause
      yield* budget.resume
      assert.isTrue(yield* budget.isExpired)
      assert.isFalse(yield* budget.isActive)
    }))
})

describe("Supervisor: an agent that never sends its first model request", () => {
  it.effect("is stopped --agent-timeout after its start (its budget never runs outside Runtime)", () =>
    Effect.gen(function*() {
      const firstRequest = yield* Deferred.make<void>()
      const supervisor = Supervisor.Supervisor.inProcess(() => Effect.never, { timeoutSeconds: 100 })
      const budget = yield* supervisor.makeBudget
      const fiber = yield* supervisor.run({ ...launch(budget), firstRequest: Deferred.await(firstRequest) }).pipe(
        Effect.flip,
        Effect.forkChild
      )
      yield* TestClock.adjust("99 seconds")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "AgentExecutionError")
      assert.strictEqual(
        error.message,
        "Managed command agent timed out after 100.0 seconds without sending its first model request."
      )
    }))

  it.effect("once it has sent one, waiting for the lease (barrier, prelaunch) costs nothing", () =>
    Effect.gen(function*() {
      const firstRequest = yield* Deferred.make<void>()
      const supervisor = Supervisor.Supervisor.inProcess(
        () =>
          Deferred.succeed(firstRequest, undefined).pipe(
            Effect.andThen(Effect.sleep("10 hours")),
            Effect.as({ reward: 1 })
          ),
        { timeoutSeconds: 100 }
      )
      const budget = yield* supervisor.makeBudget
      const fiber = yield* supervisor.run({ ...launch(budget), firstRequest: Deferred.await(firstRequest) }).pipe(
        Effect.forkChild
      )
      yield* TestClock.adjust("10 hours")
      const outcome = yield* Fiber.join(fiber)
      assert.deepStrictEqual(outcome.output, { kind: "implicit", reward: 1 })
    }))
})

describe("Supervisor.InProcess and the active-time budget", () => {
  it.effect("does not consume the budget while prelaunched, pauses while parked, and times the agent out", () =>
    Effect.gen(function*() {
      let interrupted = false
      const supervisor = Supervisor.Supervisor.inProcess(
        () =>
          Effect.never.pipe(Effect.onInterrupt(() =>
            Effect.sync(() => {
              interrupted = true
            })
          )),
        { timeoutSeconds: 100 }
      )
      const budget = yield* supervisor.makeBudget
      const fiber = yield* supervisor.run(launch(budget)).pipe(Effect.flip, Effect.forkChild)

      // Prelaunched, waiting for a lease: nothing is counted however long it waits.
      yield* TestClock.adjust("2 hours")
      assert.isUndefined(fiber.pollUnsafe())

      yield* budget.start // the Group got its Runtime lease
      yield* TestClock.adjust("60 seconds")
      yield* budget.pause // parked between steps
      yield* TestClock.adjust("3 hours")
      assert.isUndefined(fiber.pollUnsafe())
      yield* budget.resume
      yield* TestClock.adjust("39 seconds")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 second")

      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(error.reason, "timeout")
      assert.strictEqual(error.message, "Managed command agent timed out after 100.0 seconds.")
      assert.isTrue(interrupted)
    }))

  it.effect("returns the agent's output when it finishes inside the budget", () =>
    Effect.gen(function*() {
      const seen: Array<SessionInput.SessionInputFile> = []
      const supervisor = Supervisor.Supervisor.inProcess(
        (input) =>
          Effect.sleep("30 seconds").pipe(
            Effect.tap(() => Effect.sync(() => seen.push(input.input))),
            Effect.as({ metadata: { steps: 3 }, reward: 1 })
          ),
        { timeoutSeconds: 60 }
      )
      const fiber = yield* supervisor.run(launch()).pipe(Effect.forkChild)
      yield* TestClock.adjust("30 seconds")
      const outcome = yield* Fiber.join(fiber)
      assert.deepStrictEqual(outcome.output, { kind: "implicit", metadata: { steps: 3 }, reward: 1 })
      assert.strictEqual(outcome.exitCode, 0)
      assert.deepStrictEqual(seen, [{ messages: [{ role: "user", content: "Hi" }], metadata: { task: 1 } }])
    }))

  it.effect("reports an agent failure like a non-zero exit", () =>
    Effect.gen(function*() {
      const supervisor = Supervisor.Supervisor.inProcess(() => Effect.fail(new Error("tool crashed")))
      const error = yield* supervisor.run(launch()).pipe(Effect.flip)
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(error.reason, "exit")
      assert.strictEqual(error.exitCode, 1)
      assert.match(error.message, /^Managed command agent exited with code 1\.\n/)
      assert.include(error.message, "tool crashed")
    }))

  it.effect("reads every in-process result form like the output file", () =>
    Effect.gen(function*() {
      const runWith = (result: Schema.Json | undefined) =>
        Supervisor.Supervisor.inProcess(() => Effect.succeed(result)).run(launch())
      const none = yield* runWith(undefined)
      assert.deepStrictEqual(none.output, { kind: "implicit" })
      const records = yield* runWith([
        { name: "main", messages: [{ role: "user", content: "a" }] },
        { name: "searcher", messages: [{ role: "user", content: "b" }], extra: 1 }
      ])
      assert.strictEqual(records.output.kind, "explicit")
      assert.deepStrictEqual(records.warnings.length, 1)
      const text = yield* runWith("{\"name\":\"main\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n")
      assert.strictEqual(text.output.kind, "explicit")
      const invalid = yield* runWith([{ name: "", messages: [] }]).pipe(Effect.flip)
      assert.strictEqual(invalid._tag, "AgentExecutionError")
      assert.strictEqual(
        invalid.message,
        "Managed command agent produced invalid output: line 1, field 'name': " +
          "Session output record must include non-empty string 'name'"
      )
    }))
})
