/**
 * The admission ledger case by case from Relax's reference (reserve's checks in order, the coordinator's acquire and
 * drain, bypasses, epochs, expiry, metrics), and a property test: after any script of admits, aborts, interruptions,
 * weight-update pauses and step closes, once every attempt has ended nothing is reserved, held or waiting.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Ledger from "../../src/admission/Ledger.ts"

const options: Ledger.LedgerOptions = {
  headroom: 0.5,
  pressureThreshold: 0.9,
  maxWaitMs: 30_000,
  staleMs: 6000,
  leaseTtlMs: 600_000
}

/** Two workers of 1000 tokens each: ceiling 1000 at headroom 0.5. */
const snapshot = (at: number, usage = 0.1, ids = ["http://a", "http://b"]): Ledger.Snapshot => ({
  at,
  workers: ids.map((id) => ({ id, healthy: true, maxTotalNumTokens: 1000, usage }))
})

const ticket = (id: string, tokens: number, protected_ = false): Ledger.Ticket => ({
  id,
  tokens,
  protected: protected_
})

const fresh = (now = 0) => {
  const ledger = new Ledger.Ledger(options)
  ledger.reconcile(snapshot(now), now)
  return ledger
}

describe("admission ledger", () => {
  it("reconciles the ceiling from healthy workers and bumps the epoch when the set changes", () => {
    const ledger = new Ledger.Ledger(options)
    assert.isTrue(ledger.isStale(0))
    ledger.reconcile(snapshot(0), 0)
    assert.strictEqual(ledger.ceiling, 1000)
    assert.strictEqual(ledger.epoch, 1)
    ledger.reconcile(snapshot(1, 0.1, ["http://b", "http://a"]), 1)
    assert.strictEqual(ledger.epoch, 1, "the same set in another order")
    ledger.reconcile(
      {
        at: 2,
        workers: [...snapshot(2).workers, { id: "http://c", healthy: false, maxTotalNumTokens: 1000, usage: 0 }]
      },
      2
    )
    assert.strictEqual(ledger.ceiling, 1000, "an unhealthy worker adds nothing")
    ledger.reconcile(snapshot(3, 0.1, ["http://a"]), 3)
    assert.strictEqual(ledger.epoch, 2)
    assert.strictEqual(ledger.ceiling, 500)
    ledger.reconcile({ at: 4, workers: [{ id: "http://a", healthy: true, maxTotalNumTokens: 0, usage: 0 }] }, 4)
    assert.strictEqual(ledger.ceiling, 0, "no healthy worker invalidates the ledger")
    assert.strictEqual(ledger.epoch, 2, "and keeps the epoch")
    assert.isTrue(ledger.isStale(4))
  })

  it("clamps usage and keeps the mean and max", () => {
    const ledger = new Ledger.Ledger(options)
    ledger.reconcile({
      at: 0,
      workers: [
        { id: "a", healthy: true, maxTotalNumTokens: 10, usage: 1.7 },
        { id: "b", healthy: true, maxTotalNumTokens: 10, usage: -1 }
      ]
    }, 0)
    assert.strictEqual(ledger.maxUsage, 1)
    assert.strictEqual(ledger.meanUsage, 0.5)
  })

  // Each row: the ledger's state before, the acquire, the decision (reference §1.4 reserve and §1.5 acquire, in order).
  const cases: ReadonlyArray<{
    readonly name: string
    readonly setup: (ledger: Ledger.Ledger) => void
    readonly now?: number
    readonly acquire: Ledger.Ticket
    readonly expect: Ledger.Decision["action"]
    readonly reason?: Ledger.BypassReason
  }> = [
    { name: "room: admitted", setup: () => {}, acquire: ticket("t", 400), expect: "admit" },
    {
      name: "exactly the ceiling: admitted",
      setup: () => {},
      acquire: ticket("t", 1000),
      expect: "admit"
    },
    {
      name: "over the ceiling: waits (capacity_exhausted)",
      setup: (l) => l.acquire(ticket("x", 700), 0),
      acquire: ticket("t", 400),
      expect: "wait"
    },
    {
      name: "a worker at the pressure threshold: waits (pressure_guard)",
      setup: (l) => l.reconcile(snapshot(0, 0.9), 0),
      acquire: ticket("t", 1),
      expect: "wait"
    },
    {
      name: "no snapshot: bypass degraded",
      setup: (l) => l.reconcile({ at: 0, workers: [] }, 0),
      acquire: ticket("t", 1),
      expect: "bypass",
      reason: "degraded"
    },
    {
      name: "a snapshot older than 6 s: bypass degraded",
      setup: () => {},
      now: 6001,
      acquire: ticket("t", 1),
      expect: "bypass",
      reason: "degraded"
    },
    {
      name: "a snapshot 6 s old is still fresh",
      setup: () => {},
      now: 6000,
      acquire: ticket("t", 1),
      expect: "admit"
    },
    {
      name: "protected: bypass even when full",
      setup: (l) => l.acquire(ticket("x", 1000), 0),
      acquire: ticket("t", 10, true),
      expect: "bypass",
      reason: "protected"
    },
    {
      name: "a cancel before the acquire: bypass cancelled",
      setup: (l) => l.cancel("t", 0),
      acquire: ticket("t", 10),
      expect: "bypass",
      reason: "cancelled"
    },
    {
      name: "a lease already held: admitted again with it",
      setup: (l) => l.acquire(ticket("t", 10), 0),
      acquire: ticket("t", 10),
      expect: "admit"
    },
    {
      name: "a waiter ahead: waits even with room (no overtaking)",
      setup: (l) => {
        l.acquire(ticket("x", 900), 0)
        l.acquire(ticket("y", 200), 0)
      },
      acquire: ticket("t", 50),
      expect: "wait"
    },
    {
      name: "stale behind a waiter: counted wait, resolved degraded at the drain",
      setup: (l) => {
        l.acquire(ticket("x", 900), 0)
        l.acquire(ticket("y", 200), 0)
      },
      now: 7000,
      acquire: ticket("t", 50),
      expect: "bypass",
      reason: "degraded"
    },
    {
      name: "already waiting with other tokens: a local degraded bypass",
      setup: (l) => {
        l.acquire(ticket("x", 1000), 0)
        l.acquire(ticket("t", 10), 0)
      },
      acquire: ticket("t", 20),
      expect: "bypass",
      reason: "degraded"
    }
  ]

  for (const c of cases) {
    it(`acquire: ${c.name}`, () => {
      const ledger = fresh()
      c.setup(ledger)
      const { decision } = ledger.acquire(c.acquire, c.now ?? 0)
      assert.strictEqual(decision.action, c.expect)
      if (c.reason !== undefined) assert.strictEqual(decision.action === "bypass" && decision.reason, c.reason)
    })
  }

  it("admits waiters in FIFO order as leases are released, with head-of-line blocking", () => {
    const ledger = fresh()
    assert.strictEqual(ledger.acquire(ticket("a", 600), 0).decision.action, "admit")
    assert.strictEqual(ledger.acquire(ticket("b", 500), 10).decision.action, "wait")
    assert.strictEqual(ledger.acquire(ticket("c", 100), 20).decision.action, "wait")
    const released = ledger.release("a", 1000)
    assert.deepStrictEqual(released.map((r) => [r.ticket, r.decision.action]), [["b", "admit"], ["c", "admit"]])
    assert.deepStrictEqual(released.map((r) => r.decision.waitedMs), [990, 980])
    assert.strictEqual(ledger.reserved, 600)
    const lease = released[0]!.decision
    assert.strictEqual(lease.action === "admit" && lease.leaseId, "1:b")
    assert.strictEqual(ledger.release("b", 1000).length, 0)
    assert.strictEqual(ledger.release("b", 1000).length, 0, "idempotent")
    assert.strictEqual(ledger.reserved, 100)
  })

  it("bypasses a head that waited max-wait as aged at the next drain, with no lease", () => {
    const ledger = fresh()
    ledger.acquire(ticket("a", 1000), 0)
    ledger.acquire(ticket("b", 10), 0)
    assert.deepStrictEqual(ledger.reconcile(snapshot(29_999), 29_999), [])
    const aged = ledger.reconcile(snapshot(30_000), 30_000)
    assert.deepStrictEqual(aged, [{ ticket: "b", decision: { action: "bypass", reason: "aged", waitedMs: 30_000 } }])
    assert.strictEqual(ledger.leaseCount, 1)
  })

  it("a pressure refusal lifts when the usage drops; only it makes the head wait on pressure", () => {
    const ledger = fresh()
    ledger.reconcile(snapshot(0, 0.95), 0)
    ledger.acquire(ticket("a", 10), 0)
    assert.isTrue(ledger.waitsOnPressure)
    const resolved = ledger.reconcile(snapshot(2000, 0.5), 2000)
    assert.deepStrictEqual(resolved.map((r) => r.decision.action), ["admit"])
    assert.isFalse(ledger.waitsOnPressure)
    // A head refused for capacity waits on a release, not on a newer reading.
    ledger.acquire(ticket("big", 1_000_000), 2000)
    assert.isFalse(ledger.waitsOnPressure)
  })

  it("cancels a waiter, releases a lease, and bypasses every waiter at shutdown", () => {
    const ledger = fresh()
    ledger.acquire(ticket("a", 1000), 0)
    ledger.acquire(ticket("b", 10), 0)
    ledger.acquire(ticket("c", 10), 0)
    assert.deepStrictEqual(ledger.cancel("b", 5).map((r) => r.ticket), ["b"])
    assert.strictEqual(ledger.waitingCount, 1)
    assert.deepStrictEqual(ledger.shutdown(6), [{
      ticket: "c",
      decision: { action: "bypass", reason: "degraded", waitedMs: 6 }
    }])
    ledger.cancel("a", 7)
    assert.strictEqual(ledger.reserved, 0)
  })

  it("expires a lease after the TTL and keeps leases across an epoch change", () => {
    const ledger = fresh()
    ledger.acquire(ticket("a", 100), 0)
    ledger.reconcile(snapshot(1, 0.1, ["http://a"]), 1)
    assert.strictEqual(ledger.leaseCount, 1)
    ledger.reconcile(snapshot(600_000), 600_000)
    assert.strictEqual(ledger.leaseCount, 0)
    assert.strictEqual(ledger.reserved, 0)
    assert.strictEqual(ledger.metrics(600_000, false)["agentic_kv/budget/lease_expired"], 1)
  })

  it("reports Relax's metrics and resets the counters and the usage window", () => {
    const ledger = fresh()
    ledger.acquire(ticket("a", 800), 0)
    ledger.acquire(ticket("b", 400), 0)
    ledger.acquire(ticket("p", 1, true), 0)
    ledger.reconcile(snapshot(1000, 0.5), 1000)
    ledger.release("a", 2000)
    const m = ledger.metrics(2000, true)
    assert.deepStrictEqual(m, {
      "agentic_kv/admission/admit": 2,
      "agentic_kv/admission/wait": 1,
      "agentic_kv/admission/bypass": 1,
      "agentic_kv/admission/bypass_protected": 1,
      "agentic_kv/admission/defer_rate": 0.25,
      "agentic_kv/admission/degraded_rate": 0,
      "agentic_kv/admission/waiting": 0,
      "agentic_kv/admission/wait_seconds_mean": 2,
      "agentic_kv/budget/ceiling": 1000,
      "agentic_kv/budget/reserved": 400,
      "agentic_kv/budget/available_tokens": 600,
      "agentic_kv/budget/lease_count": 1,
      "agentic_kv/budget/kv_token_usage_mean": 0.3,
      "agentic_kv/budget/kv_token_usage_max": 0.5,
      "agentic_kv/budget/epoch": 1,
      "agentic_kv/budget/degraded": 0,
      "agentic_kv/budget/reserved_utilization": 0.4
    })
    const after = ledger.metrics(2000, false)
    assert.isUndefined(after["agentic_kv/admission/admit"])
    assert.strictEqual(after["agentic_kv/budget/kv_token_usage_mean"], 0.5, "a new window starts from the last reading")
  })

  it("returns to zero after any script of admits, aborts, interruptions, weight-update pauses and step closes", () => {
    type Op =
      | { readonly op: "start"; readonly tokens: number; readonly protected: boolean }
      | { readonly op: "answer" | "abort" | "interrupt"; readonly pick: number }
      | { readonly op: "weightPause" | "stepClose" }
      | { readonly op: "reconcile"; readonly usage: number; readonly healthy: boolean }
      | { readonly op: "tick"; readonly ms: number }
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({
        op: fc.constant("start" as const),
        tokens: fc.integer({ min: 1, max: 1200 }),
        protected: fc.boolean()
      }),
      fc.record({ op: fc.constantFrom("answer" as const, "abort" as const, "interrupt" as const), pick: fc.nat() }),
      fc.record({ op: fc.constantFrom("weightPause" as const, "stepClose" as const) }),
      fc.record({
        op: fc.constant("reconcile" as const),
        usage: fc.double({ min: 0, max: 1, noNaN: true }),
        healthy: fc.boolean()
      }),
      fc.record({ op: fc.constant("tick" as const), ms: fc.integer({ min: 0, max: 40_000 }) })
    )
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 120 }), (ops) => {
        const ledger = fresh()
        let now = 0
        let seq = 0
        // What the service does: an attempt waits, then holds a lease or runs without; every end releases or cancels.
        const waiting = new Set<string>()
        const running = new Set<string>()
        const take = (resolved: ReadonlyArray<Ledger.Resolved>) => {
          for (const r of resolved) {
            assert.isTrue(waiting.delete(r.ticket), `resolved a ticket that was not waiting: ${r.ticket}`)
            if (r.decision.action === "admit" || r.decision.reason !== "cancelled") running.add(r.ticket)
          }
        }
        const end = (id: string) => {
          if (waiting.has(id)) {
            take(ledger.cancel(id, now))
          } else if (running.delete(id)) {
            take(ledger.release(id, now))
          }
        }
        const cutAll = () => {
          for (const id of [...waiting, ...running]) end(id)
        }
        for (const op of ops) {
          switch (op.op) {
            case "start": {
              const id = `r${seq++}`
              const { decision, resolved } = ledger.acquire(ticket(id, op.tokens, op.protected), now)
              take(resolved)
              if (decision.action === "wait") waiting.add(id)
              else running.add(id)
              break
            }
            case "answer":
            case "abort":
            case "interrupt": {
              const all = [...(op.op === "interrupt" ? waiting : []), ...running]
              if (all.length > 0) end(all[op.pick % all.length]!)
              break
            }
            case "weightPause":
            case "stepClose":
              cutAll()
              break
            case "reconcile":
              take(ledger.reconcile(
                op.healthy ? snapshot(now, op.usage) : { at: now, workers: [] },
                now
              ))
              break
            case "tick":
              now += op.ms
              break
          }
          assert.isAtMost(ledger.reserved, Math.max(ledger.ceiling, ledger.reserved))
          assert.isAtLeast(ledger.reserved, 0)
        }
        cutAll()
        assert.strictEqual(ledger.reserved, 0)
        assert.strictEqual(ledger.leaseCount, 0)
        assert.strictEqual(ledger.waitingCount, 0)
        assert.strictEqual(waiting.size + running.size, 0)
      }),
      { numRuns: 300 }
    )
  })
})
