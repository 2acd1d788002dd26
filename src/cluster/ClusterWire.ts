/**
 * What the controller and the runners of a cluster send each other (docs/scale-out.md): the Schemas of a planned
 * Group, a finished Session's samples and debug facts, the events of a Group's running Sessions, and the failures a
 * runner reports.
 *
 * **Details**
 * Every value that crosses a process boundary is one of these Schemas; the cluster serializes them (entity messages
 * are serialized even in the in-memory test runner). `SessionResult` carries the Session's training samples in the
 * shape a trainer receives them (`TrainingSample`), so the controller scores and transfers them exactly as in
 * single-process mode. A runner identifies itself by an incarnation id (random per process start): a message that
 * names another incarnation is refused with `NotHolderError`, never run against an empty forest; its sender finds the
 * holder again, or, when no live runner is that incarnation, drops the Group (`RunnerLostError`).
 */
import { Schema } from "effect"
import * as WeightVersion from "../engine/WeightVersion.ts"
import * as DebugView from "../forest/DebugView.ts"
import * as TrainingSample from "../forest/TrainingSample.ts"
import * as ForestDump from "../inspect/ForestDump.ts"
import * as ReplayRecord from "../replay/Record.ts"
import * as Dataset from "../schedule/Dataset.ts"
import * as AgentSpec from "../session/AgentSpec.ts"
import * as ClusterError from "./ClusterError.ts"

export { NotHolderError, PlacementRefusedError, RunnerLostError, SessionFailedError } from "./ClusterError.ts"

/** A Group as the controller planned it (`SessionRunner.PlannedGroup`). */
export const PlannedGroup = Schema.Struct({
  groupId: Schema.String,
  size: Schema.Int,
  seq: Schema.Int,
  mode: AgentSpec.RolloutMode,
  row: Schema.Int,
  data: Dataset.Row,
  promptIndex: Schema.Int,
  firstIndex: Schema.Int
})
export type PlannedGroup = typeof PlannedGroup.Type

/** `Records.ContextDebug`: the debug facts of one exported context. */
export const ContextDebug = Schema.Struct({
  view: DebugView.DebugView,
  counters: Schema.Struct({
    requests: Schema.Int,
    generations: Schema.Int,
    parserFailures: Schema.Int,
    droppedToolCalls: Schema.Int
  }),
  /**
   * With debug dumps, on a Session's first context: its whole forest and its replay record (docs/debugging.md), as
   * the JSON text the dump holds (their one-pass array Schemas have no binary layout).
   */
  forest: Schema.optionalKey(Schema.fromJsonString(ForestDump.ForestDump)),
  replay: Schema.optionalKey(Schema.fromJsonString(ReplayRecord.SessionRecord))
})
export type ContextDebug = typeof ContextDebug.Type

/** A finished Session: its samples in export order, their debug facts, its parser failures and drift (training only). */
export const SessionResult = Schema.Struct({
  sessionId: Schema.String,
  samples: Schema.Array(TrainingSample.WireSample),
  debug: Schema.Array(ContextDebug),
  parserFailures: Schema.Int,
  /** Drifted requests by cause (src/inspect/Drift.ts), training only; absent: none (or an older runner). */
  drift: Schema.optionalKey(Schema.Record(Schema.String, Schema.Int))
})
export type SessionResult = typeof SessionResult.Type

/** A hosted Session's state at the generation gate (partial rollout / fully async). */
export const GateState = Schema.Struct({
  interrupted: Schema.Boolean,
  protected: Schema.Boolean
})
export type GateState = typeof GateState.Type

/**
 * What a runner reports on a Group's event stream (`RunGroup`), each event naming its Session: its first model request,
 * its gate state whenever it changes (partial rollout / fully async), and how it ended (`Done` with its result, or
 * `Failed` with why: it failed, was stopped, or was refused); `Alive` (the stream's, every 2 s) says the runner is still
 * there. The stream ends once every Session it follows has ended.
 */
export const GroupEvent = Schema.Union([
  Schema.TaggedStruct("FirstRequest", { sessionId: Schema.String }),
  Schema.TaggedStruct("Alive", {}),
  Schema.TaggedStruct("Gate", { sessionId: Schema.String, state: GateState }),
  Schema.TaggedStruct("Done", { sessionId: Schema.String, result: SessionResult }),
  Schema.TaggedStruct("Failed", { sessionId: Schema.String, type: Schema.String, detail: Schema.String })
])
export type GroupEvent = typeof GroupEvent.Type

/**
 * A runner's room, last in a `PollGroup` answer when the poll asked for it (`room`): slots in use (hosted Sessions plus
 * reserved ones), free slots (`null` = unlimited), whether it drains; what `Where` answers, learned from traffic.
 */
export const RoomEvent = Schema.TaggedStruct("Room", {
  used: Schema.Int,
  free: Schema.NullOr(Schema.Int),
  draining: Schema.Boolean
})
export type RoomEvent = typeof RoomEvent.Type

/**
 * What a `PollGroup` answers: the Group's events, and the runner's room last when the poll asked for it. `Room` comes
 * after the events a runner of an earlier version knows (the binary codec names a union member by its place), and only
 * to a poll that asked, so an earlier controller never gets one.
 */
export const PolledEvent = Schema.Union([...GroupEvent.members, RoomEvent])
export type PolledEvent = typeof PolledEvent.Type

/** A Session a `RunGroup` names: its id and its position in the Group. */
export const GroupSession = Schema.Struct({ sessionId: Schema.String, position: Schema.Int })
export type GroupSession = typeof GroupSession.Type

/**
 * A Session a `PollGroup` names, with what the controller already knows of it, so the runner reports only what is new:
 * whether its agent asked (`FirstRequest` seen) and its last gate state seen (`null`: none yet).
 */
export const PolledSession = Schema.Struct({
  sessionId: Schema.String,
  position: Schema.Int,
  arrived: Schema.Boolean,
  gate: Schema.NullOr(GateState)
})
export type PolledSession = typeof PolledSession.Type

/** The failures of a whole Group stream (a Session's own failure is its `Failed` event). */
export const RunFailure = Schema.Union([ClusterError.NotHolderError, ClusterError.SessionFailedError])
export type RunFailure = typeof RunFailure.Type

/** The failures of a `PollGroup`: a whole-Group failure, or (a placing poll) the runner's refusal of the Group. */
export const PollFailure = Schema.Union([
  ClusterError.NotHolderError,
  ClusterError.SessionFailedError,
  ClusterError.PlacementRefusedError
])
export type PollFailure = typeof PollFailure.Type

/** An agent's model request as a non-owner runner's gateway received it. */
export const ForwardedRequest = Schema.Struct({
  sessionId: Schema.String,
  path: Schema.String,
  body: Schema.Uint8Array
})
export type ForwardedRequest = typeof ForwardedRequest.Type

/**
 * The owner's answer to a forwarded request: a JSON answer (`kind: "json"`) or the frames of a Buffered-SSE answer
 * (`kind: "sse"`, written after the heartbeats the forwarding runner sent meanwhile). `gateway`: the owner's gateway
 * origin as the other runners reach it, given when the owner holds the Session (the Group's next requests are relayed
 * there directly).
 */
export const ForwardedResponse = Schema.Struct({
  kind: Schema.Literals(["json", "sse"]),
  status: Schema.Int,
  headers: Schema.Record(Schema.String, Schema.String),
  body: Schema.String,
  gateway: Schema.optional(Schema.String)
})
export type ForwardedResponse = typeof ForwardedResponse.Type

/**
 * The controller's weights as every runner must follow them: the version new generations use and whether a trainer's
 * weight push holds generation now (`paused`: its mode). `seq` grows with every change, so a late or repeated
 * message never undoes a newer one.
 */
export const WeightsState = Schema.Struct({
  seq: Schema.Int,
  version: Schema.String,
  paused: Schema.NullOr(WeightVersion.PauseMode)
})
export type WeightsState = typeof WeightsState.Type

/**
 * A Group's Runtime lease riding a `PollGroup` (what a `Grant` carries): the step it generates under and the
 * controller's weights.
 */
export const PolledGrant = Schema.Struct({ rolloutId: Schema.Int, weights: WeightsState })
export type PolledGrant = typeof PolledGrant.Type

/**
 * One Group's poll inside a runner's `PollRunner` (a `PollGroup` less what the message carries once for all its
 * Groups): the Group itself (its placing poll only), its Sessions with what the controller has seen of each, its lease
 * when one is due, and whether this poll places the Group (the runner takes its slots or refuses it).
 */
export const RunnerPoll = Schema.Struct({
  group: Schema.optionalKey(PlannedGroup),
  sessions: Schema.Array(PolledSession),
  grant: Schema.NullOr(PolledGrant),
  place: Schema.Boolean
})
export type RunnerPoll = typeof RunnerPoll.Type

/**
 * One Group's answer in a `PollRunner` answer, in its poll's place: its events the controller has not seen (none: the
 * answer came for another Group of the message, or after the runner's wait), or why the whole Group failed (`failure`:
 * the runner refused it at its placement, or its settings differ).
 */
export const RunnerPollAnswer = Schema.Struct({
  events: Schema.Array(GroupEvent),
  failure: Schema.optionalKey(PollFailure)
})
export type RunnerPollAnswer = typeof RunnerPollAnswer.Type

/** What a `PollRunner` answers: each Group's answer in its poll's place, and the runner's room when the message asked. */
export const RunnerPollAnswers = Schema.Struct({
  answers: Schema.Array(RunnerPollAnswer),
  room: Schema.optionalKey(
    Schema.Struct({ used: Schema.Int, free: Schema.NullOr(Schema.Int), draining: Schema.Boolean })
  )
})
export type RunnerPollAnswers = typeof RunnerPollAnswers.Type

/**
 * What the controller tells every runner at once (docs/scale-out.md "Weights and the step boundary"): follow its
 * weights (`Weights`), or the step boundary of partial rollout / fully async: `Halt` parks the controller's
 * generations and stops their budgets, `Resume` lets them continue under the step `rolloutId` (`null`: the same step).
 */
export const FleetCommand = Schema.Union([
  Schema.TaggedStruct("Weights", { state: WeightsState }),
  Schema.TaggedStruct("Halt", {}),
  Schema.TaggedStruct("Resume", { rolloutId: Schema.NullOr(Schema.Int) })
])
export type FleetCommand = typeof FleetCommand.Type

/** A runner's answer to a fleet command: who answered, and (after `Halt`) the gate state of its Sessions. */
export const FleetReply = Schema.Struct({
  runner: Schema.String,
  aborted: Schema.Int,
  pausedSessions: Schema.Int,
  sessions: Schema.Array(Schema.Struct({ sessionId: Schema.String, state: GateState }))
})
export type FleetReply = typeof FleetReply.Type
