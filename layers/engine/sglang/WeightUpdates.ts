/**
 * The weight version the SGLang client reports, and the one-call weight update (`/update_weight_version`).
 *
 * **Details**
 * `update(version)` posts `/update_weight_version {new_version, abort_all_requests: true}` to every worker:
 * generations in flight end with their partial output (finish `abort`) and are resumed by their callers. Without a
 * version the next one is the current plus 1 when it is an integer, else the number of updates.
 */
import { Effect, Ref } from "effect"
import * as WeightVersion from "../../../src/engine/WeightVersion.ts"
import * as Wire from "../../../src/engine/Wire.ts"
import { EngineError } from "../Engine.ts"
import * as Http from "./Http.ts"
import type * as Workers from "./Workers.ts"

/** The current version and the update. */
export interface WeightUpdates {
  readonly version: Ref.Ref<string>
  readonly update: (version?: string) => Effect.Effect<string, EngineError>
}

/** Versions starting at `initial`. */
export const make = (http: Http.Http, workers: Workers.Workers, initial: string): Effect.Effect<WeightUpdates> =>
  Effect.gen(function*() {
    const version = yield* Ref.make(initial)
    let updates = 0
    const update = (next?: string): Effect.Effect<string, EngineError> =>
      Effect.gen(function*() {
        updates++
        const value = next ?? WeightVersion.next(yield* Ref.get(version), updates)
        yield* Effect.forEach(
          workers.all,
          (w) =>
            // abort_all_requests: a generation running across the update returns its partial output (finish `abort`)
            // and its caller resumes it on the new version, so every attempt runs on one version (reference §6.8).
            http.request(w.url, "/update_weight_version", "POST", { new_version: value, abort_all_requests: true } satisfies Wire.UpdateWeightVersionRequest).pipe(
              Effect.flatMap(Http.ok(w.url, "/update_weight_version")),
              Effect.flatMap((answer) => Http.decodeJson(Wire.UpdateWeightVersionResponse, w.url, "/update_weight_version", answer)),
              Effect.flatMap((r) =>
                r.success ? Effect.void : Effect.fail(
                  new EngineError({
                    reason: "refused",
                    detail: `SGLang at ${w.url} refused /update_weight_version: ${r.message ?? "no message"}`,
                    url: w.url
                  })
                )
              )
            ),
          { concurrency: "unbounded", discard: true }
        )
        yield* Ref.set(version, value)
        return value
      })
    return { version, update }
  })
