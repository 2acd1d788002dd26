/**
 * A Group placed without its own `Reserve` (docs/scale-out.md "How a Group runs on a runner"): the controller mints
 * the Group's ids at the runner placement by room chooses, and the Group's first `PollGroup` (`place`) takes the
 * Group's slots there before any of its Sessions starts, or refuses the whole Group (`PlacementRefusedError`: full,
 * draining, too small), on the cluster's in-memory test runner (messages serialized as between processes). Every
 * placing poll is safe to deliver twice: a repeat starts and reserves nothing more, and a refused Group's ids are
 * refused again however the room changed meanwhile (its controller placed it elsewhere). A draining runner refuses a
 * Group placed after the signal, and starts one reserved before it. A `PollRunner` whose Groups the runner places
 * or refuses answers each in its place: a refused Group's failure does not fail the others. On the controller, a
 * refusal makes `group` answer `refused` without telling the pool of any Session's end, so the pool places the Group
 * again.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Ref } from "effect"
import { type Sharding, TestRunner } from "effect/cluster"
import { randomBytes } from "node:crypto"
import * as GroupEntity from "../../layers/cluster/GroupEntity.ts"
import * as Host from "../../layers/cluster/Host.ts"
import * as HostEntity from "../../layers/cluster/HostEntity.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as FirstRequestBarrier from "../../layers/schedule/FirstRequestBarrier.ts"
import * as PoolContract from "../../layers/schedule/PoolContract.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import * as ClusterRollout from "../support/clusterRollout.ts"

/** Hosted Sessions that count their starts, ask at once and wait for their lease. */
const agents = (starts: Ref.Ref<number>) =>
  ClusterRollout.hostedSessions((_, ticket) =>
    Ref.update(starts, (n) => n + 1).pipe(
      Effect.andThen(ticket.awaitLease),
      Effect.orDie,
      Effect.as({ sessionId: ticket.sessionId, samples: [], debug: [] })
    )
  )

const trio = ClusterRollout.plannedGroup(3)

const harness = <A, E>(
  slots: number,
  body: (
    starts: Ref.Ref<number>
  ) => Effect.Effect<A, E, Host.Host | SessionRunner.SessionRunner | Sharding.Sharding | RolloutConfig.RolloutConfig>
) =>
  Effect.gen(function*() {
    const starts = yield* Ref.make(0)
    const cluster = HostEntity.layer.pipe(
      Layer.provideMerge(ClusterRollout.hostLayer(agents(starts), { slots })),
      Layer.provideMerge(TestRunner.layer)
    )
    const controller = ClusterRollout.controllerLayer({ callTimeout: Duration.seconds(5), shards: 300 })
    return yield* body(starts).pipe(
      Effect.provide(controller.pipe(Layer.provideMerge(cluster), Layer.provideMerge(ClusterRollout.settings)))
    )
  })

/** Three Session ids of a Group of key `key` held by this test's runner. */
const idsOf = (key: string) =>
  Effect.map(
    Effect.service(Host.Host),
    (host) => [0, 1, 2].map(() => Routing.sessionId(key, host.incarnation, randomBytes(16).toString("hex")))
  )

/** A Group's first poll as a controller sends it: the Group, its Sessions not heard from yet, placing it. */
const placingOf = (sessionIds: ReadonlyArray<string>, group: SessionRunner.PlannedGroup) => ({
  group,
  sessions: sessionIds.map((sessionId, position) => ({ sessionId, position, arrived: false, gate: null })),
  grant: null,
  place: true
})

/**
 * A placing `PollGroup` of `group` naming `sessionIds`, as the controller sends a Group's first poll; its answer or
 * failure.
 */
const placingPoll = (sessionIds: ReadonlyArray<string>, group = trio) =>
  Effect.gen(function*() {
    const host = yield* Host.Host
    const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
    return yield* client.PollGroup({
      runner: host.incarnation,
      controller: "c",
      ...placingOf(sessionIds, group),
      config: Fingerprint.of(yield* RolloutConfig.RolloutConfig)
    }).pipe(
      Effect.map((events) => events.map((e) => e._tag === "Failed" ? e.type : e._tag)),
      Effect.timeout("10 seconds")
    )
  })

/** How a refused placing poll failed: its decision, or what else it did. */
const refusal = (sessionIds: ReadonlyArray<string>, group = trio) =>
  placingPoll(sessionIds, group).pipe(
    Effect.map((answer) => `answered ${answer.join(",")}`),
    Effect.catchTag("PlacementRefusedError", (error) => Effect.succeed(error.decision))
  )

const keyA = "aaaaaaaaaaaaaaaa"
const keyB = "bbbbbbbbbbbbbbbb"

describe("a Group placed by its first poll", () => {
  it.live("takes the Group's slots before its Sessions start; a repeat starts, reserves and refuses nothing", () =>
    harness(4, (starts) =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const ids = yield* idsOf(keyA)
        // The agents ask at once: the first answer carries the Group's first requests.
        assert.deepStrictEqual(yield* placingPoll(ids), ["FirstRequest", "FirstRequest", "FirstRequest"])
        assert.strictEqual(yield* Ref.get(starts), 3)
        assert.strictEqual(yield* host.used, 3)
        // Delivered twice (a re-send, or the controller asking again after a lost answer), even once the runner
        // drains: the same Sessions, nothing refused or reserved.
        host.startDraining()
        assert.deepStrictEqual(yield* placingPoll(ids), ["FirstRequest", "FirstRequest", "FirstRequest"])
        assert.strictEqual(yield* Ref.get(starts), 3)
        assert.strictEqual(yield* host.used, 3)
      })))

  it.live("a poll that does not place its Group (no Group, no settings) starts no Session", () =>
    harness(4, (starts) =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
        const ids = yield* idsOf(keyA)
        const follow = client.PollGroup({
          runner: host.incarnation,
          controller: "c",
          sessions: ids.map((sessionId, position) => ({ sessionId, position, arrived: false, gate: null })),
          grant: null
        }).pipe(Effect.map((events) => events.map((e) => e._tag === "Failed" ? e.type : e._tag)))
        assert.deepStrictEqual(yield* follow, ["SessionUnknown", "SessionUnknown", "SessionUnknown"])
        assert.strictEqual(yield* Ref.get(starts), 0)
        // Placed, the same poll without the Group follows the Sessions running.
        yield* placingPoll(ids)
        assert.deepStrictEqual(yield* follow, ["FirstRequest", "FirstRequest", "FirstRequest"])
        assert.strictEqual(yield* Ref.get(starts), 3)
      })))

  it.live("a runner without room refuses the whole Group, and refuses its ids again once room is free", () =>
    harness(4, (starts) =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const a = yield* idsOf(keyA)
        yield* placingPoll(a)
        // 1 slot free of 4: the Group of 3 is refused, none of its Sessions started.
        const b = yield* idsOf(keyB)
        assert.strictEqual(yield* refusal(b), "full")
        assert.strictEqual(yield* Ref.get(starts), 3)
        assert.strictEqual(yield* host.used, 3)
        // Group A ends (stopped): room for B now, but B's ids were refused (its controller placed it elsewhere).
        const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
        yield* client.Stop({ runner: host.incarnation, sessionIds: a })
        assert.strictEqual(yield* host.used, 0)
        assert.strictEqual(yield* refusal(b), "full")
        assert.strictEqual(yield* Ref.get(starts), 3)
        assert.strictEqual(yield* host.used, 0)
        // A Group bigger than the runner is refused as such.
        const five = [...(yield* idsOf(keyA)), ...(yield* idsOf(keyA)).slice(0, 2)]
        assert.strictEqual(yield* refusal(five, { ...trio, size: 5 }), "too-small")
      })))

  it.live("drain: a Group placed after the signal is refused, one reserved before it starts", () =>
    harness(8, (starts) =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
        // Group A reserved (the controller's `Reserve`, where placement by room had no room) before the SIGTERM.
        const reserved = yield* client.Reserve({ slots: 3, group: keyA })
        assert.strictEqual(reserved.decision, "granted")
        host.startDraining()
        // Group B, placed by room after the signal: refused, no agent started.
        assert.strictEqual(yield* refusal(yield* idsOf(keyB)), "draining")
        assert.strictEqual(yield* Ref.get(starts), 0)
        // Group A's placing poll comes after the signal too: it starts on its reservation.
        assert.deepStrictEqual(yield* placingPoll(yield* idsOf(keyA)), ["FirstRequest", "FirstRequest", "FirstRequest"])
        assert.strictEqual(yield* Ref.get(starts), 3)
      })))

  it.live("one PollRunner: a Group refused at its placement fails alone, the other is placed and answers", () =>
    harness(4, (starts) =>
      Effect.gen(function*() {
        const [a, b] = [yield* idsOf(keyA), yield* idsOf(keyB)]
        const host = yield* Host.Host
        const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
        const message = {
          runner: host.incarnation,
          controller: "c",
          polls: [placingOf(a, trio), placingOf(b, { ...trio, groupId: "train:prepare_group_1" })],
          config: Fingerprint.toText(Fingerprint.of(yield* RolloutConfig.RolloutConfig)),
          room: true
        }
        // A takes 3 of the 4 slots; B (3 more) is refused, in its own place of the answer.
        const answer = yield* client.PollRunner(message).pipe(Effect.timeout("10 seconds"))
        assert.deepStrictEqual(answer.answers[0], {
          events: a.map((sessionId) => ({ _tag: "FirstRequest" as const, sessionId }))
        })
        const refused = answer.answers[1]
        assert.deepStrictEqual(refused?.events, [])
        assert.strictEqual(refused?.failure?._tag, "PlacementRefusedError")
        if (refused?.failure?._tag === "PlacementRefusedError") {
          assert.deepStrictEqual([refused.failure.decision, refused.failure.used, refused.failure.free], ["full", 3, 1])
        }
        assert.deepStrictEqual(answer.room, { used: 3, free: 1, draining: false })
        assert.strictEqual(yield* Ref.get(starts), 3)
        assert.strictEqual(yield* host.used, 3)
        // Settings the runner cannot read fail the Group the message would start, and start nothing; its poll that
        // follows A is answered as before (nothing new: after the runner's wait).
        const following = a.map((sessionId, position) => ({ sessionId, position, arrived: true, gate: null }))
        const unread = yield* client.PollRunner({
          ...message,
          polls: [
            placingOf(b, { ...trio, groupId: "train:prepare_group_2" }),
            { sessions: following, grant: null, place: false }
          ],
          config: "{"
        }).pipe(Effect.timeout("10 seconds"))
        const failure = unread.answers[0]?.failure
        assert.strictEqual(failure?._tag === "SessionFailedError" ? failure.type : failure?._tag, "SettingsUnreadable")
        assert.include(failure?.message ?? "", "the same relax-agentic version")
        assert.deepStrictEqual(unread.answers[1], { events: [] })
        assert.strictEqual(yield* Ref.get(starts), 3)
      })))

  it.live("the controller: placed by room without Reserve; a refusal answers refused and ends no Session", () =>
    harness(4, (starts) =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const runner = yield* SessionRunner.SessionRunner
        // The controller knows the runner's room once its directory asked (at once on start, then every 2 s).
        yield* Effect.sleep("1 second")
        const ids = yield* runner.newGroupIds!(trio)
        assert.isTrue(ids.every((id) => Routing.holderOf(id) === host.incarnation))
        // No round trip placed it: nothing is reserved on the runner until the Group's first poll.
        assert.strictEqual(yield* host.used, 0)
        const run = (sessionIds: ReadonlyArray<string>) =>
          Effect.gen(function*() {
            const lease = yield* Deferred.make<boolean>()
            const barrier = yield* FirstRequestBarrier.make({
              groupId: trio.groupId,
              sessionIds,
              lease,
              rolloutId: () => 7,
              onReady: Effect.asVoid(Deferred.succeed(lease, true))
            })
            const ended: Array<Exit.Exit<SessionRunner.SessionResult, SessionRunner.GroupError>> = []
            const answer = yield* runner.group!(
              trio,
              { tickets: sessionIds.map((_, i) => barrier.ticket(i)), arrive: barrier.arrive },
              (_, exit) => Effect.sync(() => void ended.push(exit))
            ).pipe(Effect.timeout("20 seconds"))
            return { answer, ended }
          })
        const placed = yield* run(ids)
        assert.notStrictEqual(placed.answer, PoolContract.refused)
        assert.deepStrictEqual(placed.ended.map((exit) => Exit.isSuccess(exit)), [true, true, true])
        assert.strictEqual(yield* Ref.get(starts), 3)
        // A Group placed on a runner that drains meanwhile (the controller's view of its room is up to 2 s old).
        host.startDraining()
        const late = yield* run(yield* idsOf(keyB))
        assert.strictEqual(late.answer, PoolContract.refused)
        assert.deepStrictEqual(late.ended, [])
        assert.strictEqual(yield* Ref.get(starts), 3)
        // Nothing of the refused Group is left on the runner (no Stop needed, no slot held).
        assert.strictEqual(yield* host.used, 0)
        const placing = yield* Effect.forkChild(runner.newGroupIds!({ ...trio, groupId: "train:prepare_group_1" }))
        // The refusal said the runner drains: no Group is placed on it again (the controller waits for room).
        yield* Effect.sleep("1 second")
        assert.isUndefined(placing.pollUnsafe())
        yield* Fiber.interrupt(placing)
      })))
})
