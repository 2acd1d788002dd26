/**
 * One Group's life as the Group pool runs it: Prepare → Runtime of each Session, then Reward of the whole Group
 * (docs/runtime.md "The path of a Session").
 *
 * **Details**
 * A Session is registered with `Sessions` (its `awaitLease` joins the Group's first-request barrier), gets an empty
 * SessionForest, and runs its agent through the `Supervisor` with an active-time budget started when the Group gets its
 * Runtime lease; when the Session ends, the engine is told (`Engine.closeSession`). With partial rollout or fully
 * async a training Session is also registered with the generation gate, which parks its requests and pauses its budget
 * between steps. When the agent exits, its exports (implicit leaf or explicit records) become training samples;
 * `Credit` scores the Group (reward, custom advantage or GRPO; a `null` hook result filters it). A Session that fails,
 * an export that does not match and a Reward error fail with a `GroupError`, which drops the Group.
 */
import { Clock, Context, Effect, Layer, Metric, Option } from "effect"
import type * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Settings from "../../src/config/Settings.ts"
import type * as CreditGroup from "../../src/credit/Group.ts"
import type * as Drift from "../../src/forest/Drift.ts"
import * as Export from "../../src/forest/Export.ts"
import * as ForestError from "../../src/forest/ForestError.ts"
import * as Sample from "../../src/forest/Sample.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import type * as GenerationError from "../../src/generation/GenerationError.ts"
import * as ForestDump from "../../src/inspect/ForestDump.ts"
import * as Timeline from "../../src/replay/Timeline.ts"
import type * as Records from "../../src/rollout/Records.ts"
import type * as Dataset from "../../src/schedule/Dataset.ts"
import type * as AgentSpec from "../../src/session/AgentSpec.ts"
import type * as SessionError from "../../src/session/SessionError.ts"
import * as SessionInput from "../../src/session/SessionInput.ts"
import * as Credit from "../credit/Credit.ts"
import * as Engine from "../engine/Engine.ts"
import * as Forests from "../generation/Forests.ts"
import * as ReplayRecorder from "../generation/ReplayRecorder.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as Telemetry from "../observability/Telemetry.ts"
import * as FirstRequestBarrier from "../schedule/FirstRequestBarrier.ts"
import * as GenerationGate from "../schedule/GenerationGate.ts"
import * as PoolContract from "../schedule/PoolContract.ts"
import * as Sessions from "../schedule/Sessions.ts"
import type * as ActiveBudget from "../session/ActiveBudget.ts"
import * as Supervisor from "../session/Supervisor.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as VisionInputs from "../vision/VisionInputs.ts"
import * as RolloutConfig from "./RolloutConfig.ts"

/** One Group as planned from the dataset. */
export interface PlannedGroup extends PoolContract.GroupLike {
  readonly seq: number
  readonly mode: AgentSpec.RolloutMode
  /** Dataset row index. */
  readonly row: number
  readonly data: Dataset.Row
  /** Prompt index (Eval: position in the dataset; train: the Group's sequence number). */
  readonly promptIndex: number
  /** Sample index of the Group's first Session. */
  readonly firstIndex: number
}

/** What a Session leaves behind: its exported samples (in export order) and their debug facts. */
export interface SessionResult {
  readonly sessionId: string
  readonly samples: ReadonlyArray<TrainingSample.TrainingSample>
  readonly debug: ReadonlyArray<Records.ContextDebug>
}

/** A scored Group. */
export interface GroupResult {
  readonly group: PlannedGroup
  readonly samples: ReadonlyArray<TrainingSample.TrainingSample>
  readonly debug: ReadonlyArray<Records.ContextDebug>
}

/** Why a Session or Group was dropped. */
export type GroupError =
  | GenerationError.ImageRejectedError
  | SessionError.AgentExecutionError
  | SessionError.SessionInputError
  | ForestError.ExportError
  | Credit.CreditError
  | ForestError.ForestNotFoundError
  | ForestError.ForestInvariantError
  | ClusterWire.RunnerLostError
  | ClusterWire.SessionFailedError
  | ClusterError.ClusterCallError
  | ClusterError.PlacementRefusedError

export interface SessionRunnerShape
  extends PoolContract.GroupRunner<PlannedGroup, SessionResult, GroupResult, GroupError>
{
  /** `error_type=` and detail text of a drop, for the Group pool's drop log line. */
  readonly describeError: (error: GroupError) => { readonly type: string; readonly detail: string }
  /**
   * Tool calls the parser dropped or could not read in the training Sessions that ended since the last call, whatever
   * became of their Groups (accepted, filtered, dropped or stopped); resets the count.
   */
  readonly takeParserFailures: Effect.Effect<number>
  /**
   * Model requests whose echoed history diverged from a committed response, by cause, in the training Sessions that
   * ended since the last call (`rollout/drift/...`); resets the counts.
   */
  readonly takeDrift: Effect.Effect<ReadonlyMap<Drift.Cause, number>>
}

/** Add a Session's drift counts (by cause) to a running total. */
export const addDrift = (total: Map<Drift.Cause, number>, counts: ReadonlyMap<Drift.Cause, number> | undefined) => {
  for (const [cause, n] of counts ?? []) total.set(cause, (total.get(cause) ?? 0) + n)
}

/** Reward of a finished Group: credit scores it, or filters it (also what a cluster controller runs). */
export const rewardWith = (credit: Context.Service.Shape<typeof Credit.Credit>) =>
  Effect.fn("SessionRunner.reward")(function*(group: PlannedGroup, outcomes: ReadonlyArray<SessionResult>) {
    const at = yield* Clock.currentTimeMillis
    const scored = yield* credit.scoreGroup(
      {
        groupIndex: group.promptIndex,
        sessions: outcomes.map((o): CreditGroup.Session => ({ sessionId: o.sessionId, exports: o.samples }))
      },
      group.mode
    )
    if (scored === "filtered") return PoolContract.filtered()
    // The Group's Reward goes into each Session's replay record (its time: docs/debugging.md "Where the time went").
    const reward = { at, done_at: yield* Clock.currentTimeMillis }
    const debug = outcomes.flatMap((o) => o.debug).map((d) =>
      d.replay === undefined ? d : { ...d, replay: { ...d.replay, reward } }
    )
    if (debug.some((d) => d.replay !== undefined)) {
      yield* Metric.update(Instruments.sessionPhaseSeconds({ phase: "reward" }), (reward.done_at - reward.at) / 1000)
    }
    return PoolContract.accepted<GroupResult>({ group, samples: scored, debug })
  })

/** `error_type=` and detail of a drop; a Session that failed on a runner keeps its own error's tag. */
export const describeError = (error: GroupError) =>
  error._tag === "SessionFailedError"
    ? { type: error.type, detail: error.detail }
    : { type: error._tag, detail: error.message }

/**
 * A Session's KV admission demand (layers/admission/AdmittedEngine.ts): its scope, its admission wait counted in its
 * counters (the inspector's), and the wait held outside its active-time budget.
 */
const admissionDemand = (
  training: boolean,
  counters: Sessions.SessionCounters,
  budget: ActiveBudget.ActiveBudget
) =>
(promptTokens: number): Engine.AdmissionDemand => ({
  promptTokens,
  training,
  waited: (ms) => {
    counters.admissionWaitMs = (counters.admissionWaitMs ?? 0) + ms
  },
  outsideBudget: budget.excluding
})

const make = Effect.gen(function*() {
  const settings = yield* RolloutConfig.RolloutConfig
  const visionInputs = yield* VisionInputs.VisionInputs
  const tokenizer = yield* Tokenizer.Tokenizer
  const sessions = yield* Sessions.Sessions
  const forests = yield* Forests.Forests
  const supervisor = yield* Supervisor.Supervisor
  const credit = yield* Credit.Credit
  const telemetry = yield* Telemetry.Telemetry
  const gate = yield* GenerationGate.GenerationGate
  const retains = gate.mode.partialRollout || gate.mode.fullyAsync
  const engine = yield* Engine.Engine
  // Composed with debug dumps only (src/index.ts): each Session's replay record goes beside its forest.
  const recorder = Option.getOrUndefined(yield* Effect.serviceOption(ReplayRecorder.ReplayRecorder))

  const inputOptions: SessionInput.InputOptions = {
    inputKey: settings.inputKey,
    metadataKey: settings.metadataKey,
    labelKey: settings.labelKey,
    multimodalKeys: settings.multimodalKeys
  }
  const decode = (ids: ReadonlyArray<number>) => tokenizer.decode(ids)
  yield* Instruments.move(Instruments.agents({ state: "starting" }), 0)
  yield* Instruments.move(Instruments.agents({ state: "running" }), 0)
  let parserFailures = 0
  let drift = new Map<Drift.Cause, number>()
  const admissionOn = settings.agenticProgramAdmission

  /** Prepare + Runtime of one Session, then its exports as samples. */
  const session = Effect.fn("SessionRunner.session")(
    function*(group: PlannedGroup, ticket: FirstRequestBarrier.SessionTicket) {
      return yield* Effect.scoped(Effect.gen(function*() {
        const prepared = yield* Effect.fromResult(SessionInput.fromRow(group.data, group.row, inputOptions))
        const { sessionId } = ticket
        const eval_ = group.mode === "eval"
        // Registered before anything is created, so an interruption between the steps below cannot leak the Session's
        // forest or registry entry (both removals are no-ops for what does not exist yet).
        // The engine is told last (SGLang --agentic-session-lifecycle: /close_session), so the Session's cache goes.
        yield* Effect.addFinalizer(() =>
          sessions.close(sessionId).pipe(
            Effect.andThen(forests.remove(sessionId)),
            Effect.andThen(engine.closeSession(sessionId))
          )
        )
        yield* forests.create(sessionId, {
          groupIndex: group.promptIndex,
          index: group.firstIndex + ticket.position,
          label: prepared.label ?? null,
          metadata: prepared.metadata,
          chatTemplateKwargs: settings.applyChatTemplateKwargs
        })
        const counters = Sessions.emptyCounters()
        if (!eval_) {
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              parserFailures += counters.parserFailures + counters.droppedToolCalls
              addDrift(drift, counters.drift)
            })
          )
        }
        // The Session's span: its model requests' traces link to it (docs/observability.md, "Traces").
        yield* Effect.annotateCurrentSpan({ sessionId, groupId: group.groupId, mode: group.mode })
        const span = yield* Effect.currentSpan.pipe(Effect.orElseSucceed(() => undefined))
        const budget = yield* supervisor.makeBudget
        yield* gate.trackBudget(budget)
        const sessionGate = !eval_ && retains ? yield* gate.register(sessionId, budget) : undefined
        if (recorder !== undefined) {
          yield* recorder.begin(sessionId)
          yield* Effect.addFinalizer(() => Effect.asVoid(recorder.take(sessionId, () => true)))
        }
        yield* sessions.register({
          sessionId,
          groupId: group.groupId,
          mode: group.mode,
          sampling: eval_
            ? Settings.evalSampling(settings, ticket.position)
            : Settings.trainSampling(settings, ticket.position),
          maxContextLen: eval_ ? Settings.evalMaxContextLen(settings) : settings.rolloutMaxContextLen,
          rolloutId: ticket.rolloutId,
          awaitLease: ticket.awaitLease,
          leaseHeld: ticket.leaseHeld,
          gate: sessionGate,
          admission: admissionOn ? admissionDemand(!eval_, counters, budget) : undefined,
          counters,
          span
        })
        yield* Effect.forkScoped(ticket.leased.pipe(Effect.andThen(budget.start)))
        yield* Instruments.trackAgent(ticket.firstRequest)
        const outcome = yield* supervisor.run({
          sessionId,
          groupId: group.groupId,
          rolloutMode: group.mode,
          input: prepared,
          budget,
          firstRequest: ticket.firstRequest
        })
        yield* sessions.close(sessionId)
        for (const warning of outcome.warnings) yield* telemetry.warn(warning)
        const forest = yield* forests.get(sessionId)
        const contexts = yield* Effect.fromResult(
          outcome.output.kind === "implicit"
            ? Export.exportImplicit(forest, {
              ...(outcome.output.metadata === undefined ? {} : { metadata: outcome.output.metadata }),
              ...(outcome.output.reward === undefined ? {} : { reward: outcome.output.reward })
            })
            : Export.exportExplicit(forest, outcome.output.records, undefined, { strict: settings.strictMatch })
        )
        // Sample.build throws ForestInvariantError on a broken lineage; anything else it throws is a bug (a defect).
        const built = yield* Effect.try({
          try: () =>
            contexts.map((c) =>
              Sample.build(forest, c.hash, decode, {
                rolloutId: ticket.rolloutId(),
                exportName: c.name,
                reward: c.reward,
                metadata: c.metadata
              })
            ),
          catch: (error) => error
        }).pipe(
          Effect.catch((error) =>
            error instanceof ForestError.ForestInvariantError ? Effect.fail(error) : Effect.die(error)
          )
        )
        // Each image's pixel_values beside its grid (--multimodal-train-inputs pixels), from the images' cache.
        const samples = yield* visionInputs.attach(built)
        // The whole forest goes into the debug dump once per Session (its first context), and only when dumps are on.
        const dump = settings.saveDebugRolloutData === undefined ? undefined : ForestDump.ofForest(forest)
        const committed = new Set(dump?.nodes.flatMap((n) => n.request_id === undefined ? [] : [n.request_id]))
        const replay = recorder === undefined ? undefined : yield* recorder.take(sessionId, (rid) => committed.has(rid))
        if (replay !== undefined) {
          // Its Group's Reward is timed (and counted) once the Group is scored.
          for (const [phase, spent] of Object.entries(Timeline.totals(replay))) {
            if (phase !== "reward") yield* Metric.update(Instruments.sessionPhaseSeconds({ phase }), spent)
          }
        }
        const debug = contexts.map((c, i): Records.ContextDebug => ({
          view: Sample.debugView(forest, c.hash),
          counters,
          ...(i === 0 && dump !== undefined ? { forest: dump } : {}),
          ...(i === 0 && replay !== undefined ? { replay } : {})
        }))
        return { sessionId, samples, debug } satisfies SessionResult
      }))
    }
  )

  const reward = rewardWith(credit)

  const takeParserFailures = Effect.sync(() => {
    const taken = parserFailures
    parserFailures = 0
    return taken
  })

  const takeDrift = Effect.sync(() => {
    const taken = drift
    drift = new Map()
    return taken
  })

  return { session, reward, describeError, takeParserFailures, takeDrift } satisfies SessionRunnerShape
})

/** The Session lifecycle service the rollout's Group pools run Groups with. */
export class SessionRunner extends Context.Service<SessionRunner, SessionRunnerShape>()("relax-agentic/SessionRunner") {
  static readonly layer: Layer.Layer<
    SessionRunner,
    never,
    | RolloutConfig.RolloutConfig
    | Tokenizer.Tokenizer
    | Sessions.Sessions
    | Forests.Forests
    | Supervisor.Supervisor
    | Credit.Credit
    | Telemetry.Telemetry
    | Engine.Engine
    | GenerationGate.GenerationGate
  > = Layer.effect(SessionRunner, make)
}
