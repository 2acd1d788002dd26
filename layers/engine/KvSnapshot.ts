/**
 * The fleet's KV figures an engine reports for admission (docs/sglang.md "KV scheduling"): each worker's
 * `max_total_num_tokens` and token usage, read at one moment.
 *
 * **Details**
 * SGLang reads every worker's Prometheus `/metrics` (the router's current worker list when one is used;
 * layers/engine/sglang/KvMetrics.ts); the embedded engine reports its own pool (`--embedded-kv-tokens`, used = its
 * running attempts' lengths). A failed read is a {@link KvSnapshotError}: one failing worker fails the whole read, as in
 * Relax, and admission then degrades to bypass (never blocking on missing data).
 */
import { Data, type Effect } from "effect"
import type * as Ledger from "../../src/admission/Ledger.ts"

/** Why the KV figures could not be read. */
export type KvSnapshotErrorReason = "metrics-disabled" | "unreachable" | "no-workers"

/** The KV figures could not be read from `url`. */
export class KvSnapshotError extends Data.TaggedError("KvSnapshotError")<{
  readonly reason: KvSnapshotErrorReason
  readonly url: string
  readonly detail: string
}> {
  override get message(): string {
    return this.reason === "metrics-disabled"
      ? `KV admission: the SGLang worker at ${this.url} serves no sglang:max_total_num_tokens on /metrics ` +
        `(${this.detail}); launch SGLang with --enable-metrics. Until then admission is bypassed (counted as ` +
        "agentic_kv/admission/bypass_degraded)"
      : `KV admission: cannot read the KV figures of ${this.url}: ${this.detail}; admission is bypassed (counted as ` +
        "agentic_kv/admission/bypass_degraded) until a read succeeds"
  }
}

/** One read of the fleet's KV figures. */
export type Read = Effect.Effect<Ledger.Snapshot, KvSnapshotError>
