/**
 * The Group pool's contract: what a caller gives a pool (its Groups, how to run one, the options) and what a pool
 * answers (a step's plan and outcome, its state).
 *
 * **Details**
 * The pool itself (fibers, leases, the first-request barrier, prelaunch, retention, the drop streak) is
 * layers/schedule/GroupPool.ts; this module holds the shapes both it and its callers (the rollout, the simulations)
 * name.
 */
import type { Effect, Exit } from "effect"
import type * as DropStreak from "../../src/schedule/DropStreak.ts"
import type * as Leasing from "../../src/schedule/Leasing.ts"
import type * as AgentSpec from "../../src/session/AgentSpec.ts"
import type * as Telemetry from "../observability/Telemetry.ts"
import type * as FirstRequestBarrier from "./FirstRequestBarrier.ts"

/** What the pool needs to know of a Group input. */
export interface GroupLike {
  readonly groupId: string
  /** Number of Sessions. */
  readonly size: number
}

/** Reward's decision for a Group. */
export type Verdict<A> =
  | { readonly _tag: "Accepted"; readonly value: A }
  | { readonly _tag: "Filtered"; readonly reason?: string | undefined }

export const accepted = <A>(value: A): Verdict<A> => ({ _tag: "Accepted", value })
export const filtered = (reason?: string): Verdict<never> => ({ _tag: "Filtered", reason })

/** How a Group runs: Prepare + Runtime of each Session, then Reward of the whole Group. */
export interface GroupRunner<G extends GroupLike, O, A, E> {
  /** Start the Session's agent and run it to its end; a failure drops the Group. */
  readonly session: (group: G, ticket: FirstRequestBarrier.SessionTicket) => Effect.Effect<O, E>
  /**
   * Optional: run every Session of the Group together, each as `session` would (same agents, results and failures),
   * for a runner whose cost is per fiber more than per Session (the cluster's controller: one fiber follows a Group's
   * event stream). `ended` is told of each Session's end once, as it happens (its outcome, its failure, or a defect);
   * the effect completes once every Session ended, and interrupting it ends those still running. The pool uses it
   * when present, with the same first-request barrier, drops and Reward as per Session.
   */
  readonly group?:
    | ((
      group: G,
      sessions: GroupTickets,
      ended: (position: number, exit: Exit.Exit<O, E>) => Effect.Effect<void>
    ) => Effect.Effect<void | Refused>)
    | undefined
  /** Score the finished Group (outcomes in Session order); a failure drops the Group. */
  readonly reward: (group: G, outcomes: ReadonlyArray<O>) => Effect.Effect<Verdict<A>, E>
  /**
   * Mint the id of a Session of `group` (default: the pool's `sessionId`); in cluster mode the id names the Group's
   * entity, so any runner can route the agent's requests to its owner.
   */
  readonly newSessionId?: ((group: G) => Effect.Effect<string>) | undefined
  /**
   * Optional, with `group`: mint a whole Group's Session ids at a placement that `group` confirms (the cluster's
   * controller places by room without a round trip of its own; the Group's first poll takes it there). `group` answers
   * {@link refused} when the placement did not take (no Session started, none was told to `ended`): the pool calls
   * this again, for a new placement under new ids, and runs the Group again. Used instead of `newSessionId` when
   * present.
   */
  readonly newGroupIds?: ((group: G) => Effect.Effect<ReadonlyArray<string>>) | undefined
}

/** `GroupRunner.group`'s answer when the Group's placement did not take: the pool places it again, under new ids. */
export const refused = "refused" as const
export type Refused = typeof refused

/** A Group's Sessions' tickets, for a runner that runs them together (`GroupRunner.group`). */
export interface GroupTickets {
  /** In Session order. */
  readonly tickets: ReadonlyArray<FirstRequestBarrier.SessionTicket>
  /**
   * Count the first model request of the Session at `position` without waiting for the lease (a runner that hears of
   * its agents' first requests from elsewhere); its `awaitLease` counts it as well.
   */
  readonly arrive: (position: number) => Effect.Effect<void>
}

export interface PoolOptions<G extends GroupLike, O, A, E> {
  /** Resident Groups (Prepare + Runtime). */
  readonly capacity: number
  readonly prelaunch: boolean
  /** `train` or `eval`: only changes log wording. */
  readonly mode: AgentSpec.RolloutMode
  /** The next Group input (called once per Group started). */
  readonly next: Effect.Effect<G>
  readonly runner: GroupRunner<G, O, A, E>
  /** Mint a Session id (default: 128-bit random hex). */
  readonly sessionId?: Effect.Effect<string> | undefined
  /** `error_type=` and the detail text of a failure, for the drop log line. */
  readonly describeError?: ((error: E) => { readonly type: string; readonly detail: string }) | undefined
  /** Seconds without progress before an `idle_heartbeat` event (default 30). */
  readonly heartbeatSeconds?: number | undefined
  /** Counts Groups dropped in a row (share one between a rollout's pools); default: unlimited, as Relax. */
  readonly dropStreak?: DropStreak.DropStreak | undefined
  /**
   * Partial rollout / fully async: whether a Session is interrupted now (the generation gate's view), and (fully
   * async, whose close depends on it) a way to be told when that may have changed, which wakes the step loop.
   */
  readonly interruption?: {
    readonly isSessionInterrupted: (sessionId: string) => boolean
    readonly onChange?: ((listener: () => void) => void) | undefined
  } | undefined
}

/** A step's numbers (`Leasing.StepRequest`: debt, surplus, refill, retention) and its progress bar. */
export interface StepPlan extends Leasing.StepRequest {
  readonly progress?: Telemetry.Progress | undefined
}

export interface AcceptedGroup<G, A> {
  readonly group: G
  readonly value: A
}

export interface StepOutcome<G, A> {
  /** In acceptance order. */
  readonly accepted: ReadonlyArray<AcceptedGroup<G, A>>
  readonly dropped: number
  readonly filtered: number
  /** Groups resident when the step closed (kept in Prepare, or retained in Runtime, for the next step). */
  readonly residentGroups: number
  /** Debt left when the step closed (fully async: owed to a later step). */
  readonly debt: number
  /** Leased Groups kept for the next step. */
  readonly retainedGroups: number
  /** Of those, the ones whose every unfinished Session was interrupted at the close. */
  readonly interruptedGroups: number
}

/** Point-in-time counts, as the idle heartbeat reports them. */
export interface PoolState {
  readonly activeRolloutId: number
  readonly preparing: number
  readonly ready: number
  readonly runtime: number
  readonly reward: number
  readonly resident: number
}

export interface Pool<G extends GroupLike, A> {
  /**
   * Run one step. Fails (after interrupting every Group of the pool) once the drop streak reaches its limit, also
   * when it was reached before the call.
   */
  readonly runStep: (plan: StepPlan) => Effect.Effect<StepOutcome<G, A>, DropStreak.TooManyDroppedGroupsError>
  readonly state: Effect.Effect<PoolState>
  /** Retained Groups whose every unfinished Session is interrupted now (after a step's pause: all unprotected ones). */
  readonly interruptedRetained: Effect.Effect<number>
}
