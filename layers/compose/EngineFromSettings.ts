/** The engine of a rollout from its settings: SGLang or the embedded engine, behind KV admission when it is on. */
import { Effect, Layer } from "effect"
import * as Settings from "../../src/config/Settings.ts"
import type * as HookSpec from "../../src/hooks/HookSpec.ts"
import * as Admission from "../admission/Admission.ts"
import type * as Coordinator from "../admission/Coordinator.ts"
import * as EmbeddedEngine from "../engine/EmbeddedEngine.ts"
import type * as Engine from "../engine/Engine.ts"
import * as SglangEngine from "../engine/sglang/SglangEngine.ts"
import type * as Hooks from "../platform/Hooks.ts"
import type * as Tokenizer from "../tokenizer/Tokenizer.ts"

/**
 * The engine the settings name: SGLang (`--engine sglang`, its tokenizer checked against the local one) or the
 * embedded engine, with `--embedded-policy` loaded relative to `cwd`. `sglangDefaults` are SGLang options the
 * settings do not set (`relax-agentic check` waits 10 seconds, not 10 minutes, for a server still starting).
 */
export const engineLayer = <CE = never, CR = never>(
  settings: Settings.RolloutSettings,
  options: {
    readonly cwd: string
    readonly embedded?: EmbeddedEngine.EmbeddedEngineOptions | undefined
    readonly sglangDefaults?: Partial<SglangEngine.SglangEngineOptions> | undefined
    /** With admission on: the coordinator attempts wait on (a cluster runner's: the fleet's single writer). */
    readonly admissionCoordinator?: Layer.Layer<Coordinator.Coordinator, CE, Engine.Engine | CR> | undefined
  }
): Layer.Layer<
  Engine.Engine,
  Engine.EngineError | HookSpec.HookSpecError | Hooks.HookLoadError | CE,
  Tokenizer.Tokenizer | CR
> =>
  Admission.around<Engine.EngineError | HookSpec.HookSpecError | Hooks.HookLoadError, Tokenizer.Tokenizer, CE, CR>(
    settings.engine === "sglang"
      ? SglangEngine.SglangEngine.layerCheckingTokenizer({
        ...options.sglangDefaults,
        ...SglangEngine.SglangEngine.optionsOf(settings)
      })
      : Layer.unwrap(Effect.gen(function*() {
        const policy = settings.embeddedPolicy === undefined
          ? undefined
          : yield* EmbeddedEngine.EmbeddedEngine.loadPolicy(settings.embeddedPolicy, options.cwd)
        return EmbeddedEngine.EmbeddedEngine.layer({
          ...options.embedded,
          seed: settings.rolloutSeed,
          ...(settings.embeddedKvTokens === undefined ? {} : { kvTokens: settings.embeddedKvTokens }),
          ...(policy === undefined ? {} : { policy })
        })
      })),
    Settings.admission(settings),
    options.admissionCoordinator
  )
