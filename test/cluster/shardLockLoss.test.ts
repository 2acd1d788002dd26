/**
 * A runner whose shard-lock storage stops answering in time drops every shard at once, and the cluster interrupts its
 * entities' calls (the controller's `RunGroup` stream among them) while the Session goes on in the runner's host
 * (layers/cluster/HolderRoute.ts). Here one in-memory cluster member is controller and runner (messages serialized as
 * between processes), its lock storage fails its refreshes for a while and then answers again: the controller follows
 * the Session once the runner holds shards again, and the Session ends with its result, not with the interrupt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer, Ref } from "effect"
import {
  ClusterError,
  EntityId,
  MessageStorage,
  RunnerHealth,
  Runners,
  RunnerStorage,
  Sharding,
  ShardingConfig
} from "effect/cluster"
import * as HostEntity from "../../layers/cluster/HostEntity.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as ClusterRollout from "../support/clusterRollout.ts"

/** The member's lock storage: in memory, its refreshes failing while `failing` is set. */
const flakyLocks = (failing: Ref.Ref<boolean>) =>
  Layer.effect(
    RunnerStorage.RunnerStorage,
    Effect.map(RunnerStorage.makeMemory, (storage) =>
      RunnerStorage.RunnerStorage.of({
        ...storage,
        refresh: (address, shardIds) =>
          Effect.flatMap(Ref.get(failing), (fails) =>
            fails
              ? Effect.fail(new ClusterError.PersistenceError({ cause: new Error("lock storage did not answer") }))
              : storage.refresh(address, shardIds))
      }))
  )

describe("a runner whose lock storage stalls", () => {
  it.live(
    "keeps its Session: the controller follows it again once the runner holds shards again",
    () =>
      Effect.gen(function*() {
        const failing = yield* Ref.make(false)
        const hostedStarts = yield* Ref.make(0)
        // The hosted Session: waits for its lease, then ends with its id.
        const agents = ClusterRollout.hostedSessions((_group, ticket) =>
          Ref.update(hostedStarts, (n) => n + 1).pipe(
            Effect.andThen(ticket.awaitLease.pipe(Effect.orDie)),
            Effect.as({ sessionId: ticket.sessionId, samples: [], debug: [] })
          )
        )
        const member = Sharding.layer.pipe(
          Layer.provideMerge(Runners.layerNoop),
          // As the members run: no message storage (every message is volatile).
          Layer.provideMerge(MessageStorage.layerNoop),
          Layer.provide([flakyLocks(failing), RunnerHealth.layerNoop]),
          Layer.provide(ShardingConfig.layer({
            shardLockRefreshInterval: Duration.millis(200),
            shardLockExpiration: Duration.seconds(5),
            entityMessagePollInterval: Duration.millis(200)
          }))
        )
        const cluster = HostEntity.layer.pipe(
          Layer.provideMerge(ClusterRollout.hostLayer(agents)),
          Layer.provideMerge(member)
        )
        const controller = ClusterRollout.controllerLayer({ callTimeout: Duration.seconds(10), shards: 300 })
        const group = ClusterRollout.plannedGroup(1)
        yield* Effect.gen(function*() {
          const runner = yield* SessionRunner.SessionRunner
          const sessionId = yield* runner.newSessionId!(group)
          const { arrived, lease, ticket } = yield* ClusterRollout.controllerTicket(sessionId, group.groupId, 3)
          const session = yield* Effect.forkChild(runner.session(group, ticket))
          // The Session runs on the runner and waits for its lease: its event stream is open.
          yield* Deferred.await(arrived).pipe(Effect.timeout("10 seconds"))
          // The lock storage stops answering: the member drops its shards and the cluster interrupts its entities.
          yield* Ref.set(failing, true)
          const sharding = yield* Sharding.Sharding
          const anyShard = sharding.getShardId(EntityId.make("fleet-0"), "default")
          while (sharding.hasShardId(anyShard)) yield* Effect.sleep("50 millis")
          // The outage lasts a while after the shards are gone (the length of an outage, not a wait for a condition:
          // the interrupt reaches the controller's open stream in it), as a real one would.
          yield* Effect.sleep("500 millis")
          // It answers again, the member takes its shards back, and the lease reaches the Session.
          yield* Ref.set(failing, false)
          yield* Deferred.succeed(lease, undefined)
          const result = yield* Fiber.join(session).pipe(Effect.timeout("20 seconds"))
          assert.strictEqual(result.sessionId, sessionId)
          assert.strictEqual(yield* Ref.get(hostedStarts), 1)
        }).pipe(Effect.provide(controller.pipe(Layer.provideMerge(cluster))))
      }),
    40_000
  )
})
