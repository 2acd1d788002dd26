/**
 * The controller's hold on every runner at once (docs/scale-out.md "Weights and the step boundary"): a trainer's
 * weight update, pause and resume, and the step boundary of partial rollout / fully async, reach every runner, and
 * the runners' generation-gate states come back to the controller's step ledger.
 *
 * **Details**
 * - A fleet command goes to one Group entity of every shard (ids found once by hashing `fleet-<n>` until every shard
 *   has one), so every runner owning a shard receives it, most several times; each command carries a sequence
 *   number, and a runner answers the repeats of a command with its first delivery's reply (`Host.fleet`). Every call
 *   has the controller's deadline; a shard whose call passes it (its runner died, the shard is moving) is logged and
 *   skipped: that runner's Groups are lost anyway, and a runner that joins later follows the weights at its first
 *   `Grant`, which carries them.
 * - {@link engineLayer} wraps the controller's Engine: `updateWeights` / `resumeGeneration` run on the controller's
 *   engine first (with SGLang: the servers every runner shares), then every runner follows the new version; a
 *   `pauseGeneration` holds the runners first, then the controller's engine. A runner follows with its own engine
 *   (embedded: aborts or holds its generations, as one process does) and stops or restarts its agents' active-time
 *   budgets.
 * - {@link gateLayer} is the controller's `GenerationGate`: the rollout's `pause` / `resumeStep` at a step boundary
 *   become `Halt` / `Resume` on every runner, whose gates park and resume their Sessions as one process's gate does;
 *   the Sessions' interrupted / protected states arrive with their event streams (`Gate` events, kept here by
 *   {@link FleetShape.setGate}) and with `Halt`'s replies, and a `pause` waits until no protected Session is left.
 */
import { Context, Deferred, Duration, Effect, Layer, Schedule, Semaphore } from "effect"
import { Sharding } from "effect/cluster"
import { randomBytes } from "node:crypto"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import type * as Retention from "../../src/schedule/Retention.ts"
import * as Engine from "../engine/Engine.ts"
import * as GenerationGate from "../schedule/GenerationGate.ts"
import * as Directory from "./Directory.ts"
import * as GroupEntity from "./GroupEntity.ts"

/** The controller's fleet settings. */
export interface FleetOptions {
  /** Deadline of one call. */
  readonly callTimeout: Duration.Duration
  /** `--cluster-shards`: every shard gets the command. */
  readonly shards: number
}

export interface FleetShape {
  /** This controller's run id (Group keys and fleet commands carry it). */
  readonly controller: string
  /** The weights every runner must follow now (a `Grant` carries them). */
  readonly weights: Effect.Effect<ClusterWire.WeightsState>
  /** The weights at the start (no runner is told: the first `Grant` carries them). */
  readonly startWeights: (version: string) => void
  /** Change the weights (`seq` is assigned here) and make every runner follow them. */
  readonly setWeights: (
    version: string,
    paused: ClusterWire.WeightsState["paused"]
  ) => Effect.Effect<void, ClusterError.FleetCommandError>
  /** Send `command` to every runner; one reply per runner that answered. */
  readonly broadcast: (
    command: ClusterWire.FleetCommand
  ) => Effect.Effect<ReadonlyArray<ClusterWire.FleetReply>, ClusterError.FleetCommandError>
  /** A Session's gate state as its runner reported it. */
  readonly setGate: (sessionId: string, state: ClusterWire.GateState) => void
  /** The Session ended here: forget its state. */
  readonly forget: (sessionId: string) => void
  readonly gateOf: (sessionId: string) => ClusterWire.GateState | undefined
  /** Called whenever a Session's gate state changed (or it ended). */
  readonly onChange: (listener: () => void) => void
  /** Completes once no Session of this controller is protected (a step's close waits for them, as in one process). */
  readonly awaitUnprotected: Effect.Effect<void>
}

/** The fleet (see the module comment). */
export class Fleet extends Context.Service<Fleet, FleetShape>()("relax-agentic/Fleet") {}

const make = (options: FleetOptions) =>
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const makeClient = yield* GroupEntity.Group.client
    const controller = randomBytes(8).toString("hex")
    const targets = Directory.shardKeys(sharding, options.shards)
    const lock = yield* Semaphore.make(1)
    let seq = 0
    let weights: ClusterWire.WeightsState = { seq: 0, version: "0", paused: null }
    const gates = new Map<string, ClusterWire.GateState>()
    const listeners: Array<() => void> = []
    let unprotected: Deferred.Deferred<void> | undefined

    const changed = () => {
      for (const listener of listeners) listener()
      if (unprotected !== undefined && ![...gates.values()].some((g) => g.protected)) {
        Deferred.doneUnsafe(unprotected, Effect.void)
        unprotected = undefined
      }
    }

    const send = (id: string, payload: typeof GroupEntity.Fleet.payloadSchema.Type) =>
      makeClient(id).Fleet(payload).pipe(
        Effect.retry({
          while: (error) =>
            error._tag === "MailboxFull" || error._tag === "EntityNotAssignedToRunner" ||
            error._tag === "AlreadyProcessingMessage",
          schedule: Schedule.spaced(Duration.millis(500)),
          times: 10
        }),
        Effect.timeoutOrElse({
          duration: options.callTimeout,
          orElse: () => Effect.fail(new ClusterError.ClusterCallError({ reason: "deadline", detail: `Fleet ${id}` }))
        }),
        Effect.catchTag(
          [
            "ClusterCallError",
            "MailboxFull",
            "EntityNotAssignedToRunner",
            "AlreadyProcessingMessage",
            "PersistenceError"
          ],
          (error) =>
            Effect.as(
              Effect.logWarning(
                `fleet command ${payload.command._tag} #${payload.seq} did not reach the runner of ${id}: ${error._tag}`
              ),
              undefined
            )
        )
      )

    const broadcast = (command: ClusterWire.FleetCommand) =>
      lock.withPermits(1)(Effect.gen(function*() {
        seq += 1
        const payload = { controller, seq, command }
        const replies = yield* Effect.forEach(targets, (id) => send(id, payload), { concurrency: "unbounded" })
        const byRunner = new Map<string, ClusterWire.FleetReply>()
        for (const reply of replies) if (reply !== undefined) byRunner.set(reply.runner, reply)
        return [...byRunner.values()]
      }))

    return {
      controller,
      weights: Effect.sync(() => weights),
      startWeights: (version) => {
        weights = { ...weights, version }
      },
      setWeights: (version, paused) =>
        Effect.gen(function*() {
          weights = { seq: weights.seq + 1, version, paused }
          yield* broadcast({ _tag: "Weights", state: weights })
        }),
      broadcast,
      setGate: (sessionId, state) => {
        gates.set(sessionId, state)
        changed()
      },
      forget: (sessionId) => {
        if (gates.delete(sessionId)) changed()
      },
      gateOf: (sessionId) => gates.get(sessionId),
      onChange: (listener) => {
        listeners.push(listener)
      },
      awaitUnprotected: Effect.suspend(() => {
        if (![...gates.values()].some((g) => g.protected)) return Effect.void
        const waiter = unprotected ?? Deferred.makeUnsafe<void>()
        unprotected = waiter
        return Deferred.await(waiter)
      })
    } satisfies FleetShape
  })

/** The fleet of a client-only member (the controller). */
export const layer = (options: FleetOptions): Layer.Layer<Fleet, never, Sharding.Sharding> =>
  Layer.effect(Fleet, make(options))

const engineFailure = (error: ClusterError.FleetCommandError) =>
  new Engine.EngineError({ reason: "refused", detail: error.message })

/**
 * The controller's Engine, whose weight changes every runner follows (see the module comment); everything else is
 * the controller's own engine.
 */
export const engineLayer: Layer.Layer<Engine.Engine, never, Engine.Engine | Fleet> = Layer.effect(
  Engine.Engine,
  Effect.gen(function*() {
    const engine = yield* Engine.Engine
    const fleet = yield* Fleet
    const lock = yield* Semaphore.make(1)
    // The runners start from the controller's version (the first Grant carries it).
    fleet.startWeights(yield* engine.weightVersion)
    const follow = (paused: ClusterWire.WeightsState["paused"]) => (version: string) =>
      Effect.as(Effect.mapError(fleet.setWeights(version, paused), engineFailure), version)
    return {
      ...engine,
      updateWeights: (version) => lock.withPermits(1)(Effect.flatMap(engine.updateWeights(version), follow(null))),
      pauseGeneration: (mode) =>
        lock.withPermits(1)(Effect.gen(function*() {
          // The runners hold their generations first, so none starts again on the servers being paused.
          yield* follow(mode)(yield* engine.weightVersion)
          yield* engine.pauseGeneration(mode)
        })),
      resumeGeneration: (version) => lock.withPermits(1)(Effect.flatMap(engine.resumeGeneration(version), follow(null)))
    } satisfies Engine.EngineShape
  })
)

/**
 * The controller's generation gate: the step boundary of partial rollout / fully async on every runner (see the
 * module comment). Sessions never run on the controller, so nothing registers with its local gate.
 */
export const gateLayer = (
  mode: Retention.Mode
): Layer.Layer<GenerationGate.GenerationGate, never, Engine.Engine | Fleet> =>
  Layer.effect(
    GenerationGate.GenerationGate,
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const fleet = yield* Fleet
      const local = yield* GenerationGate.make({ abort: engine.abort, mode })
      const retains = mode.partialRollout || mode.fullyAsync
      let open = true
      const halt = Effect.gen(function*() {
        open = false
        const replies = yield* fleet.broadcast({ _tag: "Halt" }).pipe(Effect.orDie)
        let aborted = 0
        let pausedSessions = 0
        for (const reply of replies) {
          aborted += reply.aborted
          pausedSessions += reply.pausedSessions
          // The states right after the halt, before any later event of the Sessions' streams.
          for (const s of reply.sessions) {
            if (fleet.gateOf(s.sessionId) !== undefined) fleet.setGate(s.sessionId, s.state)
          }
        }
        return { aborted, pausedSessions } satisfies GenerationGate.PauseReport
      })
      const resumeStep = (rolloutId: number | null) =>
        Effect.gen(function*() {
          yield* fleet.broadcast({ _tag: "Resume", rolloutId }).pipe(Effect.orDie)
          open = true
        })
      if (!retains) return { ...local, resumeStep: () => local.resume } satisfies GenerationGate.GenerationGateShape
      return {
        ...local,
        halt,
        pause: Effect.tap(halt, () => fleet.awaitUnprotected),
        resume: resumeStep(null),
        resumeStep,
        isOpen: () => open,
        isInterrupted: (sessionId) => fleet.gateOf(sessionId)?.interrupted ?? false,
        isProtected: (sessionId) => fleet.gateOf(sessionId)?.protected ?? false,
        onChange: fleet.onChange
      } satisfies GenerationGate.GenerationGateShape
    })
  )
