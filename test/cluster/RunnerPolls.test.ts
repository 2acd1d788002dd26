/**
 * The controller's Group polls gathered a runner at a time (layers/cluster/RunnerPolls.ts), over a scripted `send`:
 * the polls of one runner requested in the same turn ride one message (in order, each caller with its own answer),
 * another runner's go in a message of their own, a full message (`maxPolls`) makes the next poll open another, and a
 * poll requested once its runner's message went rides the next one. A message's failure fails each of its polls with
 * it; an answer that names fewer polls than it carried makes each missing one die instead of waiting forever; a Group
 * interrupted while its poll waits leaves the message to the others; a message whose sender never runs (its scope
 * closed) fails its polls with the interrupt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Scope } from "effect"
import * as RunnerPolls from "../../layers/cluster/RunnerPolls.ts"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** A message the scripted runner received: its runner and the contexts (Group names) of its polls, in order. */
type Sent = readonly [string, ReadonlyArray<string>]

/** A Group's poll naming one Session (the Group's name): what the message carries for it. */
const pollOf = (group: string): ClusterWire.RunnerPoll => ({
  sessions: [{ sessionId: group, position: 0, arrived: false, gate: null }],
  grant: null,
  place: false
})

/** The answer a Group gets: its Session's first request (so each caller can tell its own answer). */
const answerOf = (poll: ClusterWire.RunnerPoll): ClusterWire.RunnerPollAnswer => ({
  events: poll.sessions.map((s) => ({ _tag: "FirstRequest", sessionId: s.sessionId }))
})

/** The Session each event of an answer names. */
const named = (answer: ClusterWire.RunnerPollAnswer) =>
  answer.events.map((e) => e._tag === "Alive" ? e._tag : e.sessionId)

/**
 * Gathered polls over a runner that records each message and answers each poll with its own Session's first request,
 * after `before` (the message's failure, or a wait the test ends) and less the last `missing` answers.
 */
const scripted = (options: {
  readonly maxPolls?: number
  readonly before?: (runner: string) => Effect.Effect<void, ClusterError.ClusterCallError>
  readonly missing?: number
} = {}) =>
  Effect.gen(function*() {
    const sent: Array<Sent> = []
    const polls = RunnerPolls.make({
      scope: yield* Effect.scope,
      maxPolls: options.maxPolls,
      send: (runner, due: ReadonlyArray<RunnerPolls.Gathered<string>>) =>
        Effect.sync(() => void sent.push([runner, due.map((d) => d.context)])).pipe(
          Effect.andThen(options.before?.(runner) ?? Effect.void),
          Effect.as(due.slice(0, due.length - (options.missing ?? 0)).map((d) => answerOf(d.poll)))
        )
    })
    /** Group `group`'s poll to `runner`, started now (it waits for its share of the runner's message). */
    const poll = (runner: string, group: string) => Effect.forkChild(polls.poll(runner, group, pollOf(group)))
    return { sent, poll }
  })

/**
 * The polls `[runner, group]` started in one turn over {@link scripted} (with `options`), each answered with its own
 * Group's answer; the messages they went in.
 */
const gathered = (options: Parameters<typeof scripted>[0], polls: ReadonlyArray<readonly [string, string]>) =>
  Effect.gen(function*() {
    const { poll, sent } = yield* scripted(options)
    const fibers = yield* Effect.forEach(polls, ([runner, group]) => poll(runner, group))
    const answers = yield* Effect.forEach(fibers, Fiber.join)
    assert.deepStrictEqual(answers.map(named), polls.map(([, group]) => [group]))
    return sent
  })

describe("RunnerPolls", () => {
  it.effect("a runner's polls of one turn ride one message in order, each Group with its own answer", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* gathered({}, [["r1", "a"], ["r1", "b"]]), [["r1", ["a", "b"]]])
    }))

  it.effect("another runner's polls go in a message of their own", () =>
    Effect.gen(function*() {
      const sent = yield* gathered({}, [["r1", "a"], ["r2", "b"], ["r1", "c"]])
      assert.sameDeepMembers(sent, [["r1", ["a", "c"]], ["r2", ["b"]]])
    }))

  it.effect("a full message (maxPolls) makes the next poll open another", () =>
    Effect.gen(function*() {
      const sent = yield* gathered({ maxPolls: 2 }, [["r1", "a"], ["r1", "b"], ["r1", "c"]])
      assert.deepStrictEqual(sent, [["r1", ["a", "b"]], ["r1", ["c"]]])
    }))

  it.effect("a message's failure fails each of its polls with it; another runner's message is answered", () =>
    Effect.gen(function*() {
      const error = new ClusterError.ClusterCallError({ reason: "deadline", detail: "PollRunner of 2 Group(s)" })
      const { poll, sent } = yield* scripted({
        before: (runner) => runner === "down" ? Effect.fail(error) : Effect.void
      })
      const a = yield* poll("down", "a")
      const b = yield* poll("down", "b")
      const c = yield* poll("up", "c")
      assert.strictEqual(yield* Effect.flip(Fiber.join(a)), error)
      assert.strictEqual(yield* Effect.flip(Fiber.join(b)), error)
      assert.deepStrictEqual(named(yield* Fiber.join(c)), ["c"])
      assert.sameDeepMembers(sent, [["down", ["a", "b"]], ["up", ["c"]]])
    }))

  it.effect("a poll requested once its runner's message went rides the next message", () =>
    Effect.gen(function*() {
      const answered = yield* Deferred.make<void>()
      const { poll, sent } = yield* scripted({ before: () => Deferred.await(answered) })
      const a = yield* poll("r1", "a")
      while (sent.length === 0) yield* Effect.yieldNow
      // The first message is out (its answer not come yet): `b` opens the next one.
      const b = yield* poll("r1", "b")
      while (sent.length === 1) yield* Effect.yieldNow
      assert.deepStrictEqual(sent, [["r1", ["a"]], ["r1", ["b"]]])
      assert.isUndefined(a.pollUnsafe(), "a poll was answered before its message")
      yield* Deferred.succeed(answered, undefined)
      assert.deepStrictEqual(named(yield* Fiber.join(a)), ["a"])
      assert.deepStrictEqual(named(yield* Fiber.join(b)), ["b"])
    }))

  it.effect("an answer naming fewer polls than its message carried: each missing poll dies, none waits", () =>
    Effect.gen(function*() {
      const { poll, sent } = yield* scripted({ missing: 1 })
      const a = yield* poll("r1", "a")
      const b = yield* poll("r1", "b")
      assert.deepStrictEqual(named(yield* Fiber.join(a)), ["a"])
      const exit = yield* Fiber.await(b)
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), `the missing poll ended with ${String(exit)}`)
      assert.include(String(exit), "PollRunner to r1 answered no poll 1")
      assert.deepStrictEqual(sent, [["r1", ["a", "b"]]])
    }))

  it.effect("a Group interrupted while its poll waits leaves the message to the others", () =>
    Effect.gen(function*() {
      const { poll, sent } = yield* scripted()
      const a = yield* poll("r1", "a")
      const b = yield* poll("r1", "b")
      yield* Effect.yieldNow
      yield* Fiber.interrupt(a)
      assert.deepStrictEqual(named(yield* Fiber.join(b)), ["b"])
      assert.deepStrictEqual(sent, [["r1", ["a", "b"]]])
    }))

  it.effect("a message whose sender never runs (its scope closed) fails its polls with the interrupt, none waits", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      yield* Scope.close(scope, Exit.void)
      let sends = 0
      const polls = RunnerPolls.make({
        scope,
        send: (_runner, due: ReadonlyArray<RunnerPolls.Gathered<string>>) =>
          Effect.sync(() => {
            sends += 1
            return due.map((d) => answerOf(d.poll))
          })
      })
      const exit = yield* Effect.exit(polls.poll("r1", "a", pollOf("a")))
      assert.isTrue(Exit.isFailure(exit) && Cause.hasInterrupts(exit.cause), `the poll ended with ${String(exit)}`)
      assert.strictEqual(sends, 0)
      // The runner's next poll opens a message of its own (the dead one is gone).
      const again = yield* Effect.exit(polls.poll("r1", "b", pollOf("b")))
      assert.isTrue(Exit.isFailure(again) && Cause.hasInterrupts(again.cause))
    }))
})
