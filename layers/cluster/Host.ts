/**
 * The runner's side of the Group entity: it runs the Sessions the controller sends to this runner with the same
 * `SessionRunner` a single process uses (Prepare → Runtime: agent process, forest, generation), and answers `Where`,
 * `Grant` and `Stop` (docs/scale-out.md "How a Group runs on a runner").
 *
 * **Details**
 * The hosted Sessions live in one runner-wide table, not in an entity instance: a Group stays on the runner that took
 * it (its holder) until it ends, whatever happens to the shard of the entity it was placed under, and any entity of
 * this runner reaches it (docs/scale-out.md "Placement that outlives shard moves"). Each Session's fiber runs in the
 * host's scope, so when the runner stops, every agent it launched is reaped. A Session's ticket is the controller's,
 * relayed: the agent's first model request is reported (`FirstRequest`, the controller's first-request barrier counts
 * it) and every request waits for `Grant` (the Group's Runtime lease, given by the controller's Scheduler); `Stop`
 * fails the lease, so waiting requests end with `SessionClosedError`, and interrupts the Session. Every message is safe
 * to receive twice: a second `RunGroup` follows the Sessions already running, a second `Grant` or `Stop` changes
 * nothing, and a message naming another runner incarnation fails with `NotHolderError` (its sender finds the holder
 * again); a stopped Session's id is remembered for a while, so a late `RunGroup` naming it reports it `Failed` with the
 * reason it was stopped instead of starting it again against an empty forest. One event stream follows the Sessions a
 * `RunGroup` names (`SessionFollowers.ts`); through an entity whose shard moves away it ends with `NotHolderError`
 * (the Sessions go on; the controller follows them through another entity). A stream that completes has delivered
 * its Sessions' ends to the controller: the host forgets them then, without a `Stop` (an ended Session's slot is free
 * from its end on). A Session the controller stops touching (`Touch`, every 5 s) for `orphanAfter` is reaped: its controller
 * died without stopping it. With `--runner-slots` the host reserves a whole Group's slots (the Group's placing
 * `PollGroup`, or `Reserve`; `src/cluster/Slots.ts`) or refuses, and each new Session uses one reserved slot; a
 * draining host (SIGTERM) reserves nothing and starts no Session of a Group not reserved on it, and `drain` completes once its Sessions have ended.
 * Entity handlers report defects to the caller (`disableFatalDefects`), where the Scheduler drops the Group, instead
 * of the cluster's default of retrying a defect forever.
 *
 * This module hosts the Sessions; placement and slots are `HostSlots.ts`, the fleet commands `HostFleet.ts`, the
 * orphan reaper and the runner's end `HostReaper.ts`, the entity's handlers `HostEntity.ts`.
 */
import { Clock, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Stream } from "effect"
import { randomBytes } from "node:crypto"
import type * as ClusterError from "../../src/cluster/ClusterError.ts"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as SessionError from "../../src/session/SessionError.ts"
import * as Engine from "../engine/Engine.ts"
import * as RolloutConfig from "../rollout/RolloutConfig.ts"
import * as SessionRunner from "../rollout/SessionRunner.ts"
import * as GenerationGate from "../schedule/GenerationGate.ts"
import * as GroupEntity from "./GroupEntity.ts"
import * as HostFleet from "./HostFleet.ts"
import * as HostReaper from "./HostReaper.ts"
import * as HostSlots from "./HostSlots.ts"
import * as SessionFollowers from "./SessionFollowers.ts"

interface Hosted extends HostFleet.Followed, HostReaper.Reaped, SessionFollowers.Followed {
  /** The run id of the controller that sent it (its fleet commands apply to it). */
  readonly controller: string
  /** The controller granted its Group's lease. */
  leased: boolean
  readonly lease: Deferred.Deferred<void, SessionError.SessionClosedError>
  readonly firstRequest: Deferred.Deferred<void>
  rolloutId: number
  fiber: Fiber.Fiber<void> | undefined
  /** When the controller last sent anything for this Session (ms, the Clock's). */
  touched: number
  /** When a `PollGroup` answer last carried its end (ms, the Clock's); kept until its controller's receipt. */
  answeredAt: number | undefined
}

/**
 * The entity a message came through: its id and whether this runner still owns its shard. A Group's stream through an
 * entity whose shard moved away ends (`NotHolderError`), so its controller follows it through another entity.
 */
export type Placement = SessionFollowers.Placement

/** Why a Session was stopped here, or that its end was delivered: a later `RunGroup` naming it reports this. */
interface Tombstone extends HostReaper.Stopped {
  /**
   * The error's fields, not the error (whose stack keeps the stopping request's closures, for ten minutes). Absent:
   * its end reached its controller (`HostReaper.delivered`, made only when a late message names it).
   */
  readonly stopped?: { readonly type: string; readonly detail: string } | undefined
  /** Refused at its Group's placing poll: a re-delivered placing poll is refused again the same way. */
  readonly refused?: typeof ClusterWire.PlacementRefusedError.fields.decision.Type | undefined
}

/** A runner's capacity settings. */
export interface HostOptions {
  /** `--runner-slots`: agent processes (Sessions) this runner may hold; unlimited when absent. */
  readonly slots?: number | undefined
  /** How long a Session no controller touches, or a reservation no Session uses, is kept (default `orphanAfter`). */
  readonly orphanTimeout?: Duration.Duration | undefined
  /**
   * How long a Session whose end a `PollGroup` answer carried is kept without its controller's receipt (default
   * {@link answeredGrace}; a runner sets twice its `--cluster-call-timeout`).
   */
  readonly answeredGrace?: Duration.Duration | undefined
  /** How long a `PollGroup` waits for something new before it answers with nothing (default 2 s). */
  readonly pollWait?: Duration.Duration | undefined
}

/** Answers a forwarded model request on the owner (`layers/cluster/Forward.ts`). */
export type ForwardHandler = (request: ClusterWire.ForwardedRequest) => Effect.Effect<ClusterWire.ForwardedResponse>

export interface HostShape {
  /** This runner process's incarnation id (random per start). */
  readonly incarnation: string
  /** The address peers dial (`host:port`). */
  readonly address: string
  /** How many Sessions this runner hosts now. */
  readonly hosted: Effect.Effect<number>
  /**
   * Slots in use: hosted Sessions that have not ended plus slots reserved for Sessions that have not arrived (an ended
   * Session's result is kept until its stream delivered it, or its controller stops it, without its slot).
   */
  readonly used: Effect.Effect<number>
  /** How many event streams are open now (one a Group, usually). */
  readonly streams: Effect.Effect<number>
  /** Reserve slots for the Group `key` (`--runner-slots`, `src/cluster/Slots.ts`). */
  readonly reserve: (
    key: string,
    payload: typeof GroupEntity.Reserve.payloadSchema.Type
  ) => Effect.Effect<typeof GroupEntity.Reserve.successSchema.Type>
  /**
   * SIGTERM, at once (called from the signal's handler, so no message served after the signal sees the runner
   * otherwise): reserve nothing more and start no Session of a Group not reserved here.
   */
  readonly startDraining: () => void
  /**
   * Drain (SIGTERM): start draining, then complete once every hosted Session has ended and every reservation is used
   * or expired.
   */
  readonly drain: Effect.Effect<void>
  /** The Group entity's messages, as this runner answers them (see `GroupEntity`). */
  readonly where: Effect.Effect<typeof GroupEntity.Where.successSchema.Type>
  readonly runGroup: (
    payload: typeof GroupEntity.RunGroup.payloadSchema.Type,
    placement?: Placement
  ) => Stream.Stream<ClusterWire.GroupEvent, ClusterWire.RunFailure>
  readonly pollGroup: (
    payload: typeof GroupEntity.PollGroup.payloadSchema.Type,
    placement?: Placement
  ) => Effect.Effect<ReadonlyArray<ClusterWire.GroupEvent>, ClusterWire.PollFailure>
  /** Each Group's poll of a `PollRunner` answered together (`SessionFollowers.pollMany`), in their order. */
  readonly pollRunner: (
    payload: typeof GroupEntity.PollRunner.payloadSchema.Type,
    placement?: Placement
  ) => Effect.Effect<ReadonlyArray<ClusterWire.RunnerPollAnswer>, ClusterWire.RunFailure>
  readonly grant: (
    payload: typeof GroupEntity.Grant.payloadSchema.Type
  ) => Effect.Effect<void, ClusterWire.NotHolderError | ClusterError.FleetCommandError>
  readonly stop: (
    payload: typeof GroupEntity.Stop.payloadSchema.Type
  ) => Effect.Effect<void, ClusterWire.NotHolderError>
  readonly touch: (
    payload: typeof GroupEntity.Touch.payloadSchema.Type
  ) => Effect.Effect<void, ClusterWire.NotHolderError>
  readonly received: (
    payload: typeof GroupEntity.Received.payloadSchema.Type
  ) => Effect.Effect<void, ClusterWire.NotHolderError>
  readonly fleet: (
    payload: typeof GroupEntity.Fleet.payloadSchema.Type
  ) => Effect.Effect<ClusterWire.FleetReply, ClusterError.FleetCommandError>
  /** A forwarded model request for a Session this runner holds (one naming another holder is refused). */
  readonly forward: (
    request: ClusterWire.ForwardedRequest
  ) => Effect.Effect<ClusterWire.ForwardedResponse, ClusterWire.NotHolderError>
}

/** How often a running Session's stream says it is alive (the controller's idle deadline is a multiple of it). */
export const aliveInterval = SessionFollowers.aliveInterval

const failed = (error: SessionRunner.GroupError): ClusterWire.SessionFailedError =>
  new ClusterWire.SessionFailedError({ type: error._tag, detail: error.message })

/** A Session no controller touched for this long is reaped (its controller died); the controller touches every 5 s. */
export const orphanAfter = Duration.seconds(30)

/**
 * How long a Session whose end a `PollGroup` answer carried is kept when no receipt (`Received`) comes: twice the
 * default call deadline, since a controller repeats a poll only once its answer is a deadline late.
 */
export const answeredGrace = Duration.minutes(1)

/** How often the controller touches each of its Sessions. */
export const touchInterval = Duration.seconds(5)

const make = (address: string, forward: ForwardHandler, options: HostOptions) =>
  Effect.gen(function*() {
    const orphanTimeout = options.orphanTimeout ?? orphanAfter
    const capacity = options.slots
    const settings = yield* RolloutConfig.RolloutConfig
    const runner = yield* SessionRunner.SessionRunner
    const engine = yield* Engine.Engine
    const gate = yield* GenerationGate.GenerationGate
    const retains = gate.mode.partialRollout || gate.mode.fullyAsync
    const scope = yield* Effect.scope
    const incarnation = randomBytes(8).toString("hex")
    const table = new Map<string, Hosted>()
    const tombstones = new Map<string, Tombstone>()
    const slots = HostSlots.make(capacity)
    const clock = yield* Clock.clockWith(Effect.succeed)
    // Sessions hosted and not ended: an ended Session's slot is free while the host keeps its result for its stream.
    let running = 0
    const used = () => slots.used(running)
    const fingerprint = Fingerprint.of(settings)
    const readConfig = Fingerprint.textReader()
    // The Groups' event streams: queues the host fills, one runner-wide loop for Alive and route checks. A Session
    // whose end a stream delivered is forgotten (its controller sends no Stop for it); its slot was freed at its end.
    const followers = SessionFollowers.make({
      incarnation,
      retains,
      pollWait: options.pollWait,
      delivered: (sessions) => forget(sessions),
      // A poll's answer is not acknowledged: the Sessions whose end it carried are kept until their controller's
      // receipt (or the grace, when the receipt is lost), so a poll repeated after a lost or late answer finds them.
      answered: (sessions) =>
        Effect.sync(() => {
          const at = clock.currentTimeMillisUnsafe()
          for (const { sessionId } of sessions) {
            const hosted = table.get(sessionId)
            if (hosted !== undefined) hosted.answeredAt = at
          }
        })
    })
    yield* Effect.forkIn(followers.start, scope)

    const checkRunner = (holder: string): Effect.Effect<void, ClusterWire.NotHolderError> =>
      holder === incarnation
        ? Effect.void
        : Effect.fail(new ClusterWire.NotHolderError({ holder, runner: incarnation }))

    /** A Session a poll names that this runner neither runs nor remembers, and that the poll may not start. */
    const unknownSession = (sessionId: string) =>
      new ClusterWire.SessionFailedError({
        type: "SessionUnknown",
        detail: `runner ${address} does not hold Session ${sessionId}, and a poll that does not place its Group ` +
          "starts no Session"
      })

    /** The Session ended (its agent, or a stop): its slot is free, its streams report it. */
    const ended = (hosted: Hosted, exit: Exit.Exit<ClusterWire.SessionResult, ClusterWire.SessionFailedError>) => {
      if (hosted.ended === undefined) running -= 1
      followers.ended(hosted, exit)
    }

    /**
     * The controller holds the end of these Sessions (`Received`, or riding a poll): those whose end an answer carried
     * are forgotten (a receipt never forgets a running Session, nor an end not sent yet).
     */
    const received = (sessionIds: ReadonlyArray<string>) => {
      const answered: Array<Hosted> = []
      for (const sessionId of sessionIds) {
        const hosted = table.get(sessionId)
        if (hosted?.answeredAt !== undefined) answered.push(hosted)
      }
      forget(answered)
    }

    /** Sessions whose end reached their controller: gone from the table, a late `RunGroup` naming one says so. */
    const forget = (sessions: ReadonlyArray<SessionFollowers.Followed>) => {
      // One tombstone for the batch: they were forgotten together.
      const delivered: Tombstone = { at: clock.currentTimeMillisUnsafe() }
      for (const { sessionId } of sessions) {
        if (table.delete(sessionId)) tombstones.set(sessionId, delivered)
      }
    }

    /**
     * A new hosted Session (in the table from now on, `touched` at `now`) and its run, which the caller forks in the
     * host's scope (the first `RunGroup` or placing `PollGroup` that names it).
     */
    const start = (
      controller: string,
      group: ClusterWire.PlannedGroup,
      session: ClusterWire.GroupSession,
      now: number
    ) => {
      const hosted: Hosted = {
        sessionId: session.sessionId,
        followers: new Set(),
        arrived: false,
        ended: undefined,
        gateState: SessionFollowers.notAtGate,
        controller,
        leased: false,
        lease: Deferred.makeUnsafe<void, SessionError.SessionClosedError>(),
        firstRequest: Deferred.makeUnsafe<void>(),
        rolloutId: 0,
        fiber: undefined,
        touched: now,
        answeredAt: undefined
      }
      table.set(session.sessionId, hosted)
      running += 1
      const ticket = {
        groupId: group.groupId,
        sessionId: session.sessionId,
        position: session.position,
        awaitLease: Effect.suspend(() => {
          if (!hosted.arrived) {
            Deferred.doneUnsafe(hosted.firstRequest, Exit.void)
            followers.arrived(hosted)
          }
          return Deferred.await(hosted.lease)
        }),
        leased: Deferred.await(hosted.lease).pipe(Effect.catch(() => Effect.never)),
        firstRequest: Deferred.await(hosted.firstRequest),
        rolloutId: () => hosted.rolloutId
      }
      const run = runner.session(group, ticket).pipe(
        Effect.flatMap((result) =>
          Effect.zipWith(
            runner.takeParserFailures,
            runner.takeDrift,
            (parserFailures, drift): ClusterWire.SessionResult => ({
              sessionId: result.sessionId,
              samples: result.samples.map(TrainingSample.toWire),
              debug: result.debug,
              parserFailures,
              ...(drift.size === 0 ? {} : { drift: Object.fromEntries(drift) })
            })
          )
        ),
        Effect.exit,
        Effect.map((exit) => ended(hosted, Exit.mapError(exit, failed)))
      )
      return { hosted, run }
    }

    /**
     * End a hosted Session: its requests fail, its agent is reaped, its slot is freed; a stream still following it
     * reports `error`, and a later `RunGroup` naming it (a re-delivery) reports it instead of starting it again.
     */
    const stop = (sessionId: string, error: ClusterWire.SessionFailedError) =>
      Effect.gen(function*() {
        const hosted = table.get(sessionId)
        if (hosted === undefined) return
        table.delete(sessionId)
        tombstones.set(sessionId, {
          stopped: { type: error.type, detail: error.detail },
          at: yield* Clock.currentTimeMillis
        })
        ended(hosted, Exit.fail(error))
        yield* Deferred.fail(hosted.lease, new SessionError.SessionClosedError({ sessionId }))
        if (hosted.fiber !== undefined) yield* Fiber.interrupt(hosted.fiber)
      })

    yield* HostReaper.start({
      incarnation,
      address,
      orphanTimeout,
      answeredGrace: options.answeredGrace ?? answeredGrace,
      forget: (sessionId) => received([sessionId]),
      hosted: table,
      tombstones,
      expireReservations: slots.expire,
      stop
    })

    const gateStateOf = (sessionId: string): ClusterWire.GateState => ({
      interrupted: gate.isInterrupted(sessionId),
      protected: gate.isProtected(sessionId)
    })
    // Every change at the gate may change a Session's state: its event stream reports the new one.
    if (retains) {
      gate.onChange(() => {
        for (const [sessionId, hosted] of table) {
          const next = gateStateOf(sessionId)
          const last = hosted.gateState
          if (next.interrupted !== last.interrupted || next.protected !== last.protected) followers.gate(hosted, next)
        }
      })
    }

    const fleet = HostFleet.make({
      incarnation,
      ownEngine: settings.engine !== "sglang",
      engine,
      gate,
      sessions: () => table.entries(),
      gateStateOf
    })

    /**
     * The Sessions a `RunGroup` or `PollGroup` names: each one running here followed, each new one started (when it
     * is admitted), each stopped or refused one reported with why.
     */
    const admit = (
      payload: Omit<typeof GroupEntity.RunGroup.payloadSchema.Type, "sessions" | "group" | "config"> & {
        readonly sessions: ReadonlyArray<ClusterWire.GroupSession>
        /** The Group and the controller's settings: absent on a poll that follows Sessions only (it starts none). */
        readonly group?: ClusterWire.PlannedGroup | undefined
        readonly config?: { readonly [flag: string]: string } | undefined
      }
    ) =>
      Effect.gen(function*() {
        yield* checkRunner(payload.runner)
        const differs = payload.config === undefined ? undefined : Fingerprint.mismatch(payload.config, fingerprint)
        if (differs !== undefined) {
          return yield* Effect.fail(new ClusterWire.SessionFailedError({ type: "ConfigMismatch", detail: differs }))
        }
        const { config, group } = payload
        const now = yield* Clock.currentTimeMillis
        const following: Array<Hosted> = []
        const refused: Array<SessionFollowers.Refused> = []
        // One log line for the Sessions this message starts (a Group's, usually), one `hosts Session …` each.
        let hosts = ""
        for (const session of payload.sessions) {
          // A stopped Session is never started again (a late re-delivery), a running one is followed.
          const tombstone = tombstones.get(session.sessionId)
          if (tombstone !== undefined) {
            const why = tombstone.stopped ?? HostReaper.delivered(session.sessionId)
            const error = new ClusterWire.SessionFailedError({ type: why.type, detail: why.detail })
            refused.push({ sessionId: session.sessionId, error })
            continue
          }
          let hosted = table.get(session.sessionId)
          if (hosted === undefined) {
            // A poll that only follows its Group's Sessions (not its placing one) starts none.
            if (group === undefined || config === undefined) {
              refused.push({ sessionId: session.sessionId, error: unknownSession(session.sessionId) })
              continue
            }
            const notAdmitted = slots.admit(Routing.groupKeyOf(session.sessionId), session.sessionId, address)
            if (notAdmitted !== undefined) {
              refused.push({ sessionId: session.sessionId, error: notAdmitted })
              continue
            }
            const started = start(payload.controller, group, session, now)
            hosted = started.hosted
            // Started at once, up to its agent's first wait: no event-loop turn between the message and the start.
            hosted.fiber = yield* Effect.forkIn(started.run, scope, { startImmediately: true })
            hosts += `${hosts === "" ? "" : ", "}hosts Session ${session.sessionId} [slots ${used()}/${
              capacity ?? "unlimited"
            }]`
          }
          hosted.touched = now
          following.push(hosted)
        }
        if (hosts !== "") yield* Effect.logInfo(`runner ${incarnation}, Group ${group?.groupId}: ${hosts}`)
        return { following, refused }
      })

    /**
     * A placing `PollGroup` (the Group's first, until one is answered): the Group's slots are reserved before any of
     * its Sessions starts, as `Reserve` would, or the Group is refused with its Session ids (a re-delivered placing poll
     * is refused again: its controller placed the Group elsewhere under new ids). A repeated poll whose Sessions run
     * here already, or a Group that `Reserve` placed here, reserves nothing.
     */
    const place = (payload: typeof GroupEntity.PollGroup.payloadSchema.Type) =>
      Effect.gen(function*() {
        yield* checkRunner(payload.runner)
        const ids = payload.sessions.map((s) => s.sessionId)
        const key = Routing.groupKeyOf(ids[0] ?? "")
        const earlier = ids.map((id) => tombstones.get(id)?.refused).find((d) => d !== undefined)
        const fresh = ids.filter((id) => !table.has(id) && !tombstones.has(id))
        // A Group reserved here (`Reserve`, before a drain's signal too) starts on its reservation.
        if (key === undefined || (earlier === undefined && (fresh.length === 0 || slots.reserved(key)))) return
        const decision = earlier ??
          (yield* slots.reserve(key, { slots: fresh.length, group: key }, table.size, { incarnation, address }))
            .decision
        if (decision === "granted") return
        const at = yield* Clock.currentTimeMillis
        const detail = `runner ${address} refused Group ${payload.group?.groupId ?? key} at its placement: ${decision}`
        const tombstone: Tombstone = { stopped: { type: "PlacementRefused", detail }, at, refused: decision }
        for (const id of fresh) tombstones.set(id, tombstone)
        // The receipts riding the refused poll still count.
        if (payload.received !== undefined) received(payload.received)
        return yield* Effect.fail(
          new ClusterWire.PlacementRefusedError({
            runner: incarnation,
            address,
            decision,
            used: used(),
            free: slots.free(table.size),
            capacity: capacity ?? null
          })
        )
      })

    /** A poll's Sessions admitted (its Group placed first, on a placing poll), the lease it carries granted. */
    const prepare = (payload: typeof GroupEntity.PollGroup.payloadSchema.Type) =>
      Effect.gen(function*() {
        if (payload.place === true) yield* place(payload)
        const { following, refused } = yield* admit(payload)
        // As a `Grant` (its failure ignored), on its own fiber: a wait for new weights holds up no other Group's poll.
        if (payload.grant !== null) {
          const granting = lease(payload.controller, payload.grant, following).pipe(
            Effect.catchTag("FleetCommandError", (error) =>
              Effect.logWarning(
                `runner ${incarnation} could not follow the weights of a Group's lease: ${error.message}`
              ))
          )
          yield* Effect.forkIn(granting, scope, { startImmediately: true })
        }
        const known = new Map(payload.sessions.map((s) => [s.sessionId, s]))
        return { sessions: following, refused, known: (sessionId: string) => known.get(sessionId) }
      })

    /** The Group's Runtime lease for `sessions`: they follow the controller's weights, then generate under the step. */
    const lease = (controller: string, grant: ClusterWire.PolledGrant, sessions: ReadonlyArray<Hosted>) =>
      Effect.gen(function*() {
        if (sessions.length === 0) return
        yield* fleet.follow(controller, grant.weights)
        for (const hosted of sessions) {
          hosted.rolloutId = grant.rolloutId
          hosted.leased = true
          yield* Deferred.succeed(hosted.lease, undefined)
        }
      })

    const drain = Effect.gen(function*() {
      slots.startDraining()
      yield* Effect.logInfo(
        `runner ${incarnation} drains: takes no new Group; waits for ${table.size} hosted Session(s) to end`
      )
      // Until every Session ended and its result reached its controller (or it was stopped), and no slot is promised.
      while (slots.used(table.size) > 0) yield* Effect.sleep(Duration.millis(500))
      yield* Effect.logInfo(`runner ${incarnation} drained: no Session left`)
    })

    return {
      incarnation,
      address,
      hosted: Effect.sync(() => table.size),
      used: Effect.sync(used),
      streams: Effect.sync(followers.open),
      reserve: (key, payload) => slots.reserve(key, payload, table.size, { incarnation, address }),
      startDraining: slots.startDraining,
      drain,
      where: Effect.sync(() => ({
        runner: incarnation,
        address,
        used: used(),
        free: slots.free(table.size),
        draining: slots.draining()
      })),
      runGroup: (payload, placement) =>
        Stream.unwrap(
          Effect.map(admit(payload), ({ following, refused }) => followers.follow(following, refused, placement))
        ),
      pollGroup: (payload, placement) =>
        Effect.flatMap(prepare(payload), (poll) => {
          if (payload.received !== undefined) received(payload.received)
          return Effect.map(followers.pollMany([poll], placement), ([events]) => events ?? [])
        }),
      pollRunner: (payload, placement) =>
        Effect.gen(function*() {
          yield* checkRunner(payload.runner)
          if (payload.received !== undefined) received(payload.received)
          const config = payload.config === undefined ? undefined : readConfig(payload.config)
          // Settings this runner cannot read fail the Groups they would start; the others are followed as before.
          const unread = payload.config !== undefined && config === undefined ? payload.config : undefined
          const common = { runner: payload.runner, controller: payload.controller, ...(config && { config }) }
          // Each Group's poll as its own `PollGroup` would be; one that fails (refused at its placement) fails alone.
          const prepared = yield* Effect.forEach(payload.polls, (poll) =>
            Effect.result(
              unread !== undefined && poll.place
                ? Effect.fail(Fingerprint.unreadable(address, unread))
                : prepare({ ...poll, ...common })
            ))
          const ready = prepared.flatMap((p) => p._tag === "Success" ? [p.success] : [])
          const events = yield* followers.pollMany(ready, placement)
          let at = 0
          return prepared.map((p) =>
            p._tag === "Success" ? { events: events[at++] ?? [] } : { events: [], failure: p.failure }
          )
        }),
      grant: (payload) =>
        Effect.andThen(
          checkRunner(payload.runner),
          lease(payload.controller, payload, payload.sessionIds.flatMap((id) => table.get(id) ?? []))
        ),
      stop: (payload) =>
        Effect.andThen(
          checkRunner(payload.runner),
          Effect.forEach(
            payload.sessionIds,
            (sessionId) => stop(sessionId, HostReaper.stoppedByController(sessionId)),
            { discard: true }
          )
        ),
      received: (payload) =>
        Effect.andThen(checkRunner(payload.runner), Effect.sync(() => received(payload.sessionIds))),
      touch: (payload) =>
        Effect.gen(function*() {
          yield* checkRunner(payload.runner)
          const now = yield* Clock.currentTimeMillis
          for (const sessionId of payload.sessionIds) {
            const hosted = table.get(sessionId)
            if (hosted !== undefined) hosted.touched = now
          }
        }),
      fleet: fleet.fleet,
      forward: (request) => Effect.andThen(checkRunner(Routing.holderOf(request.sessionId) ?? ""), forward(request))
    } satisfies HostShape
  })

/** The runner's hosted Sessions. */
export class Host extends Context.Service<Host, HostShape>()("relax-agentic/Host") {
  /** The host at `address` (what peers dial), answering forwarded requests with `forward`. */
  static readonly layer = (address: string, forward: ForwardHandler, options: HostOptions = {}) =>
    Layer.effect(Host, make(address, forward, options))
}
