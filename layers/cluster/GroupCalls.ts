/**
 * The controller's calls that name a Group's Sessions together (docs/scale-out.md "How a Group runs on a runner"):
 * the `Grant`s or `Stop`s of one Group issued within a few milliseconds of each other go to its holder as one message
 * naming them all, and one controller-wide loop `Touch`es each Group's running Sessions with one message a Group.
 *
 * **Details**
 * A Group's Sessions get its Runtime lease at once, and a dropped Group or a closed step ends them at once; a Session
 * that sent its own `Grant`, `Stop` and `Touch` made them most of the controller's cluster messages a Session
 * (docs/performance.md, section 6, "One controller, many runners"). A batch is sent from the controller's scope, so a
 * Session interrupted while it waits for its batch does not cancel its Group's other Sessions' call.
 */
import { Deferred, Duration, Effect, Schedule, type Scope } from "effect"

/** How long a Group's batch waits for its other Sessions' calls before it is sent. */
export const batchWindow = Duration.millis(2)

/**
 * One call for every Session of a batch: `call(batchKey, sessionId, context)` joins the open batch of `batchKey` (or
 * opens one, whose `context` the call is sent with) and completes with the batch's call.
 */
export const batcher = <C, E>(deps: {
  readonly scope: Scope.Scope
  readonly send: (context: C, sessionIds: ReadonlyArray<string>) => Effect.Effect<void, E>
}) => {
  const open = new Map<string, { readonly ids: Array<string>; readonly done: Deferred.Deferred<void, E> }>()
  return (batchKey: string, sessionId: string, context: C): Effect.Effect<void, E> =>
    Effect.suspend(() => {
      const joined = open.get(batchKey)
      if (joined !== undefined) {
        joined.ids.push(sessionId)
        return Deferred.await(joined.done)
      }
      const batch = { ids: [sessionId], done: Deferred.makeUnsafe<void, E>() }
      open.set(batchKey, batch)
      return Effect.sleep(batchWindow).pipe(
        Effect.andThen(Effect.suspend(() => {
          open.delete(batchKey)
          return deps.send(context, batch.ids)
        })),
        Effect.exit,
        Effect.flatMap((exit) => Deferred.done(batch.done, exit)),
        Effect.forkIn(deps.scope),
        Effect.andThen(Deferred.await(batch.done))
      )
    })
}

/** A Group's running Sessions, touched together. */
interface Touched<C> {
  readonly context: C
  readonly ids: Set<string>
  inFlight: boolean
}

/**
 * The controller's `Touch` loop: every `interval`, one `touch` per Group that has running Sessions (a Group whose
 * last `Touch` has not answered yet is skipped, so a runner that does not answer delays no other Group's).
 */
export const toucher = <C>(deps: {
  readonly scope: Scope.Scope
  readonly interval: Duration.Duration
  readonly touch: (context: C, sessionIds: ReadonlyArray<string>) => Effect.Effect<void>
}) => {
  const groups = new Map<string, Touched<C>>()
  const round = Effect.sync(() => {
    const due: Array<Touched<C>> = []
    for (const group of groups.values()) {
      if (group.inFlight || group.ids.size === 0) continue
      group.inFlight = true
      due.push(group)
    }
    return due
  }).pipe(
    Effect.flatMap((due) =>
      Effect.forEach(
        due,
        (group) =>
          deps.touch(group.context, [...group.ids]).pipe(
            Effect.ensuring(Effect.sync(() => {
              group.inFlight = false
            })),
            Effect.forkIn(deps.scope)
          ),
        { discard: true }
      )
    )
  )
  return {
    /** Run the loop (in the controller's scope). */
    start: Effect.forkIn(Effect.repeat(Effect.delay(round, deps.interval), Schedule.forever), deps.scope),
    /** The Session runs now under `groupKey`; `context` is what its Group's `Touch` is sent with. */
    add: (groupKey: string, sessionId: string, context: C): void => {
      const group = groups.get(groupKey) ?? { context, ids: new Set<string>(), inFlight: false }
      groups.set(groupKey, group)
      group.ids.add(sessionId)
    },
    /** The Session ended here. */
    remove: (groupKey: string, sessionId: string): void => {
      const group = groups.get(groupKey)
      if (group === undefined) return
      group.ids.delete(sessionId)
      if (group.ids.size === 0) groups.delete(groupKey)
    }
  }
}

/** How long a receipt waits for a `PollGroup` to its runner to ride before it goes as a `Received` of its own. */
export const receiptDelay = Duration.seconds(1)

/** A runner's receipts not sent yet, and what a `Received` to it is sent with. */
interface Receipts<C> {
  readonly context: C
  readonly sessionIds: Array<string>
}

/**
 * The controller's receipts of the Session ends that `PollGroup` answers carried (the runner keeps an answered end
 * until its receipt: an answer is not acknowledged), one list a runner: `take` hands a runner's receipts to the next
 * poll to it (a Group's next poll follows the answer at once, so usually that one), and what no poll took within
 * `delay` (a Group's last answer, on a runner no other poll reaches meanwhile) goes as one `send`. A receipt lost with
 * its message costs the runner only its grace (`Host.answeredGrace`).
 */
export const receipts = <C>(deps: {
  readonly scope: Scope.Scope
  readonly delay: Duration.Duration
  readonly send: (context: C, sessionIds: ReadonlyArray<string>) => Effect.Effect<void>
}) => {
  const pending = new Map<string, Receipts<C>>()
  const flush = (runner: string, due: Receipts<C>) =>
    Effect.suspend(() => {
      // Taken by a poll meanwhile: a later list has its own delay.
      if (pending.get(runner) !== due) return Effect.void
      pending.delete(runner)
      return deps.send(due.context, due.sessionIds)
    })
  return {
    /** The controller received the end of `sessionIds` from `runner`, reached with `context`. */
    add: (runner: string, context: C, sessionIds: ReadonlyArray<string>): Effect.Effect<void> =>
      Effect.suspend(() => {
        const open = pending.get(runner)
        if (open !== undefined) {
          open.sessionIds.push(...sessionIds)
          return Effect.void
        }
        const due: Receipts<C> = { context, sessionIds: [...sessionIds] }
        pending.set(runner, due)
        return Effect.asVoid(Effect.forkIn(Effect.delay(flush(runner, due), deps.delay), deps.scope))
      }),
    /** The receipts for `runner` not sent yet, now riding a poll to it. */
    take: (runner: string): ReadonlyArray<string> => {
      const due = pending.get(runner)
      if (due === undefined) return []
      pending.delete(runner)
      return due.sessionIds
    }
  }
}
