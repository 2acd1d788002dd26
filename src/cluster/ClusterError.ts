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
  /** The message (`Place`, `RunSession`, `Grant`) and what happened. */
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
 * A message named a runner incarnation that is not the one now owning the Group's shard: the runner that held the
 * Group died (or left), and the Group is lost with it.
 */
export class RunnerLostError extends Schema.TaggedError<RunnerLostError>()("RunnerLostError", {
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message(): string {
    return `the runner ${this.expected} that held this Group is gone (the Group's shard is now on ${this.actual}); ` +
      "the Group is dropped and refilled"
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
