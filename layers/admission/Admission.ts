/**
 * Program-aware KV admission as a layer over the engine (docs/sglang.md "KV scheduling"): with
 * `--agentic-program-admission` the `Engine` every attempt goes through is the admitted one
 * (layers/admission/AdmittedEngine.ts), waiting on one process's coordinator (layers/admission/Coordinator.ts) over
 * the engine's own KV figures, or on the coordinator a cluster runner is given (the fleet's single writer,
 * layers/cluster/AdmissionWriter.ts).
 */
import { Effect, Layer } from "effect"
import type * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"
import * as Engine from "../engine/Engine.ts"
import * as KvSnapshot from "../engine/KvSnapshot.ts"
import * as AdmittedEngine from "./AdmittedEngine.ts"
import * as Coordinator from "./Coordinator.ts"

/** An engine that reports no KV figures: every read fails, so admission bypasses (counted as degraded). */
export const noFigures: KvSnapshot.Read = Effect.fail(
  new KvSnapshot.KvSnapshotError({ reason: "no-workers", url: "the engine", detail: "it reports no KV figures" })
)

/** One process's coordinator over the engine's KV figures. */
export const localCoordinator = (
  settings: AdmissionOptions.AdmissionSettings
): Layer.Layer<Coordinator.Coordinator, never, Engine.Engine> =>
  Layer.effect(
    Coordinator.Coordinator,
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      return yield* Coordinator.makeLocal(settings, engine.kvSnapshot ?? noFigures)
    })
  )

/**
 * `engine` with admission when `settings` is defined (admission on), waiting on `coordinator` (default: this
 * process's own, {@link localCoordinator}); `engine` itself when admission is off.
 */
export const around = <E, R, CE = never, CR = never>(
  engine: Layer.Layer<Engine.Engine, E, R>,
  settings: AdmissionOptions.AdmissionSettings | undefined,
  coordinator?: Layer.Layer<Coordinator.Coordinator, CE, Engine.Engine | CR>
): Layer.Layer<Engine.Engine, E | CE, R | CR> => {
  if (settings === undefined) return engine
  const admitted = Layer.effect(
    Engine.Engine,
    Effect.gen(function*() {
      const inner = yield* Engine.Engine
      const chosen = yield* Coordinator.Coordinator
      yield* Effect.logInfo(`KV admission on (docs/sglang.md "KV scheduling")`)
      return AdmittedEngine.make(inner, chosen, settings)
    })
  )
  return admitted.pipe(Layer.provide((coordinator ?? localCoordinator(settings)).pipe(Layer.provideMerge(engine))))
}
