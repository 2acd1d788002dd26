/**
 * The Group pool's leasing decision as pure functions over plain state: which ready Groups get a Runtime lease, how
 * many new Groups start, how a finished Group pays the step's debt, and what happens to resident Groups when a step
 * closes (docs/runtime.md: "Steps", "Resident capacity", "The first-request barrier"; prelaunch: src/schedule/Prelaunch.ts).
 *
 * **Details**
 * `layers/schedule/GroupPool.ts` owns the fibers, Deferreds and the signal queue; at every wake-up it describes its resident
 * Groups as a `PoolView`, asks `nextMoves` what to do, and carries the moves out. A Group is identified by an opaque
 * key `K` (the layer's own record), so nothing here knows about fibers.
 *
 * - `openStep` turns a step plan into a `StepLedger` (the step's debt and counters); `recordFinish` folds one finished Group
 *   into it. Both return new values: the ledger is never mutated.
 * - `nextMoves`: ready Prepare Groups are leased FIFO while the step still needs Groups
 *   (`debt + surplus − leased`); then new Groups start while capacity is free, up to what the step needs, or up to full
 *   capacity with prelaunch when a next step follows; without refill (Eval) at most `debt` Groups start in all.
 * - `closes`: a step ends when its debt is paid, or (fully async, outside the final backfill) when the debt is at most
 *   the number of interrupted resident Groups (docs/runtime.md "Partial rollout and fully async").
 * - `closeRuntime` / `closePrepare`: at the end of a step leased Groups still running are interrupted, or kept for
 *   the next step (partial rollout / fully async: their generations are parked, they stay leased and pay the next
 *   step's debt); Prepare Groups are kept for the next step only with prelaunch, otherwise they are interrupted and
 *   their inputs start again, first, in the next step.
 */
import * as Prelaunch from "./Prelaunch.ts"

/** A Prepare Group as the decision sees it. */
export interface PrepareGroup<K> {
  readonly key: K
  /** Every Session sent its first model request (the all-session barrier is complete). */
  readonly ready: boolean
  /** Still in Prepare; false once it was dropped (its slot is free, its finish not yet seen by the step). */
  readonly live: boolean
}

/** The pool's resident Groups at one wake-up. */
export interface PoolView<K> {
  /** Resident Groups allowed (Prepare + Runtime). */
  readonly capacity: number
  /** Groups holding a slot now (Prepare + Runtime; a Group in Reward no longer does). */
  readonly resident: number
  /** Unleased Prepare Groups, in start order (the FIFO the leases follow). */
  readonly prepare: ReadonlyArray<PrepareGroup<K>>
  /** Groups leased by the current step and not finished yet. */
  readonly leased: number
}

/** What a step asks of the pool (the numbers of the Group pool's `StepPlan`). */
export interface StepRequest {
  readonly rolloutId: number
  /** Groups the step must accept. */
  readonly debt: number
  /** Extra Groups kept in flight (`over_sampling_batch_size − rollout_batch_size`). */
  readonly surplus: number
  /** Whether a next step follows (prelaunch fills capacity for it; Prepare Groups are kept for it). */
  readonly nextStep: boolean
  /**
   * When false (Eval), a dropped or filtered Group pays its debt without a replacement, and at most `debt` Groups are
   * started.
   */
  readonly refill: boolean
  /** Keep leased Groups still running at the close for the next step (partial rollout / fully async). */
  readonly retain?: boolean | undefined
  /**
   * Fully async outside the final backfill: the most debt the step may leave owed (its own partition's Groups; the
   * previous partition must be paid first), when that many resident Groups are interrupted. Default 0.
   */
  readonly maxCarriedDebt?: number | undefined
}

/** A step's running account. */
export interface StepLedger {
  readonly rolloutId: number
  /** Groups still to accept; the step ends at 0. */
  readonly debt: number
  /** Extra Groups kept in flight (0 without refill). */
  readonly surplus: number
  readonly refill: boolean
  /** Most Groups the step may start (`Infinity` with refill, the initial debt without). */
  readonly startLimit: number
  /** Groups started by this step. */
  readonly started: number
  /** Start Groups up to full capacity (prelaunch and a next step follows). */
  readonly fillCapacity: boolean
  /** Prepare Groups stay resident for the next step (prelaunch and a next step follows). */
  readonly keepPrepare: boolean
  readonly accepted: number
  readonly dropped: number
  readonly filtered: number
  /** Leased Groups still running at the close stay leased for the next step. */
  readonly retain: boolean
  readonly maxCarriedDebt: number
}

/** Open a step's ledger. */
export const openStep = (request: StepRequest, prelaunch: boolean): StepLedger => {
  const prelaunching = Prelaunch.carriesOver(prelaunch, request.nextStep)
  return {
    rolloutId: request.rolloutId,
    debt: request.debt,
    surplus: request.refill ? request.surplus : 0,
    refill: request.refill,
    startLimit: request.refill ? Infinity : request.debt,
    started: 0,
    fillCapacity: prelaunching,
    keepPrepare: prelaunching,
    accepted: 0,
    dropped: 0,
    filtered: 0,
    retain: request.retain ?? false,
    maxCarriedDebt: request.maxCarriedDebt ?? 0
  }
}

/**
 * Whether the step can close now: its debt is paid, or (fully async) the debt left is one it may carry and every Group
 * it still owes is matched by an interrupted resident Group (those finish into the previous partition later).
 */
export const closes = (ledger: StepLedger, interruptedGroups: number): boolean =>
  ledger.debt <= 0 || (ledger.debt <= ledger.maxCarriedDebt && ledger.debt <= interruptedGroups)

/** What the layer does at one wake-up: lease these Groups (in this order), then start `start` new ones. */
export interface Moves<K> {
  readonly lease: ReadonlyArray<K>
  readonly start: number
}

/** The leasing decision at one wake-up. */
export const nextMoves = <K>(pool: PoolView<K>, ledger: StepLedger): Moves<K> => {
  if (ledger.debt <= 0) return { lease: [], start: 0 }
  let need = ledger.debt + ledger.surplus - pool.leased
  const lease: Array<K> = []
  for (const group of pool.prepare) {
    if (need <= 0) break
    if (!group.ready) continue
    lease.push(group.key)
    need -= 1
  }
  const waiting = pool.prepare.length - lease.length
  const target = ledger.fillCapacity ? pool.capacity : need
  const start = Math.max(
    0,
    Math.min(target - waiting, pool.capacity - pool.resident, ledger.startLimit - ledger.started)
  )
  return { lease, start }
}

/** Count Groups started by the layer. */
export const started = (ledger: StepLedger, count: number): StepLedger => ({
  ...ledger,
  started: ledger.started + count
})

/** How a Group of the step ended. */
export type Finish = "accepted" | "filtered" | "dropped"

/** A recorded finish: the new ledger, and whether an accepted Group's samples belong to the step. */
export interface RecordedFinish {
  readonly ledger: StepLedger
  readonly take: boolean
}

/**
 * Fold one finished Group (leased by this step or waiting in Prepare) into the ledger: an accepted Group pays one
 * debt while debt remains; a dropped or filtered one pays only without refill (Eval), otherwise it is replaced.
 */
export const recordFinish = (ledger: StepLedger, finish: Finish): RecordedFinish => {
  if (finish === "accepted") {
    return ledger.debt > 0
      ? { ledger: { ...ledger, debt: ledger.debt - 1, accepted: ledger.accepted + 1 }, take: true }
      : { ledger, take: false }
  }
  const counted = finish === "dropped"
    ? { ...ledger, dropped: ledger.dropped + 1 }
    : { ...ledger, filtered: ledger.filtered + 1 }
  return { ledger: ledger.refill ? counted : { ...counted, debt: counted.debt - 1 }, take: false }
}

/** What happens to the step's leased Groups still running when it closes. */
export interface RuntimeClose<K> {
  /** Interrupted now (over-sampled Groups no longer needed, without retention). */
  readonly interrupt: ReadonlyArray<K>
  /** Kept leased for the next step, their generations parked (partial rollout / fully async). */
  readonly retain: ReadonlyArray<K>
}

/** Leased Groups at a step's close: retained with partial rollout / fully async, interrupted otherwise. */
export const closeRuntime = <K>(ledger: Pick<StepLedger, "retain">, leased: ReadonlyArray<K>): RuntimeClose<K> =>
  ledger.retain ? { interrupt: [], retain: [...leased] } : { interrupt: [...leased], retain: [] }

/** What happens to unleased Prepare Groups when a step closes. */
export interface PrepareClose<K> {
  /** Stay resident (and keep their barrier progress) for the next step. */
  readonly keep: ReadonlyArray<K>
  /** Reaped now. */
  readonly interrupt: ReadonlyArray<K>
  /** Of `interrupt`, the live ones whose inputs start again, first, in the next step (no dataset row is skipped). */
  readonly restart: ReadonlyArray<K>
}

/**
 * Prepare Groups at a step's close: kept with prelaunch when a next step follows; otherwise no agent stays resident
 * past its step (Eval may follow on the same executor), and only live Groups get their input back (a Group dropped
 * in Prepare was already replaced).
 */
export const closePrepare = <K>(ledger: StepLedger, prepare: ReadonlyArray<PrepareGroup<K>>): PrepareClose<K> =>
  ledger.keepPrepare
    ? { keep: prepare.map((g) => g.key), interrupt: [], restart: [] }
    : {
      keep: [],
      interrupt: prepare.map((g) => g.key),
      restart: prepare.filter((g) => g.live).map((g) => g.key)
    }
