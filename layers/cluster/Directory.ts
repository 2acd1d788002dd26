/**
 * Where a runner is reached now (docs/scale-out.md "Placement that outlives shard moves"): an entity id whose shard a
 * given runner incarnation owns, so the messages for a Group placed on it reach it whatever shards moved since.
 *
 * **Details**
 * The cluster routes an entity's messages to the owner of the entity's shard, and shards move when runners join or
 * leave; a Group does not (its agents are processes on its runner). A Group's messages name its holder, and go to an
 * entity of a shard the holder owns: the Group key itself at first (the holder owned its shard when it took the
 * Group), and once a message reaches another runner (`NotHolderError`), an entity this directory finds. It knows one
 * entity id per shard ({@link shardKeys}) and the runner that answered for each; when it knows no entity of the
 * holder it asks all of them at once (`Where`, one question in flight for all callers) and answers as soon as one
 * names the holder. No entity naming it once every shard answered or passed the deadline: no live runner is that
 * incarnation (it died or left), and the Group is lost with it.
 *
 * The rooms placement by room reads are refreshed the same way ({@link Directory.refresh}), but only every
 * {@link sweepEvery}-th refresh asks every shard (it finds runners that joined, and forgets those no shard names);
 * the others ask one known entity of each known runner, a third of the messages at 3 shards a runner. A sweep that
 * finds a runner it did not know makes the next `sweepEvery - 1` refreshes sweeps too: a fleet is forming (a
 * controller's start, runners joining), and a joined runner's shards come to it over seconds, so it is offered for
 * placement one refresh after it owns a shard instead of up to a whole cycle later. Every `Where`
 * is a cluster message the controller pays for: asking 300 shards every 2 s cost a 100-runner controller ~70 ms of
 * CPU a second while idle (docs/performance.md, section 6). So rooms are learned from traffic too: a Group's poll asks
 * for its runner's room when none came since the last refresh ({@link Directory.wantsRoom}), its answer brings it
 * ({@link Directory.heardRoom}), and a refresh that is not a sweep asks only the runners heard nothing from since the
 * last one: during a step, none.
 */
import { Deferred, type Duration, Effect, Exit, Option, Schedule, type Scope } from "effect"
import { EntityId, Sharding } from "effect/cluster"
import * as Placement from "../../src/cluster/Placement.ts"
import * as GroupEntity from "./GroupEntity.ts"

export interface Directory {
  /**
   * An entity id whose messages reach runner `holder` now; `undefined` when no live runner is `holder`. `missed`: an
   * entity id that reached another runner (it is forgotten for `holder`).
   */
  readonly route: (holder: string, missed?: string) => Effect.Effect<string | undefined>
  /** A reply from entity `key` came from `runner` (a `Reserve`, or `Where`). */
  readonly learn: (key: string, runner: string) => void
  /** An entity id known to reach `holder`, without asking. */
  readonly known: (holder: string) => string | undefined
  /** The runner that last answered for the shard of entity `key` (its owner, as far as known), without asking. */
  readonly ownerOf: (key: string) => string | undefined
  /**
   * The runners' rooms (placement by room), asked again: of every shard every {@link sweepEvery}-th time (and while no
   * runner is known), else of one known entity of each known runner (a runner that does not answer is not chosen
   * until it answers again).
   */
  readonly refresh: Effect.Effect<void>
  /** The runners' rooms, as they last answered. */
  readonly rooms: () => Iterable<Placement.Room>
  /** The room of a runner as the controller now counts it (a Group it placed there, a `Reserve` or refusal's answer). */
  readonly learnRoom: (room: Placement.Room) => void
  /**
   * A runner's answer carried its room, through entity `room.key` (a Group's poll): the next refresh that is not a
   * sweep does not ask it.
   */
  readonly heardRoom: (room: Placement.Room) => void
  /** No answer brought `runner`'s room since the last refresh: a poll to it asks for it. */
  readonly wantsRoom: (runner: string) => boolean
  /** A runner did not answer through its room's entity (it may be gone): not chosen again until it answers. */
  readonly forgetRoom: (runner: string) => void
}

/** The Group entity ids that land on every shard, one per shard (found once by hashing `fleet-<n>`). */
export const shardKeys = (sharding: Sharding.Sharding["Service"], shards: number): ReadonlyArray<string> => {
  const seen = new Set<number>()
  const ids: Array<string> = []
  for (let n = 0; seen.size < shards && n < shards * 100; n++) {
    const id = EntityId.make(`fleet-${n}`)
    const shard = sharding.getShardId(id, GroupEntity.Group.getShardGroup(id))
    if (seen.has(shard.id)) continue
    seen.add(shard.id)
    ids.push(id)
  }
  return ids
}

/** Entity ids remembered per runner at most (a handful suffices: any one of them reaches it). */
const perRunner = 4

/** Every this many refreshes asks every shard; the others ask one entity of each known runner. */
export const sweepEvery = 5

/** The directory of a cluster member with `shards` shards; each `Where` has `callTimeout`. */
export const make = (options: {
  readonly shards: number
  readonly callTimeout: Duration.Duration
}): Effect.Effect<Directory, never, Sharding.Sharding | Scope.Scope> =>
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const makeClient = yield* GroupEntity.Group.client
    const keys = shardKeys(sharding, options.shards)
    const byRunner = new Map<string, Array<string>>()
    const rooms = new Map<string, Placement.Room>()
    const shardOf = (key: string) => {
      const id = EntityId.make(key)
      return sharding.getShardId(id, GroupEntity.Group.getShardGroup(id)).id
    }
    /** The runner that last answered through an entity of each shard. */
    const owners = new Map<number, string>()
    const waiters = new Map<string, Array<Deferred.Deferred<string>>>()
    let refreshes = 0
    // Runners whose room an answer brought since the last refresh.
    let heard = new Set<string>()
    // Refreshes left that sweep because a recent sweep found a runner not known before.
    let formingSweeps = 0

    const learn = (key: string, runner: string) => {
      owners.set(shardOf(key), runner)
      for (const [other, known] of byRunner) {
        if (other !== runner && known.includes(key)) byRunner.set(other, known.filter((k) => k !== key))
      }
      const known = byRunner.get(runner) ?? []
      if (!known.includes(key)) byRunner.set(runner, [key, ...known].slice(0, perRunner))
      const waiting = waiters.get(runner)
      if (waiting !== undefined) {
        waiters.delete(runner)
        for (const w of waiting) Deferred.doneUnsafe(w, Exit.succeed(key))
      }
    }

    const where = (key: string) =>
      makeClient(key).Where().pipe(
        Effect.retry({
          while: (error) => error._tag === "EntityNotAssignedToRunner" || error._tag === "MailboxFull",
          schedule: Schedule.spaced("250 millis")
        }),
        Effect.timeoutOption(options.callTimeout),
        Effect.map(Option.map((answer) => {
          learn(key, answer.runner)
          rooms.set(answer.runner, {
            runner: answer.runner,
            key,
            used: answer.used,
            free: answer.free,
            draining: answer.draining
          })
          return answer.runner
        })),
        Effect.orElseSucceed(() => Option.none<string>())
      )

    // One question to every shard at a time, whoever asks; it runs to its end in the directory's scope even when
    // the caller that started it stops waiting (another found its runner first).
    const scope = yield* Effect.scope
    let asking: Deferred.Deferred<void> | undefined
    const askAll = Effect.suspend(() => {
      if (asking !== undefined) return Deferred.await(asking)
      const done = Deferred.makeUnsafe<void>()
      asking = done
      const ask = Effect.forEach(keys, where, { concurrency: "unbounded", discard: true }).pipe(
        Effect.ensuring(Effect.sync(() => {
          asking = undefined
          Deferred.doneUnsafe(done, Exit.void)
        }))
      )
      return Effect.andThen(Effect.forkIn(ask, scope), Deferred.await(done))
    })

    const route = (holder: string, missed?: string): Effect.Effect<string | undefined> =>
      Effect.suspend(() => {
        const known = (byRunner.get(holder) ?? []).filter((k) => k !== missed)
        byRunner.set(holder, known)
        if (known.length > 0) return Effect.succeed(known[0])
        const found = Deferred.makeUnsafe<string>()
        waiters.set(holder, [...(waiters.get(holder) ?? []), found])
        return Effect.raceFirst(
          Deferred.await(found),
          askAll.pipe(Effect.map(() => byRunner.get(holder)?.[0]))
        ).pipe(Effect.ensuring(Effect.sync(() => {
          const rest = (waiters.get(holder) ?? []).filter((w) => w !== found)
          if (rest.length === 0) waiters.delete(holder)
          else waiters.set(holder, rest)
        })))
      })

    return {
      route,
      learn,
      known: (holder) => byRunner.get(holder)?.[0],
      ownerOf: (key) => owners.get(shardOf(key)),
      refresh: Effect.suspend(() => {
        refreshes += 1
        const heardBefore = heard
        heard = new Set()
        const known = [...byRunner].flatMap(([runner, keys]) => keys.length === 0 ? [] : [[runner, keys[0]!] as const])
        const knownBefore = new Set(known.map(([runner]) => runner))
        // Runners no shard answered for any more (they died or left) are forgotten.
        const sweep = Effect.andThen(
          askAll,
          Effect.sync(() => {
            for (const runner of rooms.keys()) if ((byRunner.get(runner) ?? []).length === 0) rooms.delete(runner)
            for (const [runner, keys] of byRunner) {
              if (keys.length > 0 && !knownBefore.has(runner)) formingSweeps = sweepEvery - 1
            }
          })
        )
        if (refreshes % sweepEvery === 1 || known.length === 0) return sweep
        if (formingSweeps > 0) {
          formingSweeps -= 1
          return sweep
        }
        // Runners whose room an answer brought since the last refresh are not asked.
        return Effect.forEach(
          known.filter(([runner]) => !heardBefore.has(runner)),
          ([runner, key]) =>
            Effect.map(where(key), (answered) => {
              if (Option.isNone(answered)) rooms.delete(runner)
            }),
          { concurrency: "unbounded", discard: true }
        )
      }),
      rooms: () => rooms.values(),
      learnRoom: (room) => {
        rooms.set(room.runner, room)
      },
      heardRoom: (room) => {
        rooms.set(room.runner, room)
        if (!heard.has(room.runner)) {
          heard.add(room.runner)
          learn(room.key, room.runner)
        }
      },
      wantsRoom: (runner) => !heard.has(runner),
      forgetRoom: (runner) => {
        rooms.delete(runner)
        heard.delete(runner)
      }
    }
  })
