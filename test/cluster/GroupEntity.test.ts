/**
 * The Group entity's handlers on the cluster's in-memory test runner (messages serialized as between processes): the
 * controller's ticket relayed to the runner (first request → barrier, lease → `Grant`), a result coming back, a
 * Group's Sessions on one event stream (a late joiner on one of its own, a stopped Session failing alone), one
 * `Grant` / `Stop` naming several Sessions of a Group serving each, a re-delivered `RunGroup` following the Sessions
 * already running, `Stop` reaping them (and a later re-delivery reporting why), a Group whose entity's shard moved away
 * kept (its stream ends, another entity follows it), and a message for another runner incarnation refused with
 * `NotHolderError`. The hosted Sessions here are scripted; real agents, forests and
 * engines run in test/cluster/cluster.e2e.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer, Ref, Stream } from "effect"
import { type Sharding, TestRunner } from "effect/cluster"
import * as Directory from "../../layers/cluster/Directory.ts"
import * as Fleet from "../../layers/cluster/Fleet.ts"
import * as GroupEntity from "../../layers/cluster/GroupEntity.ts"
import * as Host from "../../layers/cluster/Host.ts"
import * as HostEntity from "../../layers/cluster/HostEntity.ts"
import * as Remote from "../../layers/cluster/Remote.ts"
import * as Credit from "../../layers/credit/Credit.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as GenerationGate from "../../layers/schedule/GenerationGate.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import * as Routing from "../../src/cluster/Routing.ts"
import { creditOptions } from "../../src/index.ts"
import * as Retention from "../../src/schedule/Retention.ts"
import * as ClusterRollout from "../support/clusterRollout.ts"

interface Script {
  readonly starts: Ref.Ref<number>
  readonly ended: Ref.Ref<number>
  /** Done when the first hosted Session has started. */
  readonly started: Deferred.Deferred<void>
}

/** A hosted Session that waits for its lease, then exports nothing but its id and the step it was leased under. */
const scriptedRunner = (script: Script) =>
  ClusterRollout.hostedSessions((group, ticket) =>
    Effect.gen(function*() {
      yield* Ref.update(script.starts, (n) => n + 1)
      yield* Deferred.succeed(script.started, undefined)
      yield* ticket.awaitLease.pipe(Effect.orDie)
      return { sessionId: `${ticket.sessionId}@${ticket.rolloutId()}`, samples: [], debug: [] }
    }).pipe(Effect.onExit(() => Ref.update(script.ended, (n) => n + 1)))
  )

const group = ClusterRollout.plannedGroup(1)

const harness = <A, E>(
  body: (
    script: Script
  ) => Effect.Effect<
    A,
    E,
    | Host.Host
    | SessionRunner.SessionRunner
    | Sharding.Sharding
    | RolloutConfig.RolloutConfig
    | Fleet.Fleet
    | Engine.Engine
  >,
  hostOptions: Host.HostOptions = {}
) =>
  Effect.gen(function*() {
    const script: Script = {
      starts: yield* Ref.make(0),
      ended: yield* Ref.make(0),
      started: yield* Deferred.make<void>()
    }
    const config = ClusterRollout.settings
    const engine = EmbeddedEngine.EmbeddedEngine.layer(EmbeddedEngine.instant).pipe(
      Layer.provide(Tokenizer.Tokenizer.layer)
    )
    const host = Host.Host.layer("127.0.0.1:1", () => Effect.die("no gateway in this test"), hostOptions).pipe(
      Layer.provide(Layer.mergeAll(
        config,
        engine,
        scriptedRunner(script),
        GenerationGate.GenerationGate.layer(Retention.synchronous).pipe(Layer.provide(engine))
      ))
    )
    const cluster = HostEntity.layer.pipe(Layer.provideMerge(host), Layer.provideMerge(TestRunner.layer))
    const fleet = Fleet.layer({ callTimeout: Duration.seconds(5), shards: 300 })
    const remote = Remote.layer({ callTimeout: Duration.seconds(5), shards: 300 }).pipe(
      Layer.provideMerge(fleet),
      Layer.provide(Layer.mergeAll(
        config,
        Layer.unwrap(Effect.map(Effect.service(RolloutConfig.RolloutConfig), (settings) =>
          Credit.Credit.layer(creditOptions(settings))))
          .pipe(
            Layer.provide(Layer.merge(config, Telemetry.Telemetry.layer))
          )
      ))
    )
    return yield* body(script).pipe(
      Effect.provide(remote.pipe(Layer.provideMerge(cluster), Layer.provideMerge(config), Layer.provideMerge(engine)))
    )
  })

/**
 * The runner's host, the entity client of the test's Group, and a `RunGroup` payload naming `sessionId` addressed to
 * this runner's incarnation with its own settings' fingerprint.
 */
const hostedSession = (sessionId: string) =>
  Effect.gen(function*() {
    const host = yield* Host.Host
    const settings = yield* RolloutConfig.RolloutConfig
    const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
    const payload = {
      runner: host.incarnation,
      controller: "c",
      group,
      sessions: [{ sessionId, position: 0 }],
      config: Fingerprint.of(settings)
    }
    return { host, client, payload }
  })

/** A controller-side ticket of the test's Group, leased under step 7 once the test grants it. */
const controllerTicket = (sessionId: string, position = 0) =>
  ClusterRollout.controllerTicket(sessionId, group.groupId, 7, position)

describe("Group entity", () => {
  it.live("relays the barrier and the lease, and returns the Session's result", () =>
    harness((script) =>
      Effect.gen(function*() {
        const runner = yield* SessionRunner.SessionRunner
        const sessionId = yield* runner.newSessionId!(group)
        const { ticket, arrived, lease } = yield* controllerTicket(sessionId)
        const fiber = yield* Effect.forkChild(runner.session(group, ticket))
        // The hosted Session's first awaitLease reaches the controller's barrier.
        yield* Deferred.await(arrived)
        yield* Deferred.succeed(lease, undefined)
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.sessionId, `${sessionId}@7`)
        assert.strictEqual(yield* Ref.get(script.starts), 1)
        // The controller's Stop (its scope's end) removed the Session from the runner.
        assert.strictEqual(yield* (yield* Host.Host).hosted, 0)
      })
    ))

  it.live("a Group's Sessions share one event stream; a late joiner gets its own; a stopped one fails alone", () =>
    harness((script) =>
      Effect.gen(function*() {
        const runner = yield* SessionRunner.SessionRunner
        const host = yield* Host.Host
        const trio = { ...group, size: 3 }
        const ids = yield* Effect.forEach([0, 1, 2], () => runner.newSessionId!(trio))
        const tickets = yield* Effect.forEach(ids, (id, i) => controllerTicket(id, i))
        // Two of the Group's three Sessions start together: one stream (the window closes without the third).
        const early = yield* Effect.forEach(
          [0, 1],
          (i) => Effect.forkChild(runner.session(trio, tickets[i]!.ticket).pipe(Effect.result))
        )
        yield* Effect.forEach([0, 1], (i) => Deferred.await(tickets[i]!.arrived))
        assert.strictEqual(yield* host.streams, 1)
        // The third starts later: a stream of its own, the same Group on the same runner.
        const late = yield* Effect.forkChild(runner.session(trio, tickets[2]!.ticket).pipe(Effect.result))
        yield* Deferred.await(tickets[2]!.arrived)
        assert.strictEqual(yield* host.streams, 2)
        assert.strictEqual(yield* Ref.get(script.starts), 3)
        // The runner stops one Session of the shared stream: it fails, the other goes on.
        yield* (yield* GroupEntity.Group.client)(ids[1]!.slice(0, 16)).Stop({
          runner: host.incarnation,
          sessionIds: [ids[1]!]
        })
        const stopped = yield* Fiber.join(early[1]!)
        assert.strictEqual(stopped._tag, "Failure")
        if (stopped._tag === "Failure") {
          assert.strictEqual(
            stopped.failure._tag === "SessionFailedError" ? stopped.failure.type : "",
            "SessionStopped"
          )
        }
        yield* Effect.forEach([0, 2], (i) => Deferred.succeed(tickets[i]!.lease, undefined))
        const results = yield* Effect.forEach([early[0]!, late], Fiber.join)
        assert.deepStrictEqual(
          results.map((r) => r._tag === "Success" ? r.success.sessionId : r._tag),
          [`${ids[0]}@7`, `${ids[2]}@7`]
        )
        assert.strictEqual(yield* Ref.get(script.starts), 3)
        // Every stream ended with its Sessions.
        yield* Effect.gen(function*() {
          while ((yield* host.streams) > 0) yield* Effect.sleep("20 millis")
        }).pipe(Effect.timeout("10 seconds"))
      })
    ))

  it.live("a re-delivered RunGroup follows the Sessions already running; Stop reaps them, a late one says why", () =>
    harness((script) =>
      Effect.gen(function*() {
        const { client, host, payload } = yield* hostedSession("s-1")
        const first = yield* client.RunGroup(payload).pipe(Stream.take(1), Stream.runCollect)
        // The second delivery reports the Session's state again and does not start a second agent.
        const again = yield* client.RunGroup(payload).pipe(Stream.take(1), Stream.runCollect)
        assert.deepStrictEqual([...first, ...again], [
          { _tag: "FirstRequest", sessionId: "s-1" },
          { _tag: "FirstRequest", sessionId: "s-1" }
        ])
        assert.strictEqual(yield* Ref.get(script.starts), 1)
        assert.strictEqual(yield* Ref.get(script.ended), 0)
        yield* client.Stop({ runner: host.incarnation, sessionIds: ["s-1"] })
        assert.strictEqual(yield* host.hosted, 0)
        assert.strictEqual(yield* Ref.get(script.ended), 1)
        // A RunGroup delivered again after the Stop (a re-send) reports why: never re-run against an empty forest.
        const late = yield* client.RunGroup(payload).pipe(Stream.runCollect, Effect.timeout("10 seconds"))
        assert.deepStrictEqual(late.map((e) => e._tag === "Failed" ? `${e.sessionId}: ${e.type}` : e._tag), [
          "s-1: SessionStopped"
        ])
        assert.strictEqual(yield* Ref.get(script.starts), 1)
      })
    ))

  it.live("one Grant leases every Session it names, one Stop reaps each", () =>
    harness((script) =>
      Effect.gen(function*() {
        const { client, host, payload } = yield* hostedSession("s-7")
        const both = { ...payload, sessions: [{ sessionId: "s-7", position: 0 }, { sessionId: "s-8", position: 1 }] }
        const asked = yield* client.RunGroup(both).pipe(Stream.take(2), Stream.runCollect)
        assert.sameMembers(asked.map((e) => e._tag === "FirstRequest" ? e.sessionId : e._tag), ["s-7", "s-8"])
        assert.strictEqual(yield* host.hosted, 2)
        const ids = ["s-7", "s-8"]
        yield* client.Touch({ runner: host.incarnation, sessionIds: ids })
        yield* client.Grant({
          runner: host.incarnation,
          controller: "c",
          sessionIds: ids,
          rolloutId: 3,
          weights: { seq: 0, version: "0", paused: null }
        })
        // Both Sessions were leased under the Grant's step: following them again reads their results, then ends.
        const done = yield* client.RunGroup(both).pipe(
          Stream.runCollect,
          Effect.map((events) => events.flatMap((e) => e._tag === "Done" ? [e.result.sessionId] : [])),
          Effect.timeout("10 seconds")
        )
        assert.sameMembers(done, ["s-7@3", "s-8@3"])
        yield* client.Stop({ runner: host.incarnation, sessionIds: ids })
        assert.strictEqual(yield* host.hosted, 0)
        assert.strictEqual(yield* Ref.get(script.starts), 2)
        assert.strictEqual(yield* Ref.get(script.ended), 2)
      })
    ))

  it.live("a Group whose entity's shard moved away keeps running: its stream ends, another entity follows it", () =>
    harness((script) =>
      Effect.gen(function*() {
        const { client, host, payload } = yield* hostedSession("s-5")
        let owned = true
        const placement = { key: "moved-group", owned: () => owned }
        const events = yield* Effect.forkChild(host.runGroup(payload, placement).pipe(Stream.runCollect))
        yield* Deferred.await(script.started).pipe(Effect.timeout("10 seconds"))
        assert.strictEqual(yield* host.hosted, 1)
        // The entity's shard is no longer this runner's (a runner joined): the stream ends, the Session does not.
        owned = false
        const error = yield* Fiber.join(events).pipe(Effect.flip, Effect.timeout("10 seconds"))
        assert.strictEqual(error._tag, "NotHolderError")
        assert.strictEqual(yield* host.hosted, 1)
        assert.strictEqual(yield* Ref.get(script.ended), 0)
        // The controller follows it through another entity of this runner: the same Session, not a second agent.
        const again = yield* client.RunGroup(payload).pipe(Stream.take(1), Stream.runCollect)
        assert.deepStrictEqual(again.map((e) => e._tag), ["FirstRequest"])
        assert.strictEqual(yield* Ref.get(script.starts), 1)
      })
    ))

  it.live("a message for another runner incarnation is refused with NotHolderError, naming both", () =>
    harness(() =>
      Effect.gen(function*() {
        const host = yield* Host.Host
        const client = (yield* GroupEntity.Group.client)("0123456789abcdef")
        const error = yield* client.Grant({
          runner: "gone",
          controller: "c",
          sessionIds: ["s-2"],
          rolloutId: 0,
          weights: { seq: 0, version: "0", paused: null }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "NotHolderError")
        if (error._tag === "NotHolderError") {
          assert.deepStrictEqual([error.holder, error.runner], ["gone", host.incarnation])
        }
        const stop = yield* client.Stop({ runner: "gone", sessionIds: ["s-2"] }).pipe(Effect.flip)
        assert.strictEqual(stop._tag, "NotHolderError")
      })
    ))

  it.live("the directory finds a runner's entities by asking every shard; an incarnation no runner is, nowhere", () =>
    harness(() =>
      Effect.scoped(Effect.gen(function*() {
        const host = yield* Host.Host
        const directory = yield* Directory.make({ shards: 300, callTimeout: Duration.seconds(5) })
        const key = yield* directory.route(host.incarnation)
        assert.isDefined(key)
        // The entity it names reaches the runner, and a key that missed is not named again.
        const where = yield* (yield* GroupEntity.Group.client)(key!).Where()
        assert.strictEqual(where.runner, host.incarnation)
        assert.notStrictEqual(yield* directory.route(host.incarnation, key), key)
        assert.isUndefined(yield* directory.route("ffffffffffffffff"))
      }))
    ))

  it.live("a runner whose sample-changing settings differ refuses the Session, naming the flag", () =>
    harness((script) =>
      Effect.gen(function*() {
        const { client, payload } = yield* hostedSession("s-3")
        const error = yield* client.RunGroup({
          ...payload,
          config: { ...payload.config, rolloutTemperature: "0.25" }
        }).pipe(
          Stream.runCollect,
          Effect.flip
        )
        assert.strictEqual(error._tag, "SessionFailedError")
        assert.strictEqual(error._tag === "SessionFailedError" ? error.type : "", "ConfigMismatch")
        assert.include(error.message, "--rollout-temperature")
        assert.strictEqual(yield* Ref.get(script.starts), 0)
      })
    ))

  it.live("a Session no controller touches any more is reaped (its controller died)", () =>
    harness(
      (script) =>
        Effect.gen(function*() {
          const { client, host, payload } = yield* hostedSession("s-4")
          yield* client.RunGroup(payload).pipe(Stream.take(1), Stream.runDrain)
          assert.strictEqual(yield* host.hosted, 1)
          // Nobody touches it: the reaper stops it within a few of its periods.
          yield* Effect.gen(function*() {
            while ((yield* host.hosted) > 0) yield* Effect.sleep("100 millis")
          }).pipe(Effect.timeout("20 seconds"))
          assert.strictEqual(yield* Ref.get(script.ended), 1)
        }),
      { orphanTimeout: Duration.seconds(1) }
    ))

  it.live("--runner-slots: a Group is placed only where all its Sessions fit; the controller waits for a slot", () =>
    harness(
      () =>
        Effect.gen(function*() {
          const runner = yield* SessionRunner.SessionRunner
          const host = yield* Host.Host
          const groupB = { ...group, groupId: "train:prepare_group_1" }
          // Group A takes the runner's only slot (reserved at its first Session id, held while it runs).
          const idA = yield* runner.newSessionId!(group)
          assert.strictEqual(yield* host.used, 1)
          const a = yield* controllerTicket(idA)
          const runA = yield* Effect.forkChild(runner.session(group, a.ticket))
          yield* Deferred.await(a.arrived)
          assert.strictEqual(yield* host.used, 1)
          // Group B finds no runner with a free slot: its placement waits.
          const placingB = yield* Effect.forkChild(runner.newSessionId!(groupB))
          yield* Effect.sleep("1500 millis")
          assert.isUndefined(placingB.pollUnsafe())
          // A ends and is stopped: B is placed.
          yield* Deferred.succeed(a.lease, undefined)
          yield* Fiber.join(runA)
          const idB = yield* Fiber.join(placingB)
          assert.match(idB, /^[0-9a-f]{16}\.[0-9a-f]{16}\.[0-9a-f]{32}$/)
          assert.strictEqual(yield* host.used, 1)
        }),
      { slots: 1 }
    ))

  it.live("a draining runner reserves nothing, refuses new Groups' Sessions, and drains once its Sessions end", () =>
    harness(
      () =>
        Effect.gen(function*() {
          const runner = yield* SessionRunner.SessionRunner
          const { client, host, payload } = yield* hostedSession("s-5")
          const idA = yield* runner.newSessionId!(group)
          const a = yield* controllerTicket(idA)
          const runA = yield* Effect.forkChild(runner.session(group, a.ticket))
          yield* Deferred.await(a.arrived)
          const drained = yield* Effect.forkChild(host.drain)
          yield* Effect.sleep("600 millis")
          const reserved = yield* client.Reserve({ slots: 1, group: "0123456789abcdef" })
          assert.strictEqual(reserved.decision, "draining")
          const refused = yield* client.RunGroup(payload).pipe(Stream.runCollect)
          assert.deepStrictEqual(refused.map((e) => e._tag === "Failed" ? e.type : e._tag), ["RunnerDraining"])
          // The resident Group finishes on the draining runner; then the drain completes.
          assert.isUndefined(drained.pollUnsafe())
          yield* Deferred.succeed(a.lease, undefined)
          const result = yield* Fiber.join(runA)
          assert.strictEqual(result.sessionId, `${idA}@7`)
          yield* Fiber.join(drained)
          assert.strictEqual(yield* host.used, 0)
        }),
      { slots: 4 }
    ))

  it.live("drain race: a Group reserved before SIGTERM starts after it; one placed after starts no agent", () =>
    harness(
      (script) =>
        Effect.gen(function*() {
          const { host, payload } = yield* hostedSession("unused")
          const makeClient = yield* GroupEntity.Group.client
          const before = "bbbbbbbbbbbbbbbb"
          const after = "cccccccccccccccc"
          const session = (key: string) => Routing.sessionId(key, host.incarnation, "0".repeat(32))
          // Reserved a moment before the signal; its Session arrives after it.
          assert.strictEqual((yield* makeClient(before).Reserve({ slots: 1, group: before })).decision, "granted")
          // SIGTERM's handler, then the next Reserve in the same instant: the drain is already in force.
          host.startDraining()
          const drained = yield* Effect.forkChild(host.drain)
          assert.strictEqual((yield* makeClient(after).Reserve({ slots: 1, group: after })).decision, "draining")
          const late = yield* makeClient(after).RunGroup({
            ...payload,
            sessions: [{ sessionId: session(after), position: 0 }]
          })
            .pipe(Stream.runCollect)
          assert.deepStrictEqual(late.map((e) => e._tag === "Failed" ? e.type : e._tag), ["RunnerDraining"])
          assert.strictEqual(yield* Ref.get(script.starts), 0, "an agent of a Group placed after the signal started")
          const started = yield* makeClient(before).RunGroup({
            ...payload,
            sessions: [{ sessionId: session(before), position: 0 }]
          }).pipe(Stream.take(1), Stream.runCollect)
          assert.deepStrictEqual(started.map((e) => e._tag), ["FirstRequest"])
          yield* Deferred.await(script.started).pipe(Effect.timeout("10 seconds"))
          // The reserved Group holds the drain until its Session ends.
          assert.isUndefined(drained.pollUnsafe())
          yield* makeClient(before).Stop({ runner: host.incarnation, sessionIds: [session(before)] })
          yield* Fiber.join(drained)
          assert.strictEqual(yield* Ref.get(script.starts), 1)
        }),
      { slots: 4 }
    ))

  it.live("a fleet command runs once on a runner however often it arrives; the runner's engine follows the weights", () =>
    harness(() =>
      Effect.gen(function*() {
        const fleet = yield* Fleet.Fleet
        const engine = yield* Engine.Engine
        // The in-memory cluster has one runner owning all 300 shards: 300 deliveries, one reply.
        yield* fleet.setWeights("5", null)
        assert.strictEqual(yield* engine.weightVersion, "5")
        const replies = yield* fleet.broadcast({ _tag: "Resume", rolloutId: 3 })
        assert.strictEqual(replies.length, 1)
        // A trainer's pause, then a resume on a new version: the runner's engine follows both.
        yield* fleet.setWeights("5", "abort")
        yield* fleet.setWeights("6", null)
        assert.strictEqual(yield* engine.weightVersion, "6")
        // A re-delivery of the last command (the same seq) answers its reply and changes nothing; an older one too.
        const client = (yield* GroupEntity.Group.client)("fleet-0")
        const weights = (version: string, seq: number) => ({
          controller: fleet.controller,
          seq,
          command: { _tag: "Weights" as const, state: { seq: 99, version, paused: null } }
        })
        yield* client.Fleet(weights("9", 4))
        yield* client.Fleet(weights("8", 1))
        assert.strictEqual(yield* engine.weightVersion, "6")
      })
    ))
})
