/**
 * `relax-agentic check --probe-engine`: the SGLang conformance probe (layers/engine/sglang/Probe.ts) over the same
 * flags and config as `rollout`: the workers or router, the API key, `--tokenizer`, `--agentic-session-lifecycle`,
 * `--sglang-lora-path` and KV admission decide what is probed. docs/sglang.md, "Check your SGLang".
 */
import { Data, Effect } from "effect"
import * as Probe from "../../layers/engine/sglang/Probe.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Settings from "../config/Settings.ts"
import type * as ProbeReport from "../engine/sglang/ProbeReport.ts"

/** The probe could not run (not on SGLang, no tokenizer). */
export class ProbeStartError extends Data.TaggedError("ProbeStartError")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

/** The probe's default request budget (`--probe-budget`). */
export const defaultBudget = 40

/** Probe the servers the settings name, with at most `budget` `/generate` requests. */
export const runProbe = (
  settings: Settings.RolloutSettings,
  budget: number = defaultBudget
): Effect.Effect<ProbeReport.Report, ProbeStartError> =>
  Effect.gen(function*() {
    if (settings.engine !== "sglang") {
      return yield* new ProbeStartError({
        detail: "--probe-engine: probes an SGLang deployment; add --engine sglang with --sglang-url or " +
          "--sglang-router-url"
      })
    }
    if (budget < 1) {
      return yield* new ProbeStartError({ detail: `--probe-budget: ${budget} is not a request count; use 1 or more` })
    }
    const engine = SglangEngine.optionsOf(settings)
    const tokenizer = yield* Tokenizer.Tokenizer
    return yield* Probe.run({
      workerUrls: engine.workerUrls,
      routerUrl: engine.routerUrl,
      apiKey: engine.apiKey,
      tokenizer: { source: settings.tokenizer ?? tokenizer.source, encode: tokenizer.encode },
      sessionLifecycle: settings.agenticSessionLifecycle,
      loraPath: settings.sglangLoraPath,
      admission: Settings.admission(settings) !== undefined,
      budget
    }).pipe(
      Effect.scoped,
      Effect.mapError((error) => new ProbeStartError({ detail: `--engine: ${error.message}` }))
    )
  }).pipe(
    Effect.provide(
      settings.tokenizer === undefined
        ? Tokenizer.Tokenizer.layer
        : Tokenizer.Tokenizer.fromDirectory(settings.tokenizer)
    ),
    Effect.catchTag(
      "TokenizerLoadError",
      (error) => Effect.fail(new ProbeStartError({ detail: `--tokenizer: ${error.message}` }))
    ),
    Effect.timeoutOrElse({
      duration: "60 seconds",
      orElse: () =>
        Effect.fail(
          new ProbeStartError({
            detail: "--probe-engine: the probe did not finish within 60 seconds; check that the servers answer " +
              "(a loaded server is slow: lower --probe-budget)"
          })
        )
    })
  )
