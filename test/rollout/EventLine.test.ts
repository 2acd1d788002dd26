import { assert, describe, it } from "@effect/vitest"
import * as EventLine from "../../src/observability/EventLine.ts"

describe("event lines", () => {
  it("render like the reference without a TTY: plain badge, Python values, None fields left out", () => {
    assert.strictEqual(
      EventLine.formatEvent("accounting_start", { rollout: 3, sessions: 64, groups: 8, final_backfill: false }, false),
      "AGENTIC ROLLOUT event=accounting_start rollout=3 sessions=64 groups=8 final_backfill=False"
    )
    assert.strictEqual(
      EventLine.formatEvent("idle_heartbeat", {
        rollout: 0,
        debt: 2,
        skipped: undefined,
        state: { a: 1, b: "x", c: true }
      }, false),
      "AGENTIC ROLLOUT event=idle_heartbeat rollout=0 debt=2 state={'a': 1, 'b': 'x', 'c': True}"
    )
    assert.strictEqual(EventLine.formatStatus("Dropped 1 group", false), "AGENTIC Dropped 1 group")
  })

  it("carry the ANSI badge only on a TTY", () => {
    const line = EventLine.formatEvent("accounting_end", { rollout: 0 }, true)
    assert.strictEqual(
      line,
      "\u001b[48;5;60m\u001b[1;38;5;231m AGENTIC ROLLOUT \u001b[0m \u001b[1;38;5;213mevent=accounting_end rollout=0\u001b[0m"
    )
    assert.include(EventLine.formatStatus("Filtered 1 group", true), "\u001b[48;5;54m")
  })
})
