/**
 * The SGLang fleet's KV figures for admission (docs/sglang.md "KV scheduling"): every worker's Prometheus `/metrics`
 * (the router's current worker list when one is used), read at once.
 *
 * **Details**
 * Each worker answers `sglang:max_total_num_tokens` and its usage (src/admission/PrometheusKv.ts). One worker that
 * fails, or answers without the gauges (SGLang launched without `--enable-metrics`: `/metrics` is a 404), fails the
 * whole read, as in Relax: the ledger is then stale and admission bypasses rather than trusting part of the fleet.
 */
import { Clock, Effect } from "effect"
import * as PrometheusKv from "../../../src/admission/PrometheusKv.ts"
import * as KvSnapshot from "../KvSnapshot.ts"
import * as Http from "./Http.ts"
import type * as Workers from "./Workers.ts"

/** The read over `workers` (each `/metrics` bounded by `timeoutMs`). */
export const read = (http: Http.Http, workers: Workers.Workers, timeoutMs: number): KvSnapshot.Read =>
  Effect.gen(function*() {
    const urls = yield* workers.controlTargets(false)
    if (urls.length === 0) {
      return yield* new KvSnapshot.KvSnapshotError({ reason: "no-workers", url: "the router", detail: "no workers" })
    }
    const figures = yield* Effect.forEach(
      urls,
      (url) =>
        http.request(url, "/metrics", "GET", undefined, Http.noHeaders, timeoutMs).pipe(
          Effect.mapError((error) =>
            new KvSnapshot.KvSnapshotError({ reason: "unreachable", url, detail: error.message })
          ),
          Effect.flatMap((answer) => {
            const parsed = answer.status === 200 ? PrometheusKv.parse(answer.body) : undefined
            return parsed === undefined
              ? Effect.fail(
                new KvSnapshot.KvSnapshotError({
                  reason: "metrics-disabled",
                  url,
                  detail: answer.status === 200
                    ? "the gauges are missing from its answer"
                    : `GET /metrics answered HTTP ${answer.status}`
                })
              )
              : Effect.succeed({
                id: url,
                healthy: true,
                maxTotalNumTokens: parsed.maxTotalNumTokens,
                usage: parsed.usage
              })
          })
        ),
      { concurrency: "unbounded" }
    )
    return { at: yield* Clock.currentTimeMillis, workers: figures }
  })
