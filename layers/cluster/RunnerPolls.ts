/**
 * The controller's Group polls gathered a runner at a time (docs/scale-out.md "How a Group runs on a runner"): the
 * polls of the Groups on one runner that are due together go as one `PollRunner`, and each Group gets its own answer.
 *
 * **Details**
 * A Group's poll is one cluster round trip, each ~0.5–0.8 ms of Effect Cluster's machinery on the controller and as
 * much on the runner (docs/performance.md, section 6, "One message for a runner's polls"). A busy runner answers
 * several of its Groups in the same moment (a saturated event loop handles them together), and their Groups poll again
 * in the same moment: those polls ride one message here. A Group's `poll` joins the runner's open message, or opens one
 * that goes after the other fibers that are ready now had their turn (a Group's poll follows its answer after one such
 * turn, `GroupPolls.ts`), so the Groups an answer woke go together; a message carries at most `maxPolls` polls. The
 * runner answers as soon as any of its polls has something, each poll in its place (`SessionFollowers.pollMany`): a
 * Group with nothing new gets an empty answer and asks again with the next message. A message's failure is each of
 * its Groups' poll's failure. A Group that leaves while its poll is out (dropped, its step closed) leaves its answer
 * unread; the message goes on for the others.
 */
import { Deferred, Effect, Exit, type Scope } from "effect"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** The most Group polls one message carries (its size and the runner's work a message stay bounded). */
export const maxPolls = 32

/** A Group's poll gathered for its runner's message, with what the message is sent with (its Group's route). */
export interface Gathered<C> {
  readonly context: C
  readonly poll: ClusterWire.RunnerPoll
}

/** A gathered poll and its Group waiting for the answer. */
interface Due<C, E> extends Gathered<C> {
  readonly answer: Deferred.Deferred<ClusterWire.RunnerPollAnswer, E>
}

/**
 * Gathered polls: `poll(runner, context, poll)` answers `poll` (a Group's) with its share of the next `PollRunner` to
 * `runner`, which `send` sends with the polls gathered (in order) and answers each in its place.
 */
export const make = <C, E>(deps: {
  readonly scope: Scope.Scope
  readonly send: (
    runner: string,
    polls: ReadonlyArray<Gathered<C>>
  ) => Effect.Effect<ReadonlyArray<ClusterWire.RunnerPollAnswer>, E>
  /** The most polls a message carries (default {@link maxPolls}). */
  readonly maxPolls?: number | undefined
}) => {
  const limit = deps.maxPolls ?? maxPolls
  /** Each runner's message not sent yet. */
  const open = new Map<string, Array<Due<C, E>>>()

  /** A message's sender ended: if it was interrupted (before it ran, too), every poll not answered yet is with it. */
  const settle = (runner: string, polls: ReadonlyArray<Due<C, E>>, exit: Exit.Exit<void>) => {
    if (open.get(runner) === polls) open.delete(runner)
    if (Exit.isSuccess(exit)) return
    for (const due of polls) Deferred.doneUnsafe(due.answer, Exit.failCause(exit.cause))
  }

  const flush = (runner: string, polls: Array<Due<C, E>>) =>
    Effect.suspend(() => {
      if (open.get(runner) === polls) open.delete(runner)
      return Effect.exit(deps.send(runner, polls))
    }).pipe(
      Effect.map((exit) => {
        polls.forEach((due, at) => {
          if (Exit.isFailure(exit)) Deferred.doneUnsafe(due.answer, Exit.failCause(exit.cause))
          else {
            const answer = exit.value[at]
            Deferred.doneUnsafe(
              due.answer,
              answer === undefined
                ? Exit.die(new Error(`PollRunner to ${runner} answered no poll ${at}`))
                : Exit.succeed(answer)
            )
          }
        })
      })
    )

  /** `poll` of a Group on `runner`, with its share of the runner's next message. */
  const poll = (
    runner: string,
    context: C,
    poll: ClusterWire.RunnerPoll
  ): Effect.Effect<ClusterWire.RunnerPollAnswer, E> =>
    // Joining a message and forking its sender happen together: a Group interrupted in between would leave a message
    // no fiber sends, and every Group that joins it waiting.
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        const answer = Deferred.makeUnsafe<ClusterWire.RunnerPollAnswer, E>()
        const polls = open.get(runner)
        if (polls !== undefined && polls.length < limit) {
          polls.push({ context, poll, answer })
          return restore(Deferred.await(answer))
        }
        const opened: Array<Due<C, E>> = [{ context, poll, answer }]
        open.set(runner, opened)
        // Sent by a fiber forked now, which starts after the fibers ready now: the Groups one answer woke poll
        // together. A sender that never ran (its scope closed) fails the message's polls with its interruption.
        return Effect.flatMap(Effect.forkIn(flush(runner, opened), deps.scope), (sender) => {
          sender.addObserver((exit) => settle(runner, opened, exit))
          return restore(Deferred.await(answer))
        })
      })
    )

  return { poll }
}
