/**
 * Placement by room (docs/scale-out.md "Capacity"): which runner a new Group goes to, from what the controller last
 * heard of each runner's slots.
 *
 * **Details**
 * A runner qualifies when it is not draining and has room for the whole Group (free `--runner-slots` at least the
 * Group's size, or no limit). Among those the one with the fewest slots in use (resident Sessions plus reservations)
 * is chosen, so a fresh runner fills first and a busy one is not chosen by hash alone; on a tie, the runner owning the
 * shard of the Group's own key. What the controller heard may be stale: the runner decides (at the Group's placing
 * poll), and a refusal, which brings the runner's room, places the Group again; with no runner known to have room the
 * Group goes to the hash candidates (`Routing.candidateKeys`).
 */

/** What the controller last heard of a runner. */
export interface Room {
  readonly runner: string
  /** An entity id whose messages reach the runner. */
  readonly key: string
  /** Slots in use: hosted Sessions plus reserved ones. */
  readonly used: number
  /** Free slots; `null` = unlimited. */
  readonly free: number | null
  readonly draining: boolean
}

/** The runner for a Group of `size` Sessions, or `undefined` when none is known to have room. */
export const choose = (rooms: Iterable<Room>, size: number, owner?: string): Room | undefined => {
  let best: Room | undefined
  for (const room of rooms) {
    if (room.draining || (room.free !== null && room.free < size)) continue
    if (
      best === undefined || room.used < best.used || (room.used === best.used && room.runner === owner)
    ) best = room
  }
  return best
}

/** The room after a Group of `size` Sessions was placed there (until the runner's next answer says more). */
export const taken = (room: Room, size: number): Room => ({
  ...room,
  used: room.used + size,
  free: room.free === null ? null : Math.max(0, room.free - size)
})
