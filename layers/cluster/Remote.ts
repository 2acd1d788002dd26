/**
 * The controller's `SessionRunner` in cluster mode: each Session of a Group runs on the runner that took the Group (its
 * holder), through the Group entity; Reward, credit and Transfer stay here (docs/scale-out.md "How a Group runs on a
 * runner").
 *
 * **Details**
 * The Scheduler's pools, step ledger and tickets are the single-process ones: this runner relays a ticket to the
 * holder. A Group is placed where its Sessions fit: at the runner with room and the fewest Sessions, as the rooms
 * its polls' answers brought say (every 2 s the controller asks `Where` of each runner it heard nothing from, and
 * every 10 s of every shard: `Directory.ts`), without a message of its own (the Group's first `PollGroup`
 * asks that runner to take it, and a refusal places the Group again under new ids: `newGroupIds`); else, with no
 * runner known to have room, by `Reserve` at a candidate key's runner, or a wait (`PlaceGroup.ts`). The runner that
 * takes it is its holder for its whole life, named in its Session ids. `RunSession` starts the Session there and streams its events
 * (`FirstRequest` joins the controller's first-request barrier, `Done` carries the samples); once the Group holds its
 * Runtime lease, `Grant` passes it on with the weight version to generate with; the Session's scope ends with `Stop`
 * (so a dropped Group's or a closed step's agents are reaped on the runner). A Group's `Grant`s and `Stop`s that happen
 * together are one message, and one loop `Touch`es each Group's running Sessions with one message (`GroupCalls.ts`). Every message goes to an entity whose
 * shard the holder owns now (`HolderRoute.ts`: the Group key, or one the `Directory` finds after shards moved), so a
 * runner joining or leaving costs no Group. Every call has a deadline (`--cluster-call-timeout`; for the event stream,
 * the time between two events, which a runner sends at least every two seconds): a call past it fails the Session
 * with `ClusterCallError` (a silent event stream is first followed once more: a repeated `RunSession` follows the
 * Session already running). A runner that died costs its Groups: no shard names it any more, and each of its Groups
 * is dropped (`error_type=RunnerLostError`) and refilled.
 */
import { Cause, Duration, Effect, Exit, Layer, Option, Schedule, Stream } from "effect"
import { EntityId, ShardId, Sharding } from "effect/cluster"
import { randomBytes } from "node:crypto"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import * as Placement from "../../src/cluster/Placement.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import * as Drift from "../../src/forest/Drift.ts"
import * as Credit from "../credit/Credit.ts"
import * as RolloutConfig from "../rollout/RolloutConfig.ts"
import * as SessionRunner from "../rollout/SessionRunner.ts"
import type * as FirstRequestBarrier from "../schedule/FirstRequestBarrier.ts"
import * as PoolContract from "../schedule/PoolContract.ts"
import * as Directory from "./Directory.ts"
import * as Fleet from "./Fleet.ts"
import * as GroupCalls from "./GroupCalls.ts"
import * as GroupEntity from "./GroupEntity.ts"
import * as GroupPolls from "./GroupPolls.ts"
import * as GroupStreams from "./GroupStreams.ts"
import * as HolderRoute from "./HolderRoute.ts"
import * as Host from "./Host.ts"
import * as PlaceGroup from "./PlaceGroup.ts"
import * as RunnerPolls from "./RunnerPolls.ts"

/** The controller's cluster settings. */
export interface RemoteOptions {
  /** Deadline of one cluster call, and the longest silence of a running Session's event stream. */
  readonly callTimeout: Duration.Duration
  /** `--cluster-shards`: the candidate keys of a Group cover every shard, so they reach every runner. */
  readonly shards: number
}

const refused = (message: string) => (cause: { readonly _tag: string; readonly message: string }) =>
  new ClusterError.ClusterCallError({
    reason: "refused",
    detail: `${message}: ${cause._tag}${cause.message === "" ? "" : ` (${cause.message})`}`,
    cause
  })

/** The cluster's refusals that say "not now" (a shard moving, a full mailbox): the call is repeated. */
const transient = ["MailboxFull", "EntityNotAssignedToRunner", "AlreadyProcessingMessage"] as const

/** Attempts of a call the cluster refused for now, 0.5 s apart; every call of a Session is safe to repeat. */
const attempts = 10
const pause = Duration.millis(500)

/** How many times a Group's silent event stream is followed again before its Sessions are given up. */
const silentRetries = 1

const refusedForNow = (error: { readonly _tag: string }) => (transient as ReadonlyArray<string>).includes(error._tag)
const refusedSchedule = Schedule.spaced(pause)

/** Repeat `effect` while the cluster refuses it for now. */
const whileRefused = <A, E extends { readonly _tag: string }, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  effect.pipe(Effect.retry({ while: refusedForNow, schedule: refusedSchedule, times: attempts }))

/** How often the controller asks every shard's runner for its room. */
const roomRefresh = Duration.seconds(2)

/** Where a Group's calls go: its holder, through the route of the Session that opened the call. */
interface GroupTarget {
  readonly runner: string
  readonly route: HolderRoute.HolderRoute
}

/**
 * A polled Group's Runtime lease on its way to the runner: `due` (its step) once leased while no poll was out, until a
 * poll that carried it was answered; `polling` while a poll is out (a lease then goes as its own `Grant`).
 */
interface LeaseSlot {
  due: number | undefined
  polling: boolean
}

/** A polled Group's placement: `placing` until a poll was answered (its polls ask the runner to take the Group). */
interface PlacingSlot {
  placing: boolean
}

type GroupClient = ReturnType<Effect.Success<typeof GroupEntity.Group.client>>

/**
 * The entity client a Group's polls last used, kept while its route stays on that entity (a client costs a shard hash
 * and a proxy whose methods are defined on first use).
 */
interface ClientSlot {
  client: { readonly key: string; readonly client: GroupClient } | undefined
}

/**
 * A placing poll's failures that leave the Group to be placed again (the runner refused it, is gone, or never
 * answered): no answer said any of its Sessions started.
 */
const unplaced = (error: GroupStreams.StreamError) =>
  error._tag === "PlacementRefusedError" || error._tag === "RunnerLostError" ||
  (error._tag === "ClusterCallError" && error.reason === "deadline")

/** A Group as it travels: the planned Group's wire fields. */
const plannedOf = (group: SessionRunner.PlannedGroup): ClusterWire.PlannedGroup => ({
  groupId: group.groupId,
  size: group.size,
  seq: group.seq,
  mode: group.mode,
  row: group.row,
  data: group.data,
  promptIndex: group.promptIndex,
  firstIndex: group.firstIndex
})

const make = (options: RemoteOptions) =>
  Effect.gen(function*() {
    const credit = yield* Credit.Credit
    const config = Fingerprint.of(yield* RolloutConfig.RolloutConfig)
    const configText = Fingerprint.toText(config)
    const fleet = yield* Fleet.Fleet
    const makeClient = yield* GroupEntity.Group.client
    const directory = yield* Directory.make({ shards: options.shards, callTimeout: options.callTimeout })
    const runId = fleet.controller
    let parserFailures = 0
    let drift = new Map<Drift.Cause, number>()
    // Session ids' random parts: 4 KiB drawn at once, handed out as hex (a `randomBytes` call is a call into the OS'
    // generator, ~26 µs of the controller's CPU a Group at 100 × 100,000 under load; docs/performance.md, section 6).
    let randomPool = Buffer.alloc(0)
    let randomAt = 0
    const randomHex = (bytes: number): string => {
      if (randomAt + bytes > randomPool.length) {
        randomPool = randomBytes(Math.max(4096, bytes))
        randomAt = 0
      }
      const hex = randomPool.toString("hex", randomAt, randomAt + bytes)
      randomAt += bytes
      return hex
    }
    const scope = yield* Effect.scope
    const named = (sessionIds: ReadonlyArray<string>) =>
      sessionIds.length === 1
        ? sessionIds[0]
        : `${sessionIds.length} Sessions of ${Routing.groupKeyOf(sessionIds[0] ?? "")}`
    // A Group's Grants, Stops and Touches: one message for its Sessions at once (GroupCalls.ts).
    const sendGrant = (to: GroupTarget & { readonly rolloutId: number }, sessionIds: ReadonlyArray<string>) =>
      Effect.flatMap(fleet.weights, (weights) =>
        deadline(
          `Grant ${named(sessionIds)}`,
          to.route.call((k) =>
            whileRefused(
              makeClient(k).Grant({
                runner: to.runner,
                controller: runId,
                sessionIds,
                rolloutId: to.rolloutId,
                weights
              })
            )
          )
        ))
    const sendStop = (to: GroupTarget, sessionIds: ReadonlyArray<string>) =>
      deadline(
        `Stop ${named(sessionIds)}`,
        to.route.call((k) => makeClient(k).Stop({ runner: to.runner, sessionIds }))
      )
    const grants = GroupCalls.batcher({ scope, send: sendGrant })
    const stops = GroupCalls.batcher({ scope, send: sendStop })
    const touching = GroupCalls.toucher({
      scope,
      interval: Host.touchInterval,
      touch: (to: GroupTarget, sessionIds) =>
        deadline(
          `Touch ${named(sessionIds)}`,
          to.route.call((k) => whileRefused(makeClient(k).Touch({ runner: to.runner, sessionIds })))
        ).pipe(Effect.ignore)
    })
    yield* touching.start
    // The Session ends a poll's answer carried, acknowledged to their runner (it keeps them until then).
    const receipts = GroupCalls.receipts({
      scope,
      delay: GroupCalls.receiptDelay,
      send: (to: GroupTarget, sessionIds) =>
        deadline(
          `Received ${named(sessionIds)}`,
          to.route.call((k) => whileRefused(makeClient(k).Received({ runner: to.runner, sessionIds })))
        ).pipe(Effect.ignore)
    })

    const deadline = <A, E>(what: string, effect: Effect.Effect<A, E>) =>
      effect.pipe(
        Effect.timeoutOrElse({
          duration: options.callTimeout,
          orElse: () => Effect.fail(new ClusterError.ClusterCallError({ reason: "deadline", detail: what }))
        })
      )

    // A Group's Sessions share one event stream to its holder (GroupStreams.ts).
    const streams = GroupStreams.make({
      scope,
      onGate: fleet.setGate,
      silence: options.callTimeout,
      silentRetries,
      run: (to: GroupTarget & { readonly group: SessionRunner.PlannedGroup }, sessions, onEvent) =>
        // Repeating RunGroup is safe: the holder follows the Sessions it already runs under these ids (also through
        // another entity, when the stream's entity moved away from the holder).
        to.route.call((k) =>
          Effect.suspend(() => {
            const named = sessions()
            return named.length === 0 ? Effect.void : whileRefused(Stream.runForEach(
              makeClient(k).RunGroup({
                runner: to.runner,
                controller: runId,
                group: plannedOf(to.group),
                sessions: named,
                config
              }),
              onEvent
            ))
          })
        ).pipe(
          Effect.catchTag(
            ["MailboxFull", "AlreadyProcessingMessage", "PersistenceError", "EntityNotAssignedToRunner"],
            refused("RunGroup")
          ),
          // A route that could not reach the holder any more is the holder's loss (HolderRoute gives up the same way).
          Effect.catchTag(
            "NotHolderError",
            (error) => Effect.fail(new ClusterError.RunnerLostError({ expected: error.holder, actual: error.runner }))
          )
        )
    })

    /** What a polled Group's poll needs: its holder's route, the Group, its lease and placement, its entity client. */
    type PollContext = GroupTarget & {
      readonly group: SessionRunner.PlannedGroup
      readonly lease: LeaseSlot
      readonly placement: PlacingSlot
      readonly entity: ClientSlot
    }

    // The polls of a runner's Groups that are due together: one message (RunnerPolls.ts), through the route of the
    // first one's Group (every route of a runner reaches it).
    const runnerPolls = RunnerPolls.make({
      scope,
      send: (runner, due: ReadonlyArray<RunnerPolls.Gathered<PollContext>>) =>
        Effect.suspend(() => {
          const to = due[0]!.context
          const received = receipts.take(runner)
          // The runner's room rides the answer when none came since the directory's last refresh (no `Where` then).
          const room = directory.wantsRoom(runner)
          // The settings only where Sessions may start: with a placing poll (every later one follows).
          const placing = due.some((d) => d.poll.place)
          // Repeating PollRunner is safe: the holder follows the Sessions it already runs under these ids, a lease
          // granted twice changes nothing, and a receipt forgets only an ended Session.
          return deadline(
            `PollRunner of ${due.length} Group(s) on runner ${runner}`,
            to.route.call((k) => {
              const known = to.entity.client
              const client = known !== undefined && known.key === k ? known.client : makeClient(k)
              if (known?.client !== client) to.entity.client = { key: k, client }
              return whileRefused(
                client.PollRunner({
                  runner,
                  controller: runId,
                  polls: due.map((d) => d.poll),
                  ...(placing ? { config: configText } : {}),
                  ...(received.length === 0 ? {} : { received }),
                  ...(room ? { room } : {})
                })
              ).pipe(
                Effect.map((answer) => {
                  if (answer.room !== undefined) directory.heardRoom({ runner, key: k, ...answer.room })
                  // A refused Group's runner's room as it refused: placement by room skips it until its next answer.
                  for (const { failure } of answer.answers) {
                    if (failure?._tag === "PlacementRefusedError") {
                      directory.heardRoom({
                        runner: failure.runner,
                        key: k,
                        used: failure.used,
                        free: failure.free,
                        draining: failure.decision === "draining"
                      })
                    }
                  }
                  return answer.answers
                })
              )
            })
          )
        })
    })

    // A whole Group's Sessions followed by polls to its holder (GroupPolls.ts), each riding its runner's next message.
    const polls = GroupPolls.make({
      onGate: fleet.setGate,
      silentRetries,
      poll: (to: PollContext, sessions) =>
        Effect.gen(function*() {
          const rolloutId = to.lease.due
          const grant = rolloutId === undefined ? null : { rolloutId, weights: yield* fleet.weights }
          to.lease.polling = true
          const answer = yield* runnerPolls.poll(to.runner, to, {
            // The Group only where Sessions may start: the placing poll (every later one follows).
            ...(to.placement.placing ? { group: plannedOf(to.group) } : {}),
            sessions,
            grant,
            place: to.placement.placing
          })
          if (answer.failure !== undefined) return yield* Effect.fail(answer.failure)
          to.placement.placing = false
          if (rolloutId !== undefined && to.lease.due === rolloutId) to.lease.due = undefined
          return answer.events
        }).pipe(
          Effect.ensuring(Effect.sync(() => {
            to.lease.polling = false
          })),
          Effect.catchTag(
            ["MailboxFull", "AlreadyProcessingMessage", "PersistenceError", "EntityNotAssignedToRunner"],
            refused("PollRunner")
          ),
          Effect.catchTag(
            "NotHolderError",
            (error) => Effect.fail(new ClusterError.RunnerLostError({ expected: error.holder, actual: error.runner }))
          )
        )
    })

    /** Where the Session's Group lives: its holder (named in its id), whatever shards move meanwhile. */
    const targetOf = (sessionId: string) => {
      const key = Routing.groupKeyOf(sessionId)
      const runner = Routing.holderOf(sessionId)
      if (key === undefined || runner === undefined) {
        return Effect.fail(
          new ClusterError.ClusterCallError({ reason: "refused", detail: `${sessionId} is no cluster Session id` })
        )
      }
      const target: GroupTarget = { runner, route: HolderRoute.make(directory, runner, directory.known(runner) ?? key) }
      return Effect.succeed({ target, groupKey: `${runner}/${key}` })
    }

    /** A Session's result as the pool reads it; its parser failures and drift are counted here. */
    const resultOf = (group: SessionRunner.PlannedGroup, result: ClusterWire.SessionResult) => {
      parserFailures += group.mode === "train" ? result.parserFailures : 0
      if (group.mode === "train") SessionRunner.addDrift(drift, Drift.countsOf(result.drift ?? {}))
      return {
        sessionId: result.sessionId,
        samples: result.samples,
        debug: result.debug
      } satisfies SessionRunner.SessionResult
    }

    const session = Effect.fn("ClusterRunner.session")(function*(
      group: SessionRunner.PlannedGroup,
      ticket: FirstRequestBarrier.SessionTicket
    ) {
      return yield* Effect.scoped(Effect.gen(function*() {
        const { groupKey, target } = yield* targetOf(ticket.sessionId)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            fleet.forget(ticket.sessionId)
            touching.remove(groupKey, ticket.sessionId)
          }).pipe(
            Effect.andThen(stops(groupKey, ticket.sessionId, target)),
            Effect.ignore
          )
        )
        // The runner reaps a Session its controller stops touching (a controller killed without these finalizers).
        touching.add(groupKey, ticket.sessionId, target)
        // The Group's Runtime lease, passed on to the runner with the weights its generations follow.
        yield* Effect.forkScoped(ticket.leased.pipe(
          Effect.andThen(Effect.suspend(() => {
            const rolloutId = ticket.rolloutId()
            return grants(`${groupKey}/${rolloutId}`, ticket.sessionId, { ...target, rolloutId })
          })),
          Effect.ignore
        ))
        const joined = yield* streams.join(
          `${groupKey}/${group.groupId}`,
          { sessionId: ticket.sessionId, position: ticket.position },
          { ...target, group },
          group.size
        )
        // The agent's first request joins the barrier; it completes once the Group is leased (a drop interrupts this
        // Session anyway).
        yield* Effect.forkScoped(joined.firstRequest.pipe(Effect.andThen(Effect.ignore(ticket.awaitLease))))
        return resultOf(group, yield* joined.outcome)
      }))
    })

    /**
     * A whole Group's Sessions in one fiber (the pool's `group`): one poll at a time, the lease on the next poll (or
     * one `Grant`), each Session's end given to the pool as its event arrives. The first poll places the Group (until
     * one is answered: the runner takes the Group's slots or refuses it); a refusal, a holder gone, or no answer to it
     * answers `"refused"`, and the pool places the Group again under new ids (`newGroupIds`). A Session whose end an
     * answer carried is forgotten by the runner without a `Stop`; one `Stop` at the end names the others: those still
     * running when the effect is interrupted (a drop, a closed step), and those whose end no answer carried.
     */
    const runGroup = Effect.fn("ClusterRunner.group")(function*(
      group: SessionRunner.PlannedGroup,
      sessions: PoolContract.GroupTickets,
      ended: (
        position: number,
        exit: Exit.Exit<SessionRunner.SessionResult, SessionRunner.GroupError>
      ) => Effect.Effect<void>
    ) {
      const { tickets } = sessions
      const first = tickets[0]
      if (first === undefined) return
      const placed = yield* Effect.result(targetOf(first.sessionId))
      if (placed._tag === "Failure") {
        return yield* Effect.forEach(tickets, (t) => ended(t.position, Exit.fail(placed.failure)), { discard: true })
      }
      const { target } = placed.success
      const running = new Set(tickets.map((t) => t.sessionId))
      // What the runner still holds: every Session until an answer delivered its end.
      const held = new Set(running)
      const leave = (sessionId: string) => {
        running.delete(sessionId)
        fleet.forget(sessionId)
      }
      const placement: PlacingSlot = { placing: true }
      // Why the placing poll left the Group unplaced, once it did.
      let unplacedBy: GroupStreams.StreamError | undefined
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Effect.addFinalizer(() =>
          Effect.suspend(() => {
            for (const sessionId of [...running]) leave(sessionId)
            return held.size === 0 ? Effect.void : Effect.ignore(sendStop(target, [...held]))
          })
        )
        // The Group's Runtime lease, passed on to the runner with the weights its generations follow: on the next
        // poll when none is out (the usual case: the lease follows the answer that carried the Group's first
        // requests), else as its own `Grant`.
        const lease: LeaseSlot = { due: undefined, polling: false }
        yield* Effect.forkScoped(first.leased.pipe(
          Effect.andThen(Effect.suspend(() => {
            if (running.size === 0) return Effect.void
            if (!lease.polling) {
              lease.due = first.rolloutId()
              return Effect.void
            }
            return sendGrant({ ...target, rolloutId: first.rolloutId() }, [...running])
          })),
          Effect.ignore
        ))
        // Every poll touches the Sessions it names: the runner reaps them once its controller stops asking (a
        // controller killed without this finalizer), so they need no `Touch`.
        yield* polls(
          { ...target, group, lease, placement, entity: { client: undefined } },
          tickets.map((ticket): GroupStreams.Reader => ({
            session: { sessionId: ticket.sessionId, position: ticket.position },
            // The agent's first request joins the barrier (the lease reaches the runner as `Grant`).
            firstRequest: sessions.arrive(ticket.position),
            end: (exit) =>
              Effect.suspend(() => {
                leave(ticket.sessionId)
                const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
                if (placement.placing && Option.isSome(error) && unplaced(error.value)) {
                  unplacedBy = error.value
                  // Refused, or its runner gone: nothing of the Group runs there (an unanswered one is stopped).
                  if (error.value._tag !== "ClusterCallError") held.delete(ticket.sessionId)
                  return Effect.void
                }
                return ended(
                  ticket.position,
                  Exit.map(exit, (result) => resultOf(group, result))
                )
              })
          })),
          (released) => {
            for (const sessionId of released) held.delete(sessionId)
            return receipts.add(target.runner, target, released)
          }
        )
      }))
      if (unplacedBy === undefined) return
      if (unplacedBy._tag !== "PlacementRefusedError") directory.forgetRoom(target.runner)
      yield* Effect.logInfo(`Group ${group.groupId} is placed again: ${unplacedBy.message}`)
      return PoolContract.refused
    })

    const sharding = yield* Sharding.Sharding
    const shardOf = (key: string) => {
      const id = EntityId.make(key)
      return ShardId.toString(sharding.getShardId(id, GroupEntity.Group.getShardGroup(id)))
    }
    /** The runner placement by room chooses for a Group of `size` under key `key`, counted as taken at once. */
    const byRoom = (key: string, size: number) => {
      const room = Placement.choose(directory.rooms(), size, directory.ownerOf(key))
      if (room !== undefined) directory.learnRoom(Placement.taken(room, size))
      return room
    }
    const place = PlaceGroup.make({
      candidates: (group) => Routing.candidateKeys(runId, group.groupId, options.shards, shardOf),
      reserve: (at, key, slots) =>
        deadline(`Reserve ${key}`, whileRefused(makeClient(at).Reserve({ slots, group: key }))).pipe(
          Effect.tap((answer) =>
            Effect.sync(() => {
              directory.learn(at, answer.runner)
              directory.learnRoom({
                runner: answer.runner,
                key: at,
                used: answer.used,
                free: answer.free,
                draining: answer.decision === "draining"
              })
            })
          ),
          Effect.option
        ),
      byRoom,
      unanswered: (room) => directory.forgetRoom(room.runner)
    })
    // What every runner has room for, kept fresh for placement by room (and the directory's routes with it).
    yield* Effect.forkScoped(directory.refresh.pipe(Effect.repeat(Schedule.spaced(roomRefresh))))

    return {
      session,
      group: runGroup,
      reward: SessionRunner.rewardWith(credit),
      describeError: SessionRunner.describeError,
      // A Group's ids at the runner placement by room chooses, without a round trip: its first poll takes the Group
      // there or refuses it (`group` answers "refused" and the pool asks again). With no runner known to have room,
      // `Reserve` places it (`PlaceGroup`: the hash candidates, or a wait for room).
      newGroupIds: (group: SessionRunner.PlannedGroup) =>
        Effect.gen(function*() {
          const key = Routing.groupKey(runId, group.groupId)
          const room = byRoom(key, group.size)
          const placed = room === undefined ? yield* place(group) : { key, runner: room.runner }
          const random = randomHex(16 * group.size)
          return Array.from(
            { length: group.size },
            (_, i) => Routing.sessionId(placed.key, placed.runner, random.slice(32 * i, 32 * (i + 1)))
          )
        }),
      // Called once per Group, its effect once per Session: the Group is placed (its slots reserved) on the first.
      newSessionId: (group: SessionRunner.PlannedGroup) => {
        let placed: { readonly key: string; readonly runner: string } | undefined
        return Effect.gen(function*() {
          placed ??= yield* place(group)
          return Routing.sessionId(placed.key, placed.runner, randomHex(16))
        })
      },
      takeParserFailures: Effect.sync(() => {
        const taken = parserFailures
        parserFailures = 0
        return taken
      }),
      takeDrift: Effect.sync(() => {
        const taken = drift
        drift = new Map()
        return taken
      })
    } satisfies SessionRunner.SessionRunnerShape
  })

/** The controller's `SessionRunner` over the cluster (needs `Sharding`: a client-only cluster member). */
export const layer = (
  options: RemoteOptions
): Layer.Layer<
  SessionRunner.SessionRunner,
  never,
  Credit.Credit | Fleet.Fleet | RolloutConfig.RolloutConfig | Sharding.Sharding
> => Layer.effect(SessionRunner.SessionRunner, make(options))
