/**
 * The resolved rollout configuration as a service: what every layer reads its settings from.
 *
 * **Details**
 * The configuration itself is data (src/config/: the option Schema, the flag table, resolution and derivations);
 * this service only hands a resolved `RolloutSettings` to the layers.
 */
import { Context, Layer } from "effect"
import type * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import * as Settings from "../../src/config/Settings.ts"

/** The resolved rollout configuration as a service. */
export class RolloutConfig
  extends Context.Service<RolloutConfig, Settings.RolloutSettings>()("relax-agentic/RolloutConfig")
{
  /** Decode and resolve `input` (src/config/Settings.ts `resolve`). */
  static readonly layer = (
    input: RolloutOptions.RolloutOptionsInput | unknown
  ): Layer.Layer<RolloutConfig, Settings.RolloutConfigError> => Layer.effect(RolloutConfig, Settings.resolve(input))
  /** An already resolved configuration. */
  static readonly layerSettings = (settings: Settings.RolloutSettings): Layer.Layer<RolloutConfig> =>
    Layer.succeed(RolloutConfig, settings)
}
