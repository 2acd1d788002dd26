/**
 * The Group entity's handlers on a runner: each message of `GroupEntity` answered by this runner's `Host` (which hosts
 * the Sessions in one runner-wide table, whatever entity a message came through), through the entity it reached
 * (whose shard moving away ends the polls and streams that came through it).
 */
import { Effect } from "effect"
import { Entity, Sharding } from "effect/cluster"
import * as GroupEntity from "./GroupEntity.ts"
import * as Host from "./Host.ts"

/**
 * Register the Group entity on this runner. Handlers process any number of messages of one Group at once (its
 * Sessions, their grants and forwarded requests), and a handler's defect reaches the caller.
 */
export const layer = GroupEntity.Group.toLayer(
  Effect.gen(function*() {
    const host = yield* Host.Host
    const sharding = yield* Sharding.Sharding
    const address = yield* Entity.CurrentAddress
    const key = address.entityId
    const placement: Host.Placement = { key, owned: () => sharding.hasShardId(address.shardId) }
    return GroupEntity.Group.of({
      Reserve: ({ payload }) => host.reserve(payload.group, payload),
      Where: () => host.where,
      RunGroup: ({ payload }) => host.runGroup(payload, placement),
      // The runner's room rides the answer when the poll asks (the controller's placement by room).
      PollGroup: ({ payload }) =>
        payload.room === true
          ? Effect.zipWith(host.pollGroup(payload, placement), host.where, (events, room) => [
            ...events,
            { _tag: "Room" as const, used: room.used, free: room.free, draining: room.draining }
          ])
          : host.pollGroup(payload, placement),
      PollRunner: ({ payload }) =>
        payload.room === true
          ? Effect.zipWith(host.pollRunner(payload, placement), host.where, (answers, room) => ({
            answers,
            room: { used: room.used, free: room.free, draining: room.draining }
          }))
          : Effect.map(host.pollRunner(payload, placement), (answers) => ({ answers })),
      Grant: ({ payload }) => host.grant(payload),
      Stop: ({ payload }) => host.stop(payload),
      Touch: ({ payload }) => host.touch(payload),
      Received: ({ payload }) => host.received(payload),
      Forward: ({ payload }) => host.forward(payload),
      Fleet: ({ payload }) => host.fleet(payload)
    })
  }),
  { concurrency: "unbounded", disableFatalDefects: true, maxIdleTime: "1 hour" }
)
