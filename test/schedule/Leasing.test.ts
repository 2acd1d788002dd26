import { assert, describe, it } from "@effect/vitest"
import * as Leasing from "../../src/schedule/Leasing.ts"

const train = (overrides: Partial<Leasing.StepRequest> = {}): Leasing.StepRequest => ({
  rolloutId: 0,
  debt: 2,
  surplus: 0,
  nextStep: true,
  refill: true,
  ...overrides
})

/** Prepare Groups from a compact spec: `r` ready, `w` warming (barrier incomplete), `d` dropped (not live). */
const prepare = (spec: string): Array<Leasing.PrepareGroup<string>> =>
  [...spec].map((c, i) => ({ key: `g${i}`, ready: c === "r" || c === "d", live: c !== "d" }))

describe("openStep", () => {
  it("keeps the surplus only with refill and bounds starts by the debt without it (Eval)", () => {
    const trainLedger = Leasing.openStep(train({ surplus: 2 }), false)
    assert.strictEqual(trainLedger.surplus, 2)
    assert.strictEqual(trainLedger.startLimit, Infinity)
    const evalLedger = Leasing.openStep(train({ surplus: 2, refill: false, debt: 5 }), false)
    assert.strictEqual(evalLedger.surplus, 0)
    assert.strictEqual(evalLedger.startLimit, 5)
  })

  it("fills capacity and keeps Prepare Groups only with prelaunch when a next step follows", () => {
    const cases: ReadonlyArray<readonly [boolean, boolean, boolean]> = [
      [true, true, true],
      [true, false, false],
      [false, true, false],
      [false, false, false]
    ]
    for (const [prelaunch, nextStep, expected] of cases) {
      const ledger = Leasing.openStep(train({ nextStep }), prelaunch)
      assert.strictEqual(ledger.fillCapacity, expected, `prelaunch=${prelaunch} nextStep=${nextStep}`)
      assert.strictEqual(ledger.keepPrepare, expected, `prelaunch=${prelaunch} nextStep=${nextStep}`)
    }
  })
})

describe("nextMoves", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly request: Partial<Leasing.StepRequest>
    readonly prelaunch?: boolean
    readonly capacity: number
    readonly resident: number
    readonly prepare: string
    readonly leased: number
    readonly started?: number
    readonly lease: ReadonlyArray<string>
    readonly start: number
  }> = [
    {
      name: "an empty pool starts what the step needs",
      request: { debt: 2 },
      capacity: 4,
      resident: 0,
      prepare: "",
      leased: 0,
      lease: [],
      start: 2
    },
    {
      name: "the surplus is started too",
      request: { debt: 2, surplus: 1 },
      capacity: 4,
      resident: 0,
      prepare: "",
      leased: 0,
      lease: [],
      start: 3
    },
    {
      name: "starts stop at capacity",
      request: { debt: 6 },
      capacity: 4,
      resident: 1,
      prepare: "w",
      leased: 0,
      lease: [],
      start: 3
    },
    {
      name: "ready Groups are leased FIFO, skipping warming ones",
      request: { debt: 2 },
      capacity: 4,
      resident: 3,
      prepare: "wrr",
      leased: 0,
      lease: ["g1", "g2"],
      start: 0
    },
    {
      name: "no more leases than the step still needs (debt + surplus - leased)",
      request: { debt: 2, surplus: 1 },
      capacity: 4,
      resident: 4,
      prepare: "rrr",
      leased: 2,
      lease: ["g0"],
      start: 0
    },
    {
      name: "waiting Prepare Groups cover the need before new ones start",
      request: { debt: 3 },
      capacity: 6,
      resident: 2,
      prepare: "ww",
      leased: 0,
      lease: [],
      start: 1
    },
    {
      name: "a dropped Prepare Group whose finish is not seen yet still occupies its place in the queue",
      request: { debt: 2 },
      capacity: 4,
      resident: 1,
      prepare: "dw",
      leased: 0,
      lease: ["g0"],
      start: 0
    },
    {
      name: "prelaunch with a next step fills the whole capacity",
      request: { debt: 1 },
      prelaunch: true,
      capacity: 4,
      resident: 1,
      prepare: "r",
      leased: 0,
      lease: ["g0"],
      start: 3
    },
    {
      name: "prelaunch in the last step starts only what the step needs",
      request: { debt: 1, nextStep: false },
      prelaunch: true,
      capacity: 4,
      resident: 0,
      prepare: "",
      leased: 0,
      lease: [],
      start: 1
    },
    {
      name: "without refill (Eval) at most the debt is started in all",
      request: { debt: 3, refill: false },
      capacity: 8,
      resident: 0,
      prepare: "",
      leased: 0,
      started: 2,
      lease: [],
      start: 1
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const ledger = Leasing.started(Leasing.openStep(train(c.request), c.prelaunch ?? false), c.started ?? 0)
      const moves = Leasing.nextMoves(
        { capacity: c.capacity, resident: c.resident, prepare: prepare(c.prepare), leased: c.leased },
        ledger
      )
      assert.deepStrictEqual(moves, { lease: c.lease, start: c.start })
    })
  }

  it("does nothing once the debt is paid", () => {
    const ledger = Leasing.recordFinish(Leasing.openStep(train({ debt: 1 }), false), "accepted").ledger
    assert.deepStrictEqual(
      Leasing.nextMoves({ capacity: 4, resident: 0, prepare: prepare("r"), leased: 0 }, ledger),
      { lease: [], start: 0 }
    )
  })
})

describe("recordFinish", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly refill: boolean
    readonly debt: number
    readonly finish: Leasing.Finish
    readonly expected: { debt: number; accepted: number; dropped: number; filtered: number; take: boolean }
  }> = [
    {
      name: "an accepted Group pays one debt",
      refill: true,
      debt: 2,
      finish: "accepted",
      expected: { debt: 1, accepted: 1, dropped: 0, filtered: 0, take: true }
    },
    {
      name: "an accepted Group after the debt is paid is not taken",
      refill: true,
      debt: 0,
      finish: "accepted",
      expected: { debt: 0, accepted: 0, dropped: 0, filtered: 0, take: false }
    },
    {
      name: "a dropped Group is replaced with refill",
      refill: true,
      debt: 2,
      finish: "dropped",
      expected: { debt: 2, accepted: 0, dropped: 1, filtered: 0, take: false }
    },
    {
      name: "a filtered Group is replaced with refill",
      refill: true,
      debt: 2,
      finish: "filtered",
      expected: { debt: 2, accepted: 0, dropped: 0, filtered: 1, take: false }
    },
    {
      name: "a dropped Eval Group is just missing: it pays its debt",
      refill: false,
      debt: 2,
      finish: "dropped",
      expected: { debt: 1, accepted: 0, dropped: 1, filtered: 0, take: false }
    },
    {
      name: "a filtered Eval Group pays its debt",
      refill: false,
      debt: 2,
      finish: "filtered",
      expected: { debt: 1, accepted: 0, dropped: 0, filtered: 1, take: false }
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      let ledger = Leasing.openStep(train({ refill: c.refill, debt: Math.max(c.debt, 1) }), false)
      if (c.debt === 0) ledger = Leasing.recordFinish(ledger, "accepted").ledger
      const before = ledger.accepted
      const recorded = Leasing.recordFinish(ledger, c.finish)
      assert.deepStrictEqual({
        debt: recorded.ledger.debt,
        accepted: recorded.ledger.accepted - before,
        dropped: recorded.ledger.dropped,
        filtered: recorded.ledger.filtered,
        take: recorded.take
      }, c.expected)
    })
  }

  it("leaves the ledger it was given unchanged", () => {
    const ledger = Leasing.openStep(train(), false)
    Leasing.recordFinish(ledger, "accepted")
    assert.strictEqual(ledger.debt, 2)
  })
})

describe("closing a step", () => {
  it("interrupts the leased Groups still running (no partial rollout)", () => {
    assert.deepStrictEqual(Leasing.closeRuntime(Leasing.openStep(train(), false), ["a", "b"]), {
      interrupt: ["a", "b"],
      retain: []
    })
  })

  it("keeps them leased for the next step with retention (partial rollout / fully async)", () => {
    assert.deepStrictEqual(Leasing.closeRuntime(Leasing.openStep(train({ retain: true }), false), ["a", "b"]), {
      interrupt: [],
      retain: ["a", "b"]
    })
  })

  it("closes iff the debt is paid, or once a debt it may carry is at most the interrupted resident Groups", () => {
    // [maxCarriedDebt, debt, interrupted Groups, closes]
    const cases: ReadonlyArray<readonly [number, number, number, boolean]> = [
      [0, 0, 0, true],
      [0, 1, 5, false],
      [2, 2, 2, true],
      [2, 3, 2, false],
      [2, 3, 3, false],
      [4, 0, 0, true]
    ]
    for (const [maxCarriedDebt, debt, interrupted, expected] of cases) {
      const ledger = { ...Leasing.openStep(train({ maxCarriedDebt, debt: Math.max(debt, 1) }), false), debt }
      assert.strictEqual(
        Leasing.closes(ledger, interrupted),
        expected,
        JSON.stringify({ maxCarriedDebt, debt, interrupted })
      )
    }
  })

  it("keeps Prepare Groups for the next step with prelaunch", () => {
    const ledger = Leasing.openStep(train(), true)
    assert.deepStrictEqual(Leasing.closePrepare(ledger, prepare("rwd")), {
      keep: ["g0", "g1", "g2"],
      interrupt: [],
      restart: []
    })
  })

  it("without prelaunch reaps every Prepare Group and restarts the live ones' inputs", () => {
    const ledger = Leasing.openStep(train(), false)
    assert.deepStrictEqual(Leasing.closePrepare(ledger, prepare("rwd")), {
      keep: [],
      interrupt: ["g0", "g1", "g2"],
      restart: ["g0", "g1"]
    })
  })

  it("with prelaunch in the last step reaps them too (Eval may follow)", () => {
    const ledger = Leasing.openStep(train({ nextStep: false }), true)
    assert.deepStrictEqual(Leasing.closePrepare(ledger, prepare("r")).interrupt, ["g0"])
  })
})
