/**
 * The admission metrics as Prometheus series (docs/observability.md, docs/sglang.md "KV scheduling"): Relax's
 * `agentic_kv/admission/<name>` counters as `relax_agentic_kv_admission_<name>_total`, its `agentic_kv/budget/<name>`
 * values as gauges `relax_agentic_kv_budget_<name>`, and the failed KV reads by reason.
 */
import { Context, Metric } from "effect"
import type * as Ledger from "../../src/admission/Ledger.ts"

const decisionCounter = (name: string, description: string) =>
  Metric.counter(`relax_agentic_kv_admission_${name}_total`, { description, incremental: true })

const decisions = {
  admit: decisionCounter("admit", "Backend attempts admitted with a KV lease"),
  wait: decisionCounter("wait", "Backend attempts that queued for KV room"),
  bypass: decisionCounter("bypass", "Backend attempts sent without a KV lease (any reason)"),
  bypass_protected: decisionCounter("bypass_protected", "Attempts of protected Sessions, sent without a lease"),
  bypass_degraded: decisionCounter("bypass_degraded", "Attempts sent without a lease: no fresh KV snapshot"),
  bypass_aged: decisionCounter("bypass_aged", "Attempts sent without a lease after --agentic-admission-max-wait-s"),
  cancelled: decisionCounter("cancelled", "Waiting attempts cancelled (step close, weight update, interruption)")
} as const

const budgetNames = [
  "ceiling",
  "reserved",
  "available_tokens",
  "lease_count",
  "kv_token_usage_mean",
  "kv_token_usage_max",
  "epoch",
  "degraded",
  "reserved_utilization"
] as const

const budget = Object.fromEntries(
  budgetNames.map((name) => [
    name,
    Metric.gauge(`relax_agentic_kv_budget_${name}`, { description: `The KV admission ledger's ${name}` })
  ])
)

const noContext = Context.empty()

/** Count a decision (an immediate one, or a waiter's final one). */
export const count = (decision: Ledger.Decision): void => {
  if (decision.action === "admit") decisions.admit.updateUnsafe(1, noContext)
  else if (decision.action === "wait") decisions.wait.updateUnsafe(1, noContext)
  else if (decision.reason === "cancelled") decisions.cancelled.updateUnsafe(1, noContext)
  else {
    decisions.bypass.updateUnsafe(1, noContext)
    decisions[`bypass_${decision.reason}`].updateUnsafe(1, noContext)
  }
}

/** Set the budget gauges from the ledger's metrics. */
export const setBudget = (metrics: Readonly<Record<string, number>>): void => {
  for (const name of budgetNames) {
    const value = metrics[`agentic_kv/budget/${name}`]
    if (value !== undefined) budget[name]!.updateUnsafe(value, noContext)
  }
  const waiting = metrics["agentic_kv/admission/waiting"]
  if (waiting !== undefined) waitingGauge.updateUnsafe(waiting, noContext)
}

const waitingGauge = Metric.gauge("relax_agentic_kv_admission_waiting", {
  description: "Backend attempts waiting for KV room now"
})

/** Failed reads of the fleet's KV figures, by reason (`metrics-disabled`, `unreachable`, `no-workers`). */
export const failedReads = (() => {
  const base = Metric.counter("relax_agentic_kv_snapshot_failures_total", {
    description: "Failed reads of the workers' KV figures (admission bypassed while they fail)",
    incremental: true
  })
  const series = new Map<string, Metric.Metric<number, unknown>>()
  return (labels: { readonly reason: string }) => {
    let found = series.get(labels.reason)
    if (found === undefined) {
      found = Metric.withAttributes(base, { reason: labels.reason })
      series.set(labels.reason, found)
    }
    return found
  }
})()

/** Attempts a cluster runner sent without a lease because the fleet's admission writer did not answer in time. */
export const unreachable = Metric.counter("relax_agentic_kv_admission_unreachable_total", {
  description: "Attempts sent without a KV lease because the admission writer could not be reached",
  incremental: true
})
