/**
 * A runner's agent slots (`--runner-slots`, docs/scale-out.md "Capacity"): whether a Group of `size` Sessions may be
 * placed on a runner, counting the Sessions it hosts and the slots it promised to Groups whose Sessions have not all
 * arrived yet.
 *
 * **Details**
 * A Group is placed whole: the controller asks the runner it chose by room to take `size` slots (the Group's placing
 * poll), or the runner of a candidate Group key to reserve them (`Reserve`), and a runner that cannot hold every
 * Session of it refuses, so the controller places it elsewhere (another runner, another key) or waits. A reservation is consumed Session by Session as they start; what a
 * controller never used expires. A draining runner (SIGTERM) reserves nothing.
 */

/** A runner's answer to a reservation. */
export type Decision = "granted" | "full" | "draining" | "too-small"

/** What the runner knows when it decides. */
export interface Request {
  /** `--runner-slots`; `undefined` = unlimited. */
  readonly capacity: number | undefined
  /** Sessions hosted now plus slots reserved for Sessions that have not arrived. */
  readonly used: number
  /** Sessions of the Group. */
  readonly size: number
  /** The Group already holds a reservation here (a re-delivered `Reserve`): granted again, nothing added. */
  readonly known: boolean
  readonly draining: boolean
}

/** Whether the Group may be placed here. */
export const decide = (request: Request): Decision =>
  request.draining
    ? "draining"
    : request.known
    ? "granted"
    : request.capacity === undefined
    ? "granted"
    : request.size > request.capacity
    ? "too-small"
    : request.used + request.size > request.capacity
    ? "full"
    : "granted"

/** Free slots (`undefined` = unlimited). */
export const free = (capacity: number | undefined, used: number): number | undefined =>
  capacity === undefined ? undefined : Math.max(0, capacity - used)

/**
 * The external-slots check over the runners (`relax-agentic check`, the controller's start): the slots of every live
 * runner against the Sessions the settings keep resident at once; a warning when they are fewer. `undefined` when
 * some runner is unlimited or the runners hold enough.
 */
export const shortfall = (
  runners: ReadonlyArray<{ readonly address: string; readonly slots: number | undefined }>,
  required: number,
  rule: string
): string | undefined => {
  if (runners.length === 0 || runners.some((r) => r.slots === undefined)) return undefined
  const total = runners.reduce((sum, r) => sum + (r.slots ?? 0), 0)
  return total >= required ? undefined : `the ${runners.length} runner(s) hold ${total} agent slot(s) in all ` +
    `(--runner-slots: ${runners.map((r) => `${r.address} ${r.slots}`).join(", ")}), below the ${required} ` +
    `Sessions resident at once (${rule}); Groups wait for slots at the controller, so fewer run at once than ` +
    "--agentic-concurrency asks. Add runners or raise --runner-slots, or lower --agentic-concurrency."
}

/** The runner-slots lines of the capacity table (`relax-agentic check` with a cluster). */
export const render = (
  runners: ReadonlyArray<{ readonly address: string; readonly slots: number | undefined }>
): string =>
  runners.length === 0
    ? "  runners: none joined the cluster"
    : `  runners: ${runners.length}; --runner-slots: ${
      runners.map((r) => `${r.address} ${r.slots ?? "unlimited"}`).join(", ")
    }` + (runners.some((r) => r.slots === undefined)
      ? ""
      : `; runner slots in all = ${runners.reduce((sum, r) => sum + (r.slots ?? 0), 0)}`)
