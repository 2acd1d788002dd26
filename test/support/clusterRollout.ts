/**
 * The pieces of a cluster rollout the cluster tests share: a planned Group, the rollout settings every member uses,
 * a runner's host around a scripted `SessionRunner` (the Sessions it hosts), the controller's `Remote` + `Fleet`, and a
 * controller-side Session ticket whose lease the test grants.
 */
import { Deferred, type Duration, Effect, Layer } from "effect"
import type { Sharding } from "effect/cluster"
import * as Fleet from "../../layers/cluster/Fleet.ts"
import * as Host from "../../layers/cluster/Host.ts"
import * as Remote from "../../layers/cluster/Remote.ts"
import * as Credit from "../../layers/credit/Credit.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import type * as FirstRequestBarrier from "../../layers/schedule/FirstRequestBarrier.ts"
import * as GenerationGate from "../../layers/schedule/GenerationGate.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import { creditOptions } from "../../src/index.ts"
import * as Retention from "../../src/schedule/Retention.ts"
import type * as SessionError from "../../src/session/SessionError.ts"

/**
 * A runner's `SessionRunner` whose hosted Sessions `session` scripts. A runner never scores a Group (Reward is the
 * controller's), so `reward` is a defect here.
 */
export const hostedSessions = (session: SessionRunner.SessionRunnerShape["session"]) =>
  Layer.succeed(SessionRunner.SessionRunner, {
    session,
    reward: () => Effect.die("a runner's hosted Sessions are scored by the controller, not here"),
    describeError: SessionRunner.describeError,
    takeParserFailures: Effect.succeed(0),
    takeDrift: Effect.succeed(new Map())
  })

/** A planned Group of `size` Sessions (the first prompt of a training step). */
export const plannedGroup = (size: number): SessionRunner.PlannedGroup => ({
  groupId: "train:prepare_group_0",
  size,
  seq: 0,
  mode: "train",
  row: 0,
  data: { prompt: "1+1" },
  promptIndex: 0,
  firstIndex: 0
})

/** The settings of every member (the same, so their fingerprints agree). */
export const settings = RolloutConfig.RolloutConfig.layer({
  promptData: "unused.jsonl",
  agentCommand: "true",
  rolloutBatchSize: 1
})

const engine = EmbeddedEngine.EmbeddedEngine.layer(EmbeddedEngine.instant).pipe(
  Layer.provide(Tokenizer.Tokenizer.layer)
)

/** A runner's host whose hosted Sessions run `agents`; it forwards nothing. */
export const hostLayer = (
  agents: Layer.Layer<SessionRunner.SessionRunner>,
  options: Host.HostOptions = {}
) =>
  Host.Host.layer("127.0.0.1:1", () => Effect.die("no gateway in this test"), options).pipe(
    Layer.provide(Layer.mergeAll(
      settings,
      engine,
      agents,
      GenerationGate.GenerationGate.layer(Retention.synchronous).pipe(Layer.provide(engine))
    ))
  )

/** The controller's `SessionRunner` over the cluster, and its `Fleet`. */
export const controllerLayer = (
  options: { readonly callTimeout: Duration.Duration; readonly shards: number }
): Layer.Layer<SessionRunner.SessionRunner | Fleet.Fleet, never, Sharding.Sharding> =>
  Remote.layer(options).pipe(
    Layer.provideMerge(Fleet.layer(options)),
    Layer.provide(Layer.mergeAll(
      settings,
      Layer.unwrap(
        Effect.map(Effect.service(RolloutConfig.RolloutConfig), (config) => Credit.Credit.layer(creditOptions(config)))
      ).pipe(
        Layer.provide(Layer.merge(settings, Telemetry.Telemetry.layer))
      )
    )),
    Layer.orDie
  )

/**
 * A controller-side ticket of Session `sessionId` (at `position` in its Group): its first `awaitLease` marks arrival,
 * the test grants the lease.
 */
export const controllerTicket = (sessionId: string, groupId: string, rolloutId: number, position = 0) =>
  Effect.gen(function*() {
    const arrived = yield* Deferred.make<void>()
    const lease = yield* Deferred.make<void, SessionError.SessionClosedError>()
    const ticket: FirstRequestBarrier.SessionTicket = {
      groupId,
      sessionId,
      position,
      awaitLease: Deferred.succeed(arrived, undefined).pipe(Effect.andThen(Deferred.await(lease))),
      leased: Deferred.await(lease).pipe(Effect.orDie),
      firstRequest: Deferred.await(arrived),
      rolloutId: () => rolloutId
    }
    return { ticket, arrived, lease }
  })
