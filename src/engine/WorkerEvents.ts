/**
 * What happens to SGLang workers during a rollout, as the trainer sees it: a worker went down, came back holding other
 * weights than the fleet (it needs the trainer's next update), or came back in step with the fleet.
 *
 * **Details**
 * A restarted SGLang holds the checkpoint it was launched with, not the trained weights: it gets no request until its
 * weight version equals the fleet's. `WorkerNeedsWeights` tells the trainer so; the worker is taken back once the
 * trainer's next update reaches it (`WorkerBack`). docs/sglang.md, "When a worker dies".
 */
import { Schema } from "effect"

/** A worker stopped answering (connection refused or reset): it gets no request and is probed with back-off. */
export const WorkerDown = Schema.TaggedStruct("WorkerDown", {
  url: Schema.String,
  /** What failed (the connection error). */
  detail: Schema.String
})
export type WorkerDown = typeof WorkerDown.Type

/**
 * A worker answers again but holds `weightVersion`, not the fleet's `fleetVersion`: it gets no request until the
 * trainer's next update reaches it (push its weights, then update or resume as usual).
 */
export const WorkerNeedsWeights = Schema.TaggedStruct("WorkerNeedsWeights", {
  url: Schema.String,
  weightVersion: Schema.String,
  fleetVersion: Schema.String
})
export type WorkerNeedsWeights = typeof WorkerNeedsWeights.Type

/** A worker is used again: it answered with the fleet's weight version. */
export const WorkerBack = Schema.TaggedStruct("WorkerBack", {
  url: Schema.String,
  weightVersion: Schema.String
})
export type WorkerBack = typeof WorkerBack.Type

export const WorkerEvent = Schema.Union([WorkerDown, WorkerNeedsWeights, WorkerBack])
export type WorkerEvent = typeof WorkerEvent.Type

/** The workers that are not serving now. */
export const WorkerReport = Schema.Struct({
  /** Down: not answering, probed with back-off. */
  down: Schema.Array(Schema.String),
  /** Back, but on other weights than the fleet's: waiting for the trainer's next update. */
  needsWeights: Schema.Array(WorkerNeedsWeights)
})
export type WorkerReport = typeof WorkerReport.Type

/** No worker is out. */
export const allServing: WorkerReport = { down: [], needsWeights: [] }

/** The log line of an event. */
export const describe = (event: WorkerEvent): string => {
  switch (event._tag) {
    case "WorkerDown":
      return `SGLang worker ${event.url} is down (${event.detail}): its attempts move to the live workers, its ` +
        "Sessions move, and it is probed with back-off"
    case "WorkerNeedsWeights":
      return `SGLang worker ${event.url} is back but holds weight version ${event.weightVersion}, not the fleet's ` +
        `${event.fleetVersion}: it gets no request until the trainer's next weight update reaches it`
    case "WorkerBack":
      return `SGLang worker ${event.url} is back on weight version ${event.weightVersion} and serves again`
  }
}
