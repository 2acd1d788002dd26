/**
 * The fleet's KV admission ledger (docs/sglang.md "KV scheduling"): Relax's `BudgetState` and its coordinator's FIFO
 * queue as one synchronous value, with time passed in, so every decision is a plain function call a test can table.
 *
 * **Details**
 * - `reconcile(snapshot, now)`: healthy workers (healthy and `max_total_num_tokens > 0`) give the ceiling
 *   `floor(headroom × Σ max_total_num_tokens)`; none invalidates it (ceiling 0, epoch kept); a changed set of worker
 *   ids bumps the epoch (leases are kept). Usage per worker is clamped to [0, 1]; the mean and max are kept, and a
 *   window mean and peak for the metrics. Leases older than the TTL expire; tombstones older than it are pruned.
 * - Stale (degraded): ceiling ≤ 0, no snapshot, or a snapshot older than `staleMs`.
 * - `acquire(ticket)`, in order: a cancel tombstone → bypass `cancelled`; protected → bypass `protected`; a lease held
 *   → admit with it (idempotent); already waiting → wait (with other tokens: a local degraded bypass); an empty queue
 *   tries to reserve now (granted → admit, stale → bypass `degraded`, pressure or capacity → wait); otherwise the
 *   ticket joins the tail of the FIFO and waits. A new ticket never overtakes a waiter.
 * - Reserve refuses in order: stale (`degraded`), any worker's usage ≥ the pressure threshold (`pressure_guard`),
 *   reserved + tokens > ceiling (`capacity_exhausted`).
 * - Drain (after every acquire, release, cancel and reconcile) works from the head: a head that waited ≥ `maxWaitMs` is
 *   bypassed `aged` with no lease; else it tries to reserve (granted → admit, stale → bypass `degraded`, refused →
 *   stop: head-of-line blocking).
 * - `release` and `cancel` are idempotent; `reserved` never goes below 0. `shutdown` bypasses every waiter `degraded`.
 * Every operation returns the waiters it resolved, for the caller to wake. Metric names are Relax's
 * (`agentic_kv/admission/...`, `agentic_kv/budget/...`; {@link Ledger.metrics}).
 */

/** One worker's KV figures from its `/metrics`. */
export interface WorkerKv {
  /** The worker's URL (its id for the epoch). */
  readonly id: string
  readonly healthy: boolean
  /** `sglang:max_total_num_tokens`. */
  readonly maxTotalNumTokens: number
  /** `sglang:token_usage` (or its fallbacks), 0..1. */
  readonly usage: number
}

/** The fleet's KV figures read at `at` (ms). */
export interface Snapshot {
  readonly at: number
  readonly workers: ReadonlyArray<WorkerKv>
}

/** One backend attempt asking for room. */
export interface Ticket {
  /** The attempt's rid (unique per attempt; a resumed attempt is a new ticket). */
  readonly id: string
  /** Prompt tokens + min(remaining completion, expected decode cap). */
  readonly tokens: number
  /** Its Session is protected (partial rollout): never waits. */
  readonly protected: boolean
}

/** Why an attempt went without a lease. */
export type BypassReason = "protected" | "degraded" | "aged" | "cancelled"

/** What became of a ticket. */
export type Decision =
  | { readonly action: "admit"; readonly leaseId: string; readonly waitedMs: number }
  | { readonly action: "bypass"; readonly reason: BypassReason; readonly waitedMs: number }
  | { readonly action: "wait" }

/** A waiter the last operation resolved. */
export interface Resolved {
  readonly ticket: string
  readonly decision: Exclude<Decision, { readonly action: "wait" }>
}

/** Why `reserve` refused. */
type Refusal = "degraded" | "pressure_guard" | "capacity_exhausted"

export interface LedgerOptions {
  readonly headroom: number
  readonly pressureThreshold: number
  readonly maxWaitMs: number
  readonly staleMs: number
  readonly leaseTtlMs: number
}

interface Lease {
  readonly id: string
  readonly tokens: number
  readonly at: number
}

interface Waiter {
  readonly ticket: Ticket
  readonly since: number
}

const counterNames = [
  "admit",
  "wait",
  "bypass",
  "bypass_protected",
  "bypass_degraded",
  "bypass_aged",
  "cancelled"
] as const

type Counter = typeof counterNames[number]

/** The ledger: see the module doc. Mutable, single-writer; no I/O and no clock of its own. */
export class Ledger {
  readonly options: LedgerOptions
  ceiling = 0
  reserved = 0
  epoch = 0
  /** The last reconciled snapshot's time; undefined before the first. */
  snapshotAt: number | undefined = undefined
  meanUsage = 0
  maxUsage = 0
  private workerIds = ""
  private readonly leases = new Map<string, Lease>()
  private readonly queue: Array<Waiter> = []
  private readonly waiting = new Map<string, Waiter>()
  private readonly tombstones = new Map<string, number>()
  private readonly counters = new Map<Counter, number>()
  private expired = 0
  /** Why the queue's head could not be admitted at the last drain (undefined: the queue is empty or moved). */
  private headRefusal: Refusal | undefined = undefined
  private waitedSum = 0
  private waitedCount = 0
  private windowUsageSum = 0
  private windowUsageCount = 0
  private windowPeak = 0

  constructor(options: LedgerOptions) {
    this.options = options
  }

  /** Leases held now. */
  get leaseCount(): number {
    return this.leases.size
  }

  /** Tickets waiting now. */
  get waitingCount(): number {
    return this.queue.length
  }

  /**
   * Whether the queue's head waits on the pressure guard: a worker's usage at the last snapshot, which only a newer
   * snapshot can lift (a release changes the ledger's reservations, not the measured usage).
   */
  get waitsOnPressure(): boolean {
    return this.headRefusal === "pressure_guard"
  }

  /** Whether admission must not block now (no or an old snapshot, no healthy worker). */
  isStale(now: number): boolean {
    return this.ceiling <= 0 || this.snapshotAt === undefined || now - this.snapshotAt > this.options.staleMs
  }

  /** Take in a snapshot (or its absence: a failed read), expire leases and tombstones, drain. */
  reconcile(snapshot: Snapshot | undefined, now: number): ReadonlyArray<Resolved> {
    if (snapshot !== undefined) {
      const healthy = snapshot.workers.filter((w) => w.healthy && w.maxTotalNumTokens > 0)
      if (healthy.length === 0) {
        this.ceiling = 0
      } else {
        const ids = healthy.map((w) => w.id).sort().join("\n")
        if (ids !== this.workerIds) {
          this.epoch++
          this.workerIds = ids
        }
        const total = healthy.reduce((sum, w) => sum + w.maxTotalNumTokens, 0)
        this.ceiling = Math.floor(total * this.options.headroom)
        const usages = healthy.map((w) => Math.min(1, Math.max(0, Number.isFinite(w.usage) ? w.usage : 0)))
        this.meanUsage = usages.reduce((sum, u) => sum + u, 0) / usages.length
        this.maxUsage = Math.max(...usages)
        this.windowUsageSum += this.meanUsage
        this.windowUsageCount++
        this.windowPeak = Math.max(this.windowPeak, this.maxUsage)
        this.snapshotAt = snapshot.at
      }
    }
    for (const [ticket, lease] of this.leases) {
      if (now - lease.at < this.options.leaseTtlMs) continue
      this.dropLease(ticket)
      this.expired++
    }
    for (const [ticket, at] of this.tombstones) {
      if (now - at >= this.options.leaseTtlMs) this.tombstones.delete(ticket)
    }
    return this.drain(now)
  }

  /** Ask for room for `ticket`; a `wait` is resolved later, in the result of another operation. */
  acquire(ticket: Ticket, now: number): { readonly decision: Decision; readonly resolved: ReadonlyArray<Resolved> } {
    if (this.tombstones.delete(ticket.id)) return this.settled(this.bypass("cancelled", 0))
    if (ticket.protected) return this.settled(this.bypass("protected", 0))
    const lease = this.leases.get(ticket.id)
    if (lease !== undefined) return this.settled({ action: "admit", leaseId: lease.id, waitedMs: 0 })
    const already = this.waiting.get(ticket.id)
    if (already !== undefined) {
      // Relax's coordinator errs here and its client bypasses locally (degraded, uncounted).
      return this.settled(
        already.ticket.tokens === ticket.tokens
          ? { action: "wait" }
          : { action: "bypass", reason: "degraded", waitedMs: 0 }
      )
    }
    if (this.queue.length === 0) {
      const refusal = this.reserve(ticket, now)
      if (refusal === undefined) {
        return this.settled(this.admitted(ticket.id, 0))
      }
      if (refusal === "degraded") return this.settled(this.bypass("degraded", 0))
    }
    const waiter: Waiter = { ticket, since: now }
    this.queue.push(waiter)
    this.waiting.set(ticket.id, waiter)
    this.count("wait")
    const resolved = this.drain(now)
    const own = resolved.find((r) => r.ticket === ticket.id)
    return {
      decision: own === undefined ? { action: "wait" } : own.decision,
      resolved: resolved.filter((r) => r.ticket !== ticket.id)
    }
  }

  /** The attempt ended: give its tokens back (idempotent), drain. */
  release(ticketId: string, now: number): ReadonlyArray<Resolved> {
    this.dropLease(ticketId)
    return this.drain(now)
  }

  /**
   * The attempt is gone (interrupted, its step closed): a waiter leaves the queue (`cancelled`); a ticket with neither
   * a waiter nor a lease leaves a tombstone, so an `acquire` that arrives later is bypassed; any lease is released.
   */
  cancel(ticketId: string, now: number): ReadonlyArray<Resolved> {
    const resolved: Array<Resolved> = []
    const waiter = this.waiting.get(ticketId)
    if (waiter !== undefined) {
      this.waiting.delete(ticketId)
      this.queue.splice(this.queue.indexOf(waiter), 1)
      this.count("cancelled")
      resolved.push({
        ticket: ticketId,
        decision: { action: "bypass", reason: "cancelled", waitedMs: now - waiter.since }
      })
    } else if (!this.leases.has(ticketId)) {
      this.tombstones.set(ticketId, now)
    }
    this.dropLease(ticketId)
    return [...resolved, ...this.drain(now)]
  }

  /** Stop: every waiter is bypassed `degraded` (nothing waits on a ledger that is going away). */
  shutdown(now: number): ReadonlyArray<Resolved> {
    const resolved = this.queue.map((waiter): Resolved => ({
      ticket: waiter.ticket.id,
      decision: this.bypass("degraded", now - waiter.since)
    }))
    this.queue.length = 0
    this.waiting.clear()
    this.headRefusal = undefined
    return resolved
  }

  /**
   * The step's metrics with Relax's names (`agentic_kv/...`); with `reset`, the counters clear and a new usage window
   * starts. Counters are absent until first incremented.
   */
  metrics(now: number, reset: boolean): Record<string, number> {
    const out: Record<string, number> = {}
    for (const name of counterNames) {
      const value = this.counters.get(name)
      if (value !== undefined) out[`agentic_kv/admission/${name}`] = value
    }
    const decisions = (this.counters.get("admit") ?? 0) + (this.counters.get("wait") ?? 0) +
      (this.counters.get("bypass") ?? 0)
    out["agentic_kv/admission/defer_rate"] = decisions === 0 ? 0 : (this.counters.get("wait") ?? 0) / decisions
    out["agentic_kv/admission/degraded_rate"] = decisions === 0
      ? 0
      : (this.counters.get("bypass_degraded") ?? 0) / decisions
    out["agentic_kv/admission/waiting"] = this.queue.length
    out["agentic_kv/admission/wait_seconds_mean"] = this.waitedCount === 0
      ? 0
      : this.waitedSum / this.waitedCount / 1000
    out["agentic_kv/budget/ceiling"] = this.ceiling
    out["agentic_kv/budget/reserved"] = this.reserved
    out["agentic_kv/budget/available_tokens"] = Math.max(0, this.ceiling - this.reserved)
    out["agentic_kv/budget/lease_count"] = this.leases.size
    out["agentic_kv/budget/kv_token_usage_mean"] = this.windowUsageCount === 0
      ? this.meanUsage
      : this.windowUsageSum / this.windowUsageCount
    out["agentic_kv/budget/kv_token_usage_max"] = this.windowUsageCount === 0 ? this.maxUsage : this.windowPeak
    out["agentic_kv/budget/epoch"] = this.epoch
    out["agentic_kv/budget/degraded"] = this.isStale(now) ? 1 : 0
    if (this.ceiling > 0) out["agentic_kv/budget/reserved_utilization"] = this.reserved / this.ceiling
    if (this.expired > 0) out["agentic_kv/budget/lease_expired"] = this.expired
    if (reset) {
      this.counters.clear()
      this.expired = 0
      this.waitedSum = 0
      this.waitedCount = 0
      this.windowUsageSum = 0
      this.windowUsageCount = 0
      this.windowPeak = 0
    }
    return out
  }

  private settled(decision: Decision) {
    return { decision, resolved: [] as ReadonlyArray<Resolved> }
  }

  private count(name: Counter): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + 1)
  }

  private bypass(reason: BypassReason, waitedMs: number): Extract<Decision, { action: "bypass" }> {
    this.count("bypass")
    if (reason !== "cancelled") this.count(`bypass_${reason}`)
    else this.count("cancelled")
    return { action: "bypass", reason, waitedMs }
  }

  private admitted(ticketId: string, waitedMs: number): Extract<Decision, { action: "admit" }> {
    this.count("admit")
    const lease = this.leases.get(ticketId)
    return { action: "admit", leaseId: lease?.id ?? "", waitedMs }
  }

  private reserve(ticket: Ticket, now: number): Refusal | undefined {
    if (this.isStale(now)) return "degraded"
    if (this.maxUsage >= this.options.pressureThreshold) return "pressure_guard"
    if (this.reserved + ticket.tokens > this.ceiling) return "capacity_exhausted"
    this.leases.set(ticket.id, { id: `${this.epoch}:${ticket.id}`, tokens: ticket.tokens, at: now })
    this.reserved += ticket.tokens
    return undefined
  }

  private dropLease(ticketId: string): void {
    const lease = this.leases.get(ticketId)
    if (lease === undefined) return
    this.leases.delete(ticketId)
    this.reserved = Math.max(0, this.reserved - lease.tokens)
  }

  private drain(now: number): ReadonlyArray<Resolved> {
    const resolved: Array<Resolved> = []
    this.headRefusal = undefined
    while (this.queue.length > 0) {
      const head = this.queue[0]!
      const waitedMs = now - head.since
      let decision: Resolved["decision"]
      if (waitedMs >= this.options.maxWaitMs) {
        decision = this.bypass("aged", waitedMs)
      } else {
        const refusal = this.reserve(head.ticket, now)
        if (refusal === undefined) {
          decision = this.admitted(head.ticket.id, waitedMs)
          this.waitedSum += waitedMs
          this.waitedCount++
        } else if (refusal === "degraded") {
          decision = this.bypass("degraded", waitedMs)
        } else {
          this.headRefusal = refusal
          break
        }
      }
      this.queue.shift()
      this.waiting.delete(head.ticket.id)
      resolved.push({ ticket: head.ticket.id, decision })
    }
    return resolved
  }
}
