/**
 * A runner's placement state: the agent slots it promised to Groups (`--runner-slots`, `src/cluster/Slots.ts`) and
 * whether it drains (docs/scale-out.md "Capacity", "Draining a runner").
 *
 * **Details**
 * A Group is placed whole: `reserve` holds all its slots or refuses; each new Session of the Group uses one reserved
 * slot (`admit`); a reservation no Session used expires after the orphan timeout (a controller that died between the
 * two). A draining runner (SIGTERM) reserves nothing and admits only Sessions of Groups reserved on it.
 */
import { Clock, Effect } from "effect"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Slots from "../../src/cluster/Slots.ts"
import type * as GroupEntity from "./GroupEntity.ts"

/** Slots reserved for a Group (its key) whose Sessions have not all arrived yet. */
interface Reservation {
  pending: number
  /** When it was made (ms, the Clock's); an unused reservation expires after the orphan timeout. */
  readonly at: number
}

export interface HostSlots {
  /** Free slots with `hosted` Sessions (`null` = unlimited). */
  readonly free: (hosted: number) => number | null
  /** Slots in use: `hosted` Sessions plus slots reserved for Sessions that have not arrived. */
  readonly used: (hosted: number) => number
  readonly draining: () => boolean
  /** The Group `key` holds a reservation here (its `Reserve` was granted; not all its Sessions arrived yet). */
  readonly reserved: (key: string) => boolean
  /** Reserve nothing more, admit only reserved Sessions. */
  readonly startDraining: () => void
  /** Reserve a Group's slots, or say why not (a repeated `Reserve` is granted again without reserving twice). */
  readonly reserve: (
    key: string,
    payload: typeof GroupEntity.Reserve.payloadSchema.Type,
    hosted: number,
    runner: { readonly incarnation: string; readonly address: string }
  ) => Effect.Effect<typeof GroupEntity.Reserve.successSchema.Type>
  /**
   * A new Session of Group `key` takes one of its reserved slots; a draining runner starts only reserved ones: the
   * refusal, or `undefined` when the Session may start.
   */
  readonly admit: (
    key: string | undefined,
    sessionId: string,
    address: string
  ) => ClusterWire.SessionFailedError | undefined
  /** Drop reservations older than `ttlMs` at `now`. */
  readonly expire: (now: number, ttlMs: number) => void
}

/** The placement state of a runner with `capacity` slots (`undefined`: unlimited). */
export const make = (capacity: number | undefined): HostSlots => {
  const reservations = new Map<string, Reservation>()
  let draining = false
  const used = (hosted: number) => {
    let pending = 0
    for (const r of reservations.values()) pending += r.pending
    return hosted + pending
  }
  return {
    used,
    free: (hosted) => Slots.free(capacity, used(hosted)) ?? null,
    draining: () => draining,
    reserved: (key) => reservations.has(key),
    startDraining: () => {
      draining = true
    },
    reserve: (key, payload, hosted, runner) =>
      Effect.gen(function*() {
        const decision = Slots.decide({
          capacity,
          used: used(hosted),
          size: payload.slots,
          known: reservations.has(key),
          draining
        })
        if (decision === "granted" && !reservations.has(key)) {
          reservations.set(key, { pending: payload.slots, at: yield* Clock.currentTimeMillis })
        }
        return {
          runner: runner.incarnation,
          address: runner.address,
          decision,
          used: used(hosted),
          free: Slots.free(capacity, used(hosted)) ?? null,
          capacity: capacity ?? null
        }
      }),
    admit: (key, sessionId, address) => {
      const reservation = key === undefined ? undefined : reservations.get(key)
      if (reservation !== undefined && reservation.pending > 0) {
        reservation.pending -= 1
        if (reservation.pending === 0 && key !== undefined) reservations.delete(key)
        return undefined
      }
      return draining
        ? new ClusterWire.SessionFailedError({
          type: "RunnerDraining",
          detail: `runner ${address} is draining (SIGTERM) and takes no new Group; Session ${sessionId} ` +
            "is dropped and its Group refilled on another runner"
        })
        : undefined
    },
    expire: (now, ttlMs) => {
      for (const [key, r] of reservations) {
        if (now - r.at > ttlMs) reservations.delete(key)
      }
    }
  }
}
