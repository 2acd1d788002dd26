/**
 * The controller's failures of a cluster call (docs/scale-out.md "Failure").
 *
 * **Details**
 * Cluster calls never time out by themselves (a dead owner, no runner at all and a `shardsPerGroup` mismatch all just
 * block), so every controller call has a deadline; a call that passes it, or that the cluster refuses, fails the
 * Session with this error and its Group is dropped and refilled.
 */
import { Data, Schema } from "effect"

/** A cluster call that failed or passed its deadline. */
export class ClusterCallError extends Data.TaggedError("ClusterCallError")<{
  readonly reason: "deadline" | "refused"
  /** The message (`Reserve`, `RunSession`, `Grant`) and what happened. */
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.reason === "deadline"
      ? `cluster call passed its deadline: ${this.detail} (no runner answered; are runners up and is ` +
        "--cluster-call-timeout long enough?)"
      : `cluster call refused: ${this.detail}`
  }
}

/**
 * The runner incarnation that held the Group is no longer a member of the cluster (no shard is its own): it died (or
 * left), and the Group is lost with it.
 */
export class RunnerLostError extends Schema.TaggedError<RunnerLostError>()("RunnerLostError", {
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message(): string {
    return `the runner ${this.expected} that held this Group is gone (the last runner asked was ${this.actual}); ` +
      "the Group is dropped and refilled"
  }
}

/**
 * A message for a placed Group reached a runner that does not hold it: the entity it was sent to is on another
 * runner now (a runner joined or left and shards moved), or, for a stream, its entity's shard moved away while it
 * ran. The Group still runs on its holder; the sender finds the holder's entities again (`layers/cluster/Directory.ts`)
 * and sends the message there (docs/scale-out.md "Placement that outlives shard moves").
 */
export class NotHolderError extends Schema.TaggedError<NotHolderError>()("NotHolderError", {
  /** The runner incarnation the message was for. */
  holder: Schema.String,
  /** The runner incarnation that received it. */
  runner: Schema.String
}) {
  override get message(): string {
    return this.holder === this.runner
      ? `the route to runner ${this.holder} moved to another runner while the call ran`
      : `runner ${this.runner} does not hold this Group (its holder is ${this.holder})`
  }
}

/**
 * The runner a Group was placed on by room refused it at the Group's first poll (docs/scale-out.md "Capacity"): it is
 * full, draining, or too small for the Group (`decision`, with its room after the decision). No Session of the Group
 * started there; the controller places the Group again, elsewhere, under new Session ids.
 */
export class PlacementRefusedError extends Schema.TaggedError<PlacementRefusedError>()("PlacementRefusedError", {
  runner: Schema.String,
  address: Schema.String,
  decision: Schema.Literals(["full", "draining", "too-small"]),
  /** Slots in use on the runner. */
  used: Schema.Int,
  /** Free slots; `null` = unlimited. */
  free: Schema.NullOr(Schema.Int),
  /** The runner's `--runner-slots`; `null` = unlimited. */
  capacity: Schema.NullOr(Schema.Int)
}) {
  override get message(): string {
    return `runner ${this.address} refused the Group: ${this.decision}` +
      (this.capacity === null ? "" : ` (${this.free ?? 0}/${this.capacity} slots free)`) +
      "; it is placed again on another runner"
  }
}

/** A Session failed on its runner: the runner's typed error, by tag and text (it drops the Group, as in one process). */
export class SessionFailedError extends Schema.TaggedError<SessionFailedError>()("SessionFailedError", {
  type: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return this.detail
  }
}

/** A runner could not carry out a fleet command (its engine refused a weight change): the detail names why. */
export class FleetCommandError extends Schema.TaggedError<FleetCommandError>()("FleetCommandError", {
  /** `engine`: the runner's engine refused to pause, resume or update. */
  reason: Schema.Literal("engine"),
  runner: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `runner ${this.runner} could not follow the controller: ${this.detail}`
  }
}

/**
 * A member's sample-changing settings differ from the live members' it must agree with (docs/scale-out.md "One
 * configuration"): a runner joining while a controller with other settings runs, or a controller starting while
 * runners with other settings are up. It is refused at join, naming the first differing flag.
 */
export class ConfigMismatchError extends Data.TaggedError("ConfigMismatchError")<{
  readonly reason: "runner" | "controller"
  /** The first differing flag, both values and what to do. */
  readonly detail: string
}> {
  override get message(): string {
    return this.detail
  }
}
