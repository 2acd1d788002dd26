/**
 * The controller's `group` (layers/cluster/Remote.ts: a whole Group in one fiber, the Group pool's way in cluster
 * mode) against the Group entity on the cluster's in-memory test runner (messages serialized as between processes):
 * the Group followed by polls (each riding its runner's `PollRunner`), its agents' first requests counted on the
 * pool's barrier (`arrive`), one `Grant` when the barrier's lease is granted, each Session's end handed over (a
 * failure at once, results once the Group's last Session ended), the Sessions whose end a poll's answer carried
 * forgotten by the runner without a `Stop`, and one `Stop` for all the runner still holds when the Group's effect is
 * interrupted (a drop). Two Groups on one runner that start together poll in one `PollRunner` (counted on the
 * runner's host). The hosted Sessions are scripted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Layer, Ref, Stream } from "effect"
import { type Sharding, TestRunner } from "effect/cluster"
import * as GroupEntity from "../../layers/cluster/GroupEntity.ts"
import * as Host from "../../layers/cluster/Host.ts"
import * as HostEntity from "../../layers/cluster/HostEntity.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as FirstRequestBarrier from "../../layers/schedule/FirstRequestBarrier.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import * as SessionError from "../../src/session/SessionError.ts"
import * as ClusterRollout from "../support/clusterRollout.ts"

/** What the hosted Sessions did: how many started and ended; and how many polls each `PollRunner` carried. */
interface Script {
  readonly starts: Ref.Ref<number>
  readonly ended: Ref.Ref<number>
  readonly messages: Array<number>
}

/**
 * Hosted Sessions that wait for their lease, then end by `position`: `fails` with an agent error, `hangs` forever,
 * any other returns its id and the step it was leased under.
 */
const agents = (script: Script, ends: { readonly fails?: number; readonly hangs?: number } = {}) =>
  ClusterRollout.hostedSessions((_, ticket) =>
    Effect.gen(function*() {
      yield* Ref.update(script.starts, (n) => n + 1)
      yield* ticket.awaitLease.pipe(Effect.orDie)
      if (ticket.position === ends.fails) {
        return yield* new SessionError.AgentExecutionError({
          sessionId: ticket.sessionId,
          reason: "exit",
          logTail: ""
        })
      }
      if (ticket.position === ends.hangs) return yield* Effect.never
      return { sessionId: `${ticket.sessionId}@${ticket.rolloutId()}`, samples: [], debug: [] }
    }).pipe(Effect.onExit(() => Ref.update(script.ended, (n) => n + 1)))
  )

const trio = ClusterRollout.plannedGroup(3)

/** The runner's host as `host` is, each `PollRunner` it answers counted in `messages` by the polls it carries. */
const counted = <E>(host: Layer.Layer<Host.Host, E>, messages: Array<number>) =>
  Layer.effect(
    Host.Host,
    Effect.map(Effect.service(Host.Host), (inner): Host.HostShape => ({
      ...inner,
      pollRunner: (payload, placement) => {
        messages.push(payload.polls.length)
        return inner.pollRunner(payload, placement)
      }
    }))
  ).pipe(Layer.provide(host))

/** A runner hosting `agents` on the test runner, and the controller's `Remote` over it. */
const harness = <A, E>(
  ends: Parameters<typeof agents>[1],
  body: (
    script: Script
  ) => Effect.Effect<A, E, Host.Host | SessionRunner.SessionRunner | Sharding.Sharding | RolloutConfig.RolloutConfig>,
  hostOptions: Host.HostOptions = {},
  callTimeout = Duration.seconds(5)
) =>
  Effect.gen(function*() {
    const script: Script = { starts: yield* Ref.make(0), ended: yield* Ref.make(0), messages: [] }
    const cluster = HostEntity.layer.pipe(
      Layer.provideMerge(counted(ClusterRollout.hostLayer(agents(script, ends), hostOptions), script.messages)),
      Layer.provideMerge(TestRunner.layer)
    )
    const controller = ClusterRollout.controllerLayer({ callTimeout, shards: 300 })
    return yield* body(script).pipe(
      Effect.provide(controller.pipe(Layer.provideMerge(cluster), Layer.provideMerge(ClusterRollout.settings)))
    )
  })

/**
 * The Group placed, to be started through `group` (`start`) on the pool's barrier for it (leased under step 7 once
 * `lease` is granted); `ended` collects each Session's end by position.
 */
const placeGroup = (options: { readonly leaseOnReady: boolean; readonly group?: SessionRunner.PlannedGroup }) =>
  Effect.gen(function*() {
    const group = options.group ?? trio
    const runner = yield* SessionRunner.SessionRunner
    const ids = yield* Effect.forEach([0, 1, 2], () => runner.newSessionId!(group))
    const lease = yield* Deferred.make<boolean>()
    const ready = yield* Deferred.make<void>()
    const barrier = yield* FirstRequestBarrier.make({
      groupId: group.groupId,
      sessionIds: ids,
      lease,
      rolloutId: () => 7,
      onReady: Deferred.succeed(ready, undefined).pipe(
        Effect.andThen(options.leaseOnReady ? Deferred.succeed(lease, true) : Effect.void),
        Effect.asVoid
      )
    })
    const ended = new Map<number, Exit.Exit<SessionRunner.SessionResult, SessionRunner.GroupError>>()
    const start = Effect.forkChild(runner.group!(
      group,
      { tickets: ids.map((_, i) => barrier.ticket(i)), arrive: barrier.arrive },
      (position, exit) => Effect.sync(() => void ended.set(position, exit))
    ))
    return { ids, lease, ready, ended, start }
  })

/** The Group placed and started (see {@link placeGroup}). */
const startGroupWith = (options: { readonly leaseOnReady: boolean }) =>
  Effect.gen(function*() {
    const { start, ...placed } = yield* placeGroup(options)
    return { ...placed, fiber: yield* start }
  })

const startGroup = startGroupWith({ leaseOnReady: false })

/**
 * What a `RunGroup` naming `sessionIds` (a late re-delivery) reports of each: a Session forgotten once its end reached
 * the controller says `SessionEnded`, one the controller stopped `SessionStopped`.
 */
const lateRunGroup = (sessionIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const host = yield* Host.Host
    const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
    const events = yield* client.RunGroup({
      runner: host.incarnation,
      controller: "c",
      group: trio,
      sessions: sessionIds.map((sessionId, position) => ({ sessionId, position })),
      config: Fingerprint.of(yield* RolloutConfig.RolloutConfig)
    }).pipe(Stream.runCollect, Effect.timeout("10 seconds"))
    return events.map((e) => e._tag === "Failed" ? e.type : e._tag)
  })

/**
 * A `PollGroup` of the test's Group naming `sessionIds` (with the first requests seen or not, the lease riding it or
 * not, and `received`: the receipts it carries), sent as a controller would; what it answered of each Session.
 */
const poll = (
  sessionIds: ReadonlyArray<string>,
  options: {
    readonly arrived: boolean
    readonly grant?: boolean
    readonly received?: ReadonlyArray<string>
    readonly room?: boolean
  }
) =>
  Effect.gen(function*() {
    const host = yield* Host.Host
    const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
    const events = yield* client.PollGroup({
      runner: host.incarnation,
      controller: "c",
      group: trio,
      sessions: sessionIds.map((sessionId, position) => ({
        sessionId,
        position,
        arrived: options.arrived,
        gate: null
      })),
      config: Fingerprint.of(yield* RolloutConfig.RolloutConfig),
      grant: options.grant === true ? { rolloutId: 7, weights: { seq: 0, version: "0", paused: null } } : null,
      ...(options.received === undefined ? {} : { received: options.received }),
      ...(options.room === undefined ? {} : { room: options.room })
    }).pipe(Effect.timeout("10 seconds"))
    return events.map((e) =>
      e._tag === "Failed"
        ? e.type
        : e._tag === "Done"
        ? e.result.sessionId
        : e._tag === "Room"
        ? `Room used ${e.used} free ${e.free}${e.draining ? " draining" : ""}`
        : e._tag
    )
  })

/**
 * What a `PollGroup` naming `sessionIds` (their first requests seen) answers of each: a poll repeated after an answer
 * that carried their ends was lost. `received`: receipts riding it.
 */
const repeatedPoll = (sessionIds: ReadonlyArray<string>, received?: ReadonlyArray<string>) =>
  poll(sessionIds, { arrived: true, ...(received === undefined ? {} : { received }) })

/** Start the Group by a poll carrying its lease, then poll until an answer carried the Sessions' results. */
const pollUntilEnded = (sessionIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    let answer = yield* poll(sessionIds, { arrived: false, grant: true })
    while (!answer.some((e) => e.endsWith("@7"))) answer = yield* repeatedPoll(sessionIds)
    return answer.filter((e) => e.endsWith("@7"))
  }).pipe(Effect.timeout("10 seconds"))

/** The result of each of the trio's Sessions by position (its id and step), or how it ended otherwise. */
const results = (ended: ReadonlyMap<number, Exit.Exit<SessionRunner.SessionResult, SessionRunner.GroupError>>) =>
  [0, 1, 2].map((i) => {
    const exit = ended.get(i)
    return exit !== undefined && Exit.isSuccess(exit) ? exit.value.sessionId : String(exit)
  })

/** Wait until the runner hosts no Session (the controller's `Stop`s are sent from its own scope). */
const hostsNone = Effect.gen(function*() {
  const host = yield* Host.Host
  while ((yield* host.hosted) > 0) yield* Effect.sleep("20 millis")
}).pipe(Effect.timeout("10 seconds"))

describe("the controller's group (cluster)", () => {
  it.live("polls for the Group: first requests reach the barrier, the lease one Grant, each result its Session", () =>
    harness(
      {},
      (script) =>
        Effect.gen(function*() {
          const host = yield* Host.Host
          const { ended, fiber, ids, lease, ready } = yield* startGroup
          // Every hosted agent's first request reached the pool's barrier without waiting for the lease.
          yield* Deferred.await(ready).pipe(Effect.timeout("10 seconds"))
          assert.strictEqual(yield* host.hosted, 3)
          assert.strictEqual(ended.size, 0)
          // The pool leases the Group later, while the next poll is out (it waits an hour here for something new, the
          // controller a minute for its answer): the lease goes as its own Grant.
          yield* Effect.sleep("100 millis")
          yield* Deferred.succeed(lease, true)
          yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
          assert.deepStrictEqual(results(ended), ids.map((id) => `${id}@7`))
          // The runner forgot the Sessions once the controller's receipt came, without a Stop.
          yield* hostsNone
          assert.deepStrictEqual(yield* lateRunGroup(ids), ["SessionEnded", "SessionEnded", "SessionEnded"])
          assert.strictEqual(yield* Ref.get(script.starts), 3)
          assert.strictEqual(yield* Ref.get(script.ended), 3)
        }),
      { pollWait: Duration.hours(1) },
      Duration.minutes(1)
    ))

  it.live("a Session the runner fails ends at once; interrupting the Group stops all the runner holds", () =>
    harness({ fails: 0, hangs: 1 }, (script) =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const { ended, fiber, ids, lease, ready } = yield* startGroup
        yield* Deferred.await(ready).pipe(Effect.timeout("10 seconds"))
        yield* Deferred.succeed(lease, true)
        // The runner's failure of Session 0 comes at once (a result would wait for the Group's last end).
        yield* Effect.gen(function*() {
          while (!ended.has(0)) yield* Effect.sleep("20 millis")
        }).pipe(Effect.timeout("10 seconds"))
        const failed = ended.get(0)
        const error = failed === undefined || Exit.isSuccess(failed) ? undefined : Cause.findErrorOption(failed.cause)
        assert.deepStrictEqual(
          error?._tag === "Some" && error.value._tag === "SessionFailedError" ? error.value.type : String(failed),
          "AgentExecutionError"
        )
        assert.isFalse(ended.has(1))
        // Only the running Session keeps its slot. The runner forgets Session 0 a little after a poll's answer carried
        // its failure, and keeps Session 2, whose result waits for the Group's last end (not sent yet).
        yield* Effect.gen(function*() {
          while ((yield* host.used) > 1 || (yield* host.hosted) > 2) yield* Effect.sleep("20 millis")
        }).pipe(Effect.timeout("10 seconds"))
        assert.strictEqual(yield* host.hosted, 2)
        // The pool drops the Group: its effect is interrupted, and one Stop names every Session the runner still holds
        // (the one running, and the one whose result no answer carried).
        yield* Fiber.interrupt(fiber)
        yield* hostsNone
        assert.deepStrictEqual(yield* lateRunGroup(ids), ["SessionEnded", "SessionStopped", "SessionStopped"])
        assert.strictEqual(yield* Ref.get(script.ended), 3)
      })))

  it.live("a lease granted with the first requests rides the next poll; the controller's receipt frees the runner", () =>
    harness({}, () =>
      Effect.gen(function*() {
        // The pool leases the Group as its first requests arrive (no poll is out then): the next poll carries it.
        const { ended, fiber, ids } = yield* startGroupWith({ leaseOnReady: true })
        yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
        assert.deepStrictEqual(results(ended), ids.map((id) => `${id}@7`))
        // The Group's last answer has no later poll of its own to ride: its receipt goes as `Received`, and the
        // runner forgets the Sessions long before its grace (an hour here).
        yield* hostsNone
        assert.deepStrictEqual(yield* lateRunGroup(ids), ["SessionEnded", "SessionEnded", "SessionEnded"])
      }), { answeredGrace: Duration.hours(1) }))

  it.live("an answered end is kept until its receipt: a poll repeated after a lost answer gets the ends again", () =>
    harness({}, () =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const runner = yield* SessionRunner.SessionRunner
        const ids = yield* Effect.forEach([0, 1, 2], () => runner.newSessionId!(trio))
        // A controller that polls the Group itself and sends no receipt: each answer it reads as if lost later.
        const ends = yield* pollUntilEnded(ids)
        assert.deepStrictEqual(ends, ids.map((id) => `${id}@7`))
        assert.strictEqual(yield* host.hosted, 3)
        assert.strictEqual(yield* host.used, 0, "an ended Session's slot is free while its end waits for the receipt")
        // However late the poll is repeated (the grace is an hour), the ends are there again.
        assert.deepStrictEqual(yield* repeatedPoll(ids), ids.map((id) => `${id}@7`))
        // A receipt riding a poll forgets what it names (ended Sessions only); `Received` forgets the rest.
        yield* repeatedPoll(ids.slice(2), ids.slice(0, 1))
        assert.strictEqual(yield* host.hosted, 2)
        const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
        yield* client.Received({ runner: host.incarnation, sessionIds: ids.slice(1) })
        assert.strictEqual(yield* host.hosted, 0)
        assert.deepStrictEqual(yield* lateRunGroup(ids), ["SessionEnded", "SessionEnded", "SessionEnded"])
      }), { answeredGrace: Duration.hours(1) }))

  it.live("a poll that asks for its runner's room gets it last in the answer; one that does not, none", () =>
    harness({}, () =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const runner = yield* SessionRunner.SessionRunner
        const ids = yield* Effect.forEach([0, 1, 2], () => runner.newSessionId!(trio))
        // The three agents asked and wait for their lease: 3 slots in use of 10, after the answer's events.
        const answer = yield* poll(ids, { arrived: false, room: true })
        assert.deepStrictEqual(answer, ["FirstRequest", "FirstRequest", "FirstRequest", "Room used 3 free 7"])
        // Draining shows in the room; a poll that does not ask gets none (both answer nothing new after 50 ms).
        host.startDraining()
        assert.deepStrictEqual(yield* poll(ids, { arrived: true, room: true }), ["Room used 3 free 7 draining"])
        assert.deepStrictEqual(yield* poll(ids, { arrived: true }), [])
      }), { slots: 10, pollWait: Duration.millis(50) }))

  it.live("a receipt never forgets a running Session; an end no receipt came for is forgotten after the grace", () =>
    harness({ hangs: 1 }, () =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const runner = yield* SessionRunner.SessionRunner
        const ids = yield* Effect.forEach([0, 1, 2], () => runner.newSessionId!(trio))
        // Sessions 0 and 2 end at once, Session 1 runs.
        yield* poll(ids, { arrived: false, grant: true })
        const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
        yield* client.Received({ runner: host.incarnation, sessionIds: ids.slice(1, 2) })
        assert.strictEqual(yield* host.hosted, 3)
        assert.strictEqual(yield* host.used, 1)
        // Stop Session 1 (as for a drop): every end is then answered, and no receipt comes.
        yield* client.Stop({ runner: host.incarnation, sessionIds: ids.slice(1, 2) })
        assert.deepStrictEqual(
          [...(yield* repeatedPoll(ids))].sort(),
          [`${ids[0]}@7`, "SessionStopped", `${ids[2]}@7`].sort()
        )
        assert.strictEqual(yield* host.hosted, 2)
        // The grace (300 ms here) passes without a receipt: the runner forgets them.
        yield* hostsNone
        assert.deepStrictEqual(yield* lateRunGroup([ids[0]!, ids[2]!]), ["SessionEnded", "SessionEnded"])
      }), { answeredGrace: Duration.millis(300) }))

  it.live("two Groups on one runner whose polls are due together ask in one PollRunner, each its own answer", () =>
    harness({}, (script) =>
      Effect.gen(function*() {
        const a = yield* placeGroup({ leaseOnReady: true })
        const b = yield* placeGroup({ leaseOnReady: true, group: { ...trio, groupId: "train:prepare_group_1" } })
        // Both start in the same turn: their placing polls go as one message.
        const fibers = [yield* a.start, yield* b.start]
        yield* Effect.forEach(fibers, (fiber) => Fiber.join(fiber).pipe(Effect.timeout("10 seconds")))
        assert.deepStrictEqual(results(a.ended), a.ids.map((id) => `${id}@7`))
        assert.deepStrictEqual(results(b.ended), b.ids.map((id) => `${id}@7`))
        assert.strictEqual(script.messages[0], 2, `polls per PollRunner: ${script.messages.join(", ")}`)
        yield* hostsNone
        assert.strictEqual(yield* Ref.get(script.ended), 6)
      })))
})
