/**
 * The cluster entity of a Group: the messages the controller (and any runner forwarding an agent's request) sends to
 * the runner that holds a Group (docs/scale-out.md "How a Group runs on a runner").
 *
 * **Details**
 * Shards route placement only: `Reserve` goes to the entity of a candidate Group key (`src/cluster/Routing.ts`), and
 * the runner owning its shard takes the Group or refuses. From then on the Group lives on that runner, its holder,
 * for its whole life, and every other message names the holder's incarnation; it is sent to any entity whose shard the
 * holder owns now (at first the Group key itself; after shards moved, one the `Directory` finds). A runner that
 * receives a message for another holder refuses it with `NotHolderError`, and the sender finds the holder again, so
 * a Session whose runner died is never started again on the runner that inherited its shard. Every message is
 * volatile (never stored) and safe to deliver twice, since the cluster re-sends in-flight messages after a failover:
 * - `Reserve` asks the owner to hold `slots` agent slots for the whole Group (`--runner-slots`,
 *   `src/cluster/Slots.ts`); a full or draining runner refuses, and the controller tries another Group key. A
 *   re-delivered `Reserve` is granted again without reserving twice.
 * - `Where` answers the incarnation id and address of the runner that receives this entity's messages now; it
 *   changes nothing (the `Directory` asks it of one entity per shard).
 * - `RunGroup` (a stream of `GroupEvent`s) starts the named Sessions of the Group on its holder, or follows those
 *   already started there under their ids, and reports every Session's events on one stream (a Group's Sessions
 *   usually all at once: one request, their first requests and results in a few chunks, one end); the stream ends with
 *   `NotHolderError` when its entity's shard moves away while it runs (the Sessions go on; the controller follows them
 *   again through another entity).
 * - `PollGroup` starts or follows the named Sessions as `RunGroup` does and answers with the Group's next events, those
 *   the controller has not seen (the controller's way of following a whole Group: one request and its answer at a
 *   time instead of a stream's chunks and acknowledgements, `layers/cluster/GroupPolls.ts`). A Group placed by room
 *   needs no `Reserve`: its first poll (`place`) takes the Group's slots or refuses the Group
 *   (`PlacementRefusedError`) before any Session starts, and a refused Session id is refused again on a re-delivery.
 *   A poll that asks (`room`) gets the runner's room last in its answer, so the controller learns rooms from the
 *   Groups' traffic and asks `Where` only of runners it heard nothing from (`Directory.ts`).
 * - `PollRunner` carries the polls of several Groups on the runner (each what its `PollGroup` would say) and answers
 *   them together as soon as any has something: the controller's polls of one runner that are due together ride one
 *   message (`layers/cluster/RunnerPolls.ts`), with the receipts, the room request and the settings (one JSON text)
 *   once for all.
 * - `Grant` gives Sessions of the Group its Runtime lease (and the weight version to generate with); `Stop` ends
 *   Sessions and reaps their agents. Both are no-ops when done twice. Each names the Group's Sessions it is for, all
 *   of them at once when they happen together (`layers/cluster/GroupCalls.ts`).
 * - `Touch` says the controller still owns the named Sessions; a Session untouched for a while is reaped (its
 *   controller died).
 * - `Received` says the controller holds the end of the named Sessions (a `PollGroup` answer carried it): the runner
 *   forgets them (receipts also ride the next `PollGroup` to the runner).
 * - `Forward` carries an agent's model request that reached another runner's gateway (`layers/cluster/Forward.ts`).
 * - `Fleet` is a controller's command to every runner: follow its weights (a trainer's update, pause, resume), or
 *   the step boundary of partial rollout / fully async (`layers/cluster/Fleet.ts`).
 */
import { Schema } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"

/** Hold `slots` agent slots for this Group's Sessions on the owner, or say why not. */
export const Reserve = Rpc.make("Reserve", {
  /** `group`: the Group key the slots are for (its Sessions' ids carry it); any entity of the runner may be asked. */
  payload: { slots: Schema.Int, group: Schema.String },
  success: Schema.Struct({
    runner: Schema.String,
    address: Schema.String,
    decision: Schema.Literals(["granted", "full", "draining", "too-small"]),
    /** Slots in use after the decision (hosted Sessions plus reserved ones). */
    used: Schema.Int,
    /** Free slots after the decision; `null` = unlimited. */
    free: Schema.NullOr(Schema.Int),
    /** The runner's `--runner-slots`; `null` = unlimited. */
    capacity: Schema.NullOr(Schema.Int)
  })
})

/** Which runner receives this entity's messages now. */
export const Where = Rpc.make("Where", {
  success: Schema.Struct({
    runner: Schema.String,
    address: Schema.String,
    /** Its room (placement by room): slots in use, free slots (`null` = unlimited), whether it drains. */
    used: Schema.Int,
    free: Schema.NullOr(Schema.Int),
    draining: Schema.Boolean
  })
})

/**
 * Run the named Sessions of the Group on its holder (or follow the ones already running there), with one event stream
 * for all of them.
 */
export const RunGroup = Rpc.make("RunGroup", {
  payload: {
    runner: Schema.String,
    /** The controller's run id: its fleet commands (`Fleet`) apply to its own Sessions only. */
    controller: Schema.String,
    group: ClusterWire.PlannedGroup,
    sessions: Schema.Array(ClusterWire.GroupSession),
    /** The controller's sample-changing settings (`src/cluster/Fingerprint.ts`); a runner that differs refuses. */
    config: Schema.Record(Schema.String, Schema.String)
  },
  success: ClusterWire.GroupEvent,
  error: ClusterWire.RunFailure,
  stream: true
})

/**
 * The Group's next events, one message each way (the controller's way of following a whole Group, `Remote.group`):
 * starts the named Sessions on their holder (or follows those already running there) and answers with what happened
 * that the controller has not seen (`PolledSession`), as soon as there is something (the events of a few
 * milliseconds together), or with no event after `aliveInterval` (the runner is there; the controller asks again).
 * A Session whose end an answer carries is forgotten by the runner a little later, without a `Stop`.
 */
export const PollGroup = Rpc.make("PollGroup", {
  payload: {
    runner: Schema.String,
    controller: Schema.String,
    /**
     * The Group and the controller's sample-changing settings, which the Sessions a poll starts need: sent with the
     * Group's placing polls (`place`), omitted by those that follow Sessions already running (a poll without them
     * starts no Session).
     */
    group: Schema.optionalKey(ClusterWire.PlannedGroup),
    sessions: Schema.Array(ClusterWire.PolledSession),
    config: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
    /** The Group's Runtime lease, when it came while no poll was out: the named Sessions are granted first. */
    grant: Schema.NullOr(ClusterWire.PolledGrant),
    /**
     * Sessions of any Group on this runner whose end the controller received (see `Received`): the runner forgets
     * them. Optional: a controller from before it sends none (a rolling update replaces the runners first).
     */
    received: Schema.optionalKey(Schema.Array(Schema.String)),
    /**
     * The Group's placing poll (until one was answered): the runner takes the whole Group (as `Reserve` would) before
     * it starts any named Session, or refuses it (`PlacementRefusedError`: full, draining, too small). Absent (an
     * earlier controller, which reserved first): `false`.
     */
    place: Schema.optionalKey(Schema.Boolean),
    /**
     * Answer with the runner's room as the last event (`Room`), so the controller learns it from the Group's traffic
     * instead of asking `Where`. Absent (an earlier controller): no `Room`.
     */
    room: Schema.optionalKey(Schema.Boolean)
  },
  success: Schema.Array(ClusterWire.PolledEvent),
  error: ClusterWire.PollFailure
})

/**
 * The next events of several Groups on one runner, one message each way (`layers/cluster/RunnerPolls.ts`): each poll
 * (`RunnerPoll`) is what a `PollGroup` of its Group would say, and the answer comes as soon as any of them has
 * something (the events of a few milliseconds together), carrying every Group's new events in its poll's place (none
 * for a Group that had nothing yet: the controller asks again), or none after `aliveInterval`. The controller's polls
 * of the same runner that are due together ride one message: a runner's Groups that answer together cost one round
 * trip instead of one each. A runner older than it does not know it: a rolling update replaces the runners first.
 */
export const PollRunner = Rpc.make("PollRunner", {
  payload: {
    runner: Schema.String,
    controller: Schema.String,
    polls: Schema.Array(ClusterWire.RunnerPoll),
    /**
     * The controller's sample-changing settings as one JSON text (`Fingerprint.toText`): sent when a poll places its
     * Group (its Sessions start); a runner whose settings differ refuses those Groups.
     */
    config: Schema.optionalKey(Schema.String),
    /** Sessions of any Group on this runner whose end the controller received (see `Received`). */
    received: Schema.optionalKey(Schema.Array(Schema.String)),
    /** Answer with the runner's room (`room`), so the controller learns it from the traffic instead of `Where`. */
    room: Schema.optionalKey(Schema.Boolean)
  },
  success: ClusterWire.RunnerPollAnswers,
  error: ClusterWire.RunFailure
})

/**
 * The Group holds its Runtime lease: the named Sessions' requests may generate, under `rolloutId` and the controller's
 * weights (`weights`: a runner that missed a fleet command follows them before it generates).
 */
export const Grant = Rpc.make("Grant", {
  payload: {
    runner: Schema.String,
    controller: Schema.String,
    sessionIds: Schema.Array(Schema.String),
    rolloutId: Schema.Int,
    weights: ClusterWire.WeightsState
  },
  error: Schema.Union([ClusterError.NotHolderError, ClusterError.FleetCommandError])
})

/** End the Sessions and reap their agents (a dropped Group, a closed step, a finished Session's cleanup). */
export const Stop = Rpc.make("Stop", {
  payload: { runner: Schema.String, sessionIds: Schema.Array(Schema.String) },
  error: ClusterError.NotHolderError
})

/**
 * The controller received the end of these Sessions (a `PollGroup` answer carried it): the runner forgets them. A
 * poll's answer is not acknowledged by the cluster, so the runner keeps an answered end until this receipt (riding the
 * controller's next `PollGroup` to the runner, or sent on its own when none goes within a second) or, when the receipt
 * is lost, for twice the call deadline: a poll repeated after a lost answer finds the ends again.
 */
export const Received = Rpc.make("Received", {
  payload: { runner: Schema.String, sessionIds: Schema.Array(Schema.String) },
  error: ClusterError.NotHolderError
})

/**
 * The controller still owns the Sessions (sent every few seconds while they run): a runner reaps a Session no
 * controller touched for a while, so a controller killed with SIGKILL does not leave agents running.
 */
export const Touch = Rpc.make("Touch", {
  payload: { runner: Schema.String, sessionIds: Schema.Array(Schema.String) },
  error: ClusterError.NotHolderError
})

/** An agent's model request, forwarded as it arrived, and the holder's answer (the holder is named in its Session id). */
export const Forward = Rpc.make("Forward", {
  payload: ClusterWire.ForwardedRequest,
  success: ClusterWire.ForwardedResponse,
  error: ClusterError.NotHolderError
})

/**
 * A controller's command to every runner (sent to one entity of every shard, so every runner owning a shard gets it,
 * most several times: `seq` makes the repeats no-ops that answer the first delivery's reply).
 */
export const Fleet = Rpc.make("Fleet", {
  payload: { controller: Schema.String, seq: Schema.Int, command: ClusterWire.FleetCommand },
  success: ClusterWire.FleetReply,
  error: ClusterError.FleetCommandError
})

/** The Group entity. */
export const Group = Entity.make("RelaxGroup", [
  Reserve,
  Where,
  RunGroup,
  PollGroup,
  Grant,
  Stop,
  Touch,
  Received,
  Forward,
  Fleet,
  PollRunner
])
