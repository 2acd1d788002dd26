/**
 * A runner following its controllers' fleet commands (docs/scale-out.md "Weights and the step boundary"): the
 * weights (a trainer's update, pause, resume) and the step boundary of partial rollout / fully async, applied to this
 * runner's engine, generation gate and hosted Sessions.
 *
 * **Details**
 * Weights are followed one change at a time, and a change older than the last followed (`seq`) is ignored, so a late
 * or repeated message never undoes a newer one. A fleet command reaches a runner once per shard it owns and again on
 * the cluster's re-sends: the repeats of the last command answer its first delivery's reply.
 */
import { Deferred, Effect, Semaphore } from "effect"
import * as ClusterError from "../../src/cluster/ClusterError.ts"
import type * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import type * as Engine from "../engine/Engine.ts"
import type * as GenerationGate from "../schedule/GenerationGate.ts"
import type * as GroupEntity from "./GroupEntity.ts"

/** What the fleet commands touch of a hosted Session. */
export interface Followed {
  readonly controller: string
  leased: boolean
  rolloutId: number
}

export interface HostFleet {
  /** Follow `controller`'s weights (a fleet command, or a `Grant` carrying them). */
  readonly follow: (
    controller: string,
    state: ClusterWire.WeightsState
  ) => Effect.Effect<void, ClusterError.FleetCommandError>
  /** Answer a fleet command (its repeats answer the first delivery's reply). */
  readonly fleet: (
    payload: typeof GroupEntity.Fleet.payloadSchema.Type
  ) => Effect.Effect<ClusterWire.FleetReply, ClusterError.FleetCommandError>
}

export const make = (deps: {
  readonly incarnation: string
  /** The runner's engine is its own (not SGLang's shared servers): it follows pause, resume and version itself. */
  readonly ownEngine: boolean
  readonly engine: Engine.EngineShape
  readonly gate: GenerationGate.GenerationGateShape
  /** The hosted Sessions by id. */
  readonly sessions: () => Iterable<readonly [string, Followed]>
  readonly gateStateOf: (sessionId: string) => ClusterWire.GateState
}): HostFleet => {
  const { engine, gate, incarnation } = deps
  // One change at a time.
  const weightsLock = Semaphore.makeUnsafe(1)
  let followed: { readonly controller: string; readonly seq: number } | undefined
  let enginePaused = false
  let budgetsPaused = false
  const follow = (
    controller: string,
    state: ClusterWire.WeightsState
  ): Effect.Effect<void, ClusterError.FleetCommandError> =>
    weightsLock.withPermits(1)(Effect.gen(function*() {
      if (followed !== undefined && followed.controller === controller && state.seq <= followed.seq) return
      // SGLang's servers are shared: the controller's own calls pause, resume and relabel them for every runner,
      // and SGLang reports the version of every generation itself. An engine of this runner's own follows here.
      if (deps.ownEngine) {
        if (state.paused !== null && !enginePaused) {
          yield* engine.pauseGeneration(state.paused)
          enginePaused = true
        } else if (state.paused === null && enginePaused) {
          yield* engine.resumeGeneration(state.version)
          enginePaused = false
        } else if (state.paused === null && (yield* engine.weightVersion) !== state.version) {
          yield* engine.updateWeights(state.version)
        }
      }
      // The agents' active-time budgets stop while a trainer's push holds generation, as in one process.
      if (state.paused !== null && !budgetsPaused) {
        yield* gate.pauseBudgets
        budgetsPaused = true
      } else if (state.paused === null && budgetsPaused) {
        yield* gate.resumeBudgets
        budgetsPaused = false
      }
      followed = { controller, seq: state.seq }
    })).pipe(
      Effect.mapError((error) =>
        new ClusterError.FleetCommandError({ reason: "engine", runner: incarnation, detail: error.message })
      )
    )

  const reply = (report: { readonly aborted: number; readonly pausedSessions: number }, controller?: string) => ({
    runner: incarnation,
    aborted: report.aborted,
    pausedSessions: report.pausedSessions,
    sessions: controller === undefined
      ? []
      : [...deps.sessions()].filter(([, h]) => h.controller === controller).map(([sessionId]) => ({
        sessionId,
        state: deps.gateStateOf(sessionId)
      }))
  })

  const command = (controller: string, command: ClusterWire.FleetCommand) => {
    switch (command._tag) {
      case "Weights":
        return Effect.as(follow(controller, command.state), reply({ aborted: 0, pausedSessions: 0 }))
      case "Halt":
        // The step's close: park this controller's generations here. The controller waits for protected Sessions.
        return Effect.map(gate.halt, (report) => reply(report, controller))
      case "Resume":
        return Effect.gen(function*() {
          // Groups kept across the boundary are leased by the new step: their next turns are recorded under it.
          const rolloutId = command.rolloutId
          if (rolloutId !== null) {
            for (const [, hosted] of deps.sessions()) {
              if (hosted.controller === controller && hosted.leased) hosted.rolloutId = rolloutId
            }
          }
          yield* gate.resume
          return reply({ aborted: 0, pausedSessions: 0 })
        })
    }
  }

  // The last fleet command: its repeats (one per shard this runner owns, and re-sends) answer its reply.
  let lastFleet:
    | {
      readonly controller: string
      readonly seq: number
      readonly reply: Deferred.Deferred<ClusterWire.FleetReply, ClusterError.FleetCommandError>
    }
    | undefined
  const fleet = (payload: typeof GroupEntity.Fleet.payloadSchema.Type) =>
    Effect.suspend(() => {
      const last = lastFleet
      if (last !== undefined && last.controller === payload.controller && payload.seq <= last.seq) {
        return payload.seq === last.seq
          ? Deferred.await(last.reply)
          : Effect.succeed(reply({ aborted: 0, pausedSessions: 0 })) // an older command: superseded
      }
      const done = Deferred.makeUnsafe<ClusterWire.FleetReply, ClusterError.FleetCommandError>()
      lastFleet = { controller: payload.controller, seq: payload.seq, reply: done }
      return command(payload.controller, payload.command).pipe(
        Effect.exit,
        Effect.tap((exit) => Deferred.done(done, exit)),
        Effect.flatten
      )
    })

  return { follow, fleet }
}
