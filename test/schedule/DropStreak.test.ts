import { assert, describe, it } from "@effect/vitest"
import * as DropStreak from "../../src/schedule/DropStreak.ts"

const reason = (groupId: string, detail = "Managed command agent exited with code 3."): DropStreak.DropReason => ({
  groupId,
  type: "AgentExecutionError",
  detail
})

describe("DropStreak", () => {
  it("trips at its limit and names the last drop", () => {
    const streak = DropStreak.dropStreak(3)
    assert.isFalse(streak.dropped(reason("g0")))
    assert.isFalse(streak.dropped(reason("g1")))
    assert.isTrue(streak.dropped(reason("g2")))
    const error = streak.tripped()
    assert.strictEqual(error?.dropped, 3)
    assert.strictEqual(error?.last.groupId, "g2")
  })

  it("starts again after an accepted or filtered Group", () => {
    const streak = DropStreak.dropStreak(2)
    streak.dropped(reason("g0"))
    streak.kept()
    assert.strictEqual(streak.count(), 0)
    assert.isFalse(streak.dropped(reason("g1")))
  })

  it("stays tripped once the limit was reached, even after a kept Group", () => {
    const streak = DropStreak.dropStreak(1)
    streak.dropped(reason("g0"))
    streak.kept()
    assert.isTrue(streak.dropped(reason("g1")))
    assert.strictEqual(streak.tripped()?.last.groupId, "g0")
  })

  it("never trips with limit 0 (unlimited)", () => {
    const streak = DropStreak.dropStreak(0)
    for (let i = 0; i < 100; i++) assert.isFalse(streak.dropped(reason(`g${i}`)))
    assert.strictEqual(streak.tripped(), undefined)
  })

  it("quotes at most ten lines of the last drop's detail, each cut at 240 characters, and says how to go on", () => {
    const detail = ["x".repeat(300), ...Array.from({ length: 11 }, (_, i) => `line ${i + 1}`)].join("\n")
    const message = new DropStreak.TooManyDroppedGroupsError({ dropped: 4, last: reason("g9", detail) }).message
    const lines = message.split("\n")
    assert.strictEqual(
      lines[0],
      "4 Groups were dropped in a row (--agentic-max-consecutive-drops 4); the agent seems to fail on every Group, " +
        "so the rollout stopped."
    )
    assert.strictEqual(lines[1], "Last drop: group_id=g9 error_type=AgentExecutionError")
    assert.strictEqual(lines[2], `  | ${"x".repeat(240)}...`)
    assert.include(message, "  | line 9\n  | ... (2 more lines)")
    assert.include(lines.at(-1) ?? "", "relax-agentic check")
  })
})
