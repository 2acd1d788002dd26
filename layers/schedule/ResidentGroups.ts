/**
 * The Group pool's resident Groups and their Runtime leases (docs/runtime.md "Resident capacity"): one record per
 * Group from its start to its end, the slot it holds, and the signals its end sends the step loop.
 *
 * **Details**
 * A Group is *resident* from `admit` (its fiber forked into the pool's scope, phase `prepare`) until `release` (its
 * Sessions all finished, or it was dropped or stopped); `release` is idempotent, so every way a Group ends may call it.
 * `lease` hands a ready Prepare Group its Runtime lease (the `Deferred<boolean>` its first-request barrier waits on,
 * layers/schedule/FirstRequestBarrier.ts). `retained` holds the leased Groups a step kept for the next one (partial
 * rollout / fully async). The decisions (which Group is leased, how many start, what a step's close keeps) are
 * src/schedule/Leasing.ts; the step loop that carries them out is layers/schedule/GroupPool.ts.
 */
import { Deferred, Effect, Fiber, Queue, type Scope } from "effect"
import type * as Leasing from "../../src/schedule/Leasing.ts"
import * as Retention from "../../src/schedule/Retention.ts"
import type * as PoolContract from "./PoolContract.ts"

/** Where a Group is in its life: Prepare (agents started), Runtime (leased), Reward (outside capacity), done. */
export type Phase = "prepare" | "runtime" | "reward" | "done"

/** One resident Group. */
export interface GroupRecord<G> {
  readonly group: G
  /** The Runtime lease: `true` once leased, `false` once dropped (held requests then fail). */
  readonly lease: Deferred.Deferred<boolean>
  phase: Phase
  /** Every Session has sent its first model request. */
  ready: boolean
  /** The step the Group's responses are recorded under. */
  rolloutId: number
  released: boolean
  fiber: Fiber.Fiber<void> | undefined
  /** Session ids in Group order (set when the Group's fiber starts). */
  sessionIds: ReadonlyArray<string>
  /** Per Session: its agent ended. */
  readonly finished: Array<boolean>
}

/** How a Group ended. */
export type Finish<A> =
  | { readonly _tag: "Accepted"; readonly value: A }
  | { readonly _tag: "Filtered" }
  | { readonly _tag: "Dropped" }

/** What wakes the step loop: the pool changed (a slot freed, a Group ready), or a Group finished. */
export type Signal<G, A> =
  | { readonly _tag: "Changed" }
  | { readonly _tag: "Finished"; readonly record: GroupRecord<G>; readonly finish: Finish<A> }

/** `Finish` as the ledger counts it. */
export const finishOf = <A>(finish: Finish<A>): Leasing.Finish =>
  finish._tag === "Accepted" ? "accepted" : finish._tag === "Filtered" ? "filtered" : "dropped"

/** A pool's resident Groups. */
export interface ResidentGroups<G extends PoolContract.GroupLike, A> {
  /** Groups in Prepare (not leased), in start order. */
  readonly prepared: Array<GroupRecord<G>>
  /** Inputs of Prepare Groups interrupted at a step's end, started again before new ones. */
  readonly pending: Array<G>
  /** Leased Groups kept from the last step (partial rollout / fully async), still running or parked. */
  readonly retained: Set<GroupRecord<G>>
  /** Every Group whose fiber has not ended. */
  readonly all: Set<GroupRecord<G>>
  /** Groups holding a slot. */
  readonly resident: () => number
  /** The step loop's wake-ups. */
  readonly signals: Queue.Queue<Signal<G, A>>
  readonly notify: (signal: Signal<G, A>) => Effect.Effect<void>
  /** Free the Group's slot (once) and wake the step loop. */
  readonly release: (record: GroupRecord<G>) => Effect.Effect<void>
  /** Take a slot for `group` in Prepare under step `rolloutId` and fork `run` for it into the pool's scope. */
  readonly admit: (
    group: G,
    rolloutId: number,
    run: (record: GroupRecord<G>) => Effect.Effect<void>
  ) => Effect.Effect<void>
  /** Give a Prepare Group its Runtime lease under step `rolloutId` (the caller removed it from `prepared`). */
  readonly lease: (record: GroupRecord<G>, rolloutId: number) => Effect.Effect<void>
  /** Interrupt the Groups' fibers and release their slots. */
  readonly stop: (records: ReadonlyArray<GroupRecord<G>>) => Effect.Effect<void>
  /** Point-in-time counts, with `activeRolloutId` the pool's current step. */
  readonly state: (activeRolloutId: number) => PoolContract.PoolState
  /** The Prepare Groups as the leasing decisions see them. */
  readonly prepareView: () => Array<Leasing.PrepareGroup<GroupRecord<G>>>
  /** Runtime Groups whose every unfinished Session is interrupted now (`PoolOptions.interruption`). */
  readonly countInterrupted: (records: Iterable<GroupRecord<G>>) => number
}

/** Resident Groups of a pool whose fibers live in `scope`. */
export const make = <G extends PoolContract.GroupLike, A>(
  scope: Scope.Scope,
  isSessionInterrupted: ((sessionId: string) => boolean) | undefined
): Effect.Effect<ResidentGroups<G, A>> =>
  Effect.gen(function*() {
    const signals = yield* Queue.unbounded<Signal<G, A>>()
    const prepared: Array<GroupRecord<G>> = []
    const pending: Array<G> = []
    const retained = new Set<GroupRecord<G>>()
    const all = new Set<GroupRecord<G>>()
    let resident = 0

    const notify = (signal: Signal<G, A>) => Queue.offer(signals, signal).pipe(Effect.asVoid)

    const release = (record: GroupRecord<G>) =>
      Effect.suspend(() => {
        if (record.released) return Effect.void
        record.released = true
        resident -= 1
        return notify({ _tag: "Changed" })
      })

    const admit = (group: G, rolloutId: number, run: (record: GroupRecord<G>) => Effect.Effect<void>) =>
      Effect.gen(function*() {
        const record: GroupRecord<G> = {
          group,
          lease: yield* Deferred.make<boolean>(),
          phase: "prepare",
          ready: false,
          rolloutId,
          released: false,
          fiber: undefined,
          sessionIds: [],
          finished: Array.from({ length: group.size }, () => false)
        }
        resident += 1
        prepared.push(record)
        all.add(record)
        record.fiber = yield* Effect.forkIn(
          run(record).pipe(Effect.ensuring(Effect.sync(() => all.delete(record)))),
          scope
        )
      })

    const lease = (record: GroupRecord<G>, rolloutId: number) =>
      Effect.suspend(() => {
        record.phase = "runtime"
        record.rolloutId = rolloutId
        return Deferred.succeed(record.lease, true)
      })

    // A fiber interrupted before it ran never reaches its own `ensuring`: release its slot here too (idempotent).
    const stop = (records: ReadonlyArray<GroupRecord<G>>) =>
      Effect.forEach(records, (r) =>
        (r.fiber === undefined ? Effect.void : Fiber.interrupt(r.fiber)).pipe(
          Effect.andThen(release(r)),
          Effect.andThen(Effect.sync(() => all.delete(r)))
        ), {
        concurrency: "unbounded",
        discard: true
      })

    const state = (activeRolloutId: number): PoolContract.PoolState => {
      let runtime = 0
      let reward = 0
      for (const r of all) {
        if (r.phase === "runtime") runtime += 1
        if (r.phase === "reward") reward += 1
      }
      const ready = prepared.filter((r) => r.ready).length
      return { activeRolloutId, preparing: prepared.length - ready, ready, runtime, reward, resident }
    }

    const isInterrupted = (record: GroupRecord<G>): boolean => {
      if (isSessionInterrupted === undefined || record.phase !== "runtime") return false
      let unfinished = 0
      let interrupted = 0
      record.sessionIds.forEach((sessionId, i) => {
        if (record.finished[i]) return
        unfinished += 1
        if (isSessionInterrupted(sessionId)) interrupted += 1
      })
      return Retention.isGroupInterrupted({
        runtime: true,
        failed: false,
        unfinishedSessions: unfinished,
        interruptedSessions: interrupted
      })
    }

    return {
      prepared,
      pending,
      retained,
      all,
      resident: () => resident,
      signals,
      notify,
      release,
      admit,
      lease,
      stop,
      state,
      prepareView: () => prepared.map((r) => ({ key: r, ready: r.ready, live: r.phase === "prepare" })),
      countInterrupted: (records) => {
        let n = 0
        for (const r of records) if (isInterrupted(r)) n += 1
        return n
      }
    }
  })
