/** How a process takes part in a cluster (docs/scale-out.md): the layers a controller or a runner composes in. */
import type { Layer } from "effect"
import type * as LoraOptions from "../../src/lora/LoraOptions.ts"
import type * as Retention from "../../src/schedule/Retention.ts"
import type * as Coordinator from "../admission/Coordinator.ts"
import type * as ClusterJoin from "../cluster/ClusterJoin.ts"
import type * as Credit from "../credit/Credit.ts"
import type * as Engine from "../engine/Engine.ts"
import type * as Forwarder from "../gateway/Forwarder.ts"
import type * as LoraVersions from "../lora/LoraVersions.ts"
import type * as RolloutConfig from "../rollout/RolloutConfig.ts"
import type * as SessionRunner from "../rollout/SessionRunner.ts"
import type * as GenerationGate from "../schedule/GenerationGate.ts"

/**
 * Cluster mode (docs/scale-out.md): how a process takes part. A controller (`rollout` / `serve` with
 * `--cluster-database-url`) runs its Groups' Sessions on the runners; a runner (`relax-agentic runner`) forwards
 * requests for Sessions it does not hold (`forwarder`) and tells its agents `agentBaseUrl` (`--gateway-public-url`).
 */
export interface ClusterRole {
  /** The controller's runner of Sessions (`layers/cluster/Remote.ts` over a client-only member). */
  readonly sessionRunner?:
    | Layer.Layer<
      SessionRunner.SessionRunner,
      ClusterJoin.JoinError,
      Credit.Credit | Engine.Engine | RolloutConfig.RolloutConfig
    >
    | undefined
  /** The controller's generation gate: a step boundary on every runner (`layers/cluster/Fleet.ts`). */
  readonly gate?:
    | ((
      mode: Retention.Mode
    ) => Layer.Layer<GenerationGate.GenerationGate, ClusterJoin.JoinError, Engine.Engine | RolloutConfig.RolloutConfig>)
    | undefined
  /** The controller's engine, whose weight changes every runner follows (`layers/cluster/Fleet.ts`). */
  readonly engine?:
    | (<E, R>(
      engine: Layer.Layer<Engine.Engine, E, R>
    ) => Layer.Layer<Engine.Engine, E | ClusterJoin.JoinError, R | RolloutConfig.RolloutConfig>)
    | undefined
  /**
   * With KV admission on: the coordinator attempts wait on, the fleet's single writer
   * (`layers/cluster/AdmissionWriter.ts` over this member's membership); default: this process's own.
   */
  readonly admissionCoordinator?:
    | Layer.Layer<Coordinator.Coordinator, ClusterJoin.JoinError, Engine.Engine | RolloutConfig.RolloutConfig>
    | undefined
  /**
   * With versioned LoRA: the fleet's version registry Sessions bind through, the single writer
   * (`layers/cluster/LoraWriter.ts` over this member's membership); default: this process's own.
   */
  readonly loraVersions?:
    | ((
      mode: LoraOptions.Mode
    ) => Layer.Layer<
      LoraVersions.LoraVersions,
      Engine.EngineError | ClusterJoin.JoinError,
      RolloutConfig.RolloutConfig
    >)
    | undefined
  /** A runner's gateway forwarding (`layers/cluster/Forward.ts` over the runner's membership). */
  readonly forwarder?: Layer.Layer<Forwarder.Forwarder, ClusterJoin.JoinError> | undefined
  /** What agents get as `RELAX_BASE_URL` instead of this process's own gateway URL. */
  readonly agentBaseUrl?: string | undefined
}
