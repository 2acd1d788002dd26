import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as CustomAdvantage from "../../src/credit/CustomAdvantage.ts"
import * as Group from "../../src/credit/Group.ts"
import * as Samples from "./samples.ts"

const applied = (result: unknown, group: Group.Group) => {
  const out = CustomAdvantage.apply(result, group)
  if (Result.isFailure(out)) throw new Error(out.failure.message)
  return out.success
}

const errorOf = (result: unknown, group: Group.Group) => {
  const out = CustomAdvantage.apply(result, group)
  if (Result.isSuccess(out)) throw new Error("expected an AdvantageError")
  return out.failure
}

describe("custom advantage hook input", () => {
  it("is the guide's mapping: one per Session in Group order, export name → final metadata", () => {
    assert.deepStrictEqual(CustomAdvantage.hookInput(Samples.guideGroup()), [
      { main: { outcome: 1.0 }, searcher_0: { usefulness: 0.6 } },
      { main: { outcome: 0.0 }, searcher_0: { usefulness: 0.2 } }
    ])
  })

  it("keys an implicit export by \"null\"", () => {
    const group = { groupIndex: 0, sessions: [Samples.session("a", [Samples.sample({ metadata: { outcome: 1 } })])] }
    assert.deepStrictEqual(CustomAdvantage.hookInput(group), [{ null: { outcome: 1 } }])
  })

  it("hands the hook copies, so mutating them leaves the samples alone", () => {
    const group = Samples.guideGroup()
    const input = CustomAdvantage.hookInput(group)
    input[0]!["main"]!["outcome"] = -1
    assert.strictEqual(group.sessions[0]!.exports[0]!.metadata["outcome"], 1.0)
  })
})

describe("custom advantage results", () => {
  it("sets one scalar per context, matched by name in any order", () => {
    const out = applied([{ searcher_0: 0.6, main: 1.0 }, { main: 0.0, searcher_0: 0.0 }], Samples.guideGroup())
    assert.notStrictEqual(out, "filtered")
    if (out === "filtered") return
    assert.deepStrictEqual(
      Group.rows(out).map((row) => [row.session_id, row.export_name, row.advantage]),
      [["first", "main", 1.0], ["first", "searcher_0", 0.6], ["second", "main", 0.0], ["second", "searcher_0", 0.0]]
    )
  })

  it("expands a per-turn list over each turn's token span with 0 on observation tokens", () => {
    const out = applied([{ main: [0.5, 1.5], searcher_0: [2] }, { main: [-1, 2], searcher_0: 0 }], Samples.guideGroup())
    if (out === "filtered") throw new Error("filtered")
    const rows = Group.rows(out)
    assert.deepStrictEqual(rows[0]!.advantage, [0.5, 0.5, 0, 0, 1.5, 1.5])
    assert.deepStrictEqual(rows[1]!.advantage, [2, 2, 2])
    assert.deepStrictEqual(rows[2]!.advantage, [-1, -1, 0, 0, 2, 2])
  })

  it("ignores names the Session did not export", () => {
    const out = applied([{ main: 1, searcher_0: 1, searcher_9: 5 }, { main: 0, searcher_0: 0 }], Samples.guideGroup())
    assert.notStrictEqual(out, "filtered")
  })

  it("filters the whole Group on null or undefined", () => {
    assert.strictEqual(applied(null, Samples.guideGroup()), "filtered")
    assert.strictEqual(applied(undefined, Samples.guideGroup()), "filtered")
  })

  it("rejects a result that is not a list", () => {
    const error = errorOf({ main: 1 }, Samples.guideGroup())
    assert.include(error.message, "Group 3")
    assert.include(error.message, "must return a list with one mapping per Session (2 here)")
  })

  it("rejects a list of the wrong length", () => {
    const error = errorOf([{ main: 1, searcher_0: 1 }], Samples.guideGroup())
    assert.include(error.message, "returned 1 mapping for 2 Sessions")
  })

  it("rejects an item that is not a mapping, naming the session index", () => {
    const error = errorOf([{ main: 1, searcher_0: 1 }, [1, 2]], Samples.guideGroup())
    assert.strictEqual(error.sessionIndex, 1)
    assert.include(error.message, "session index 1 (Session second)")
  })

  it("rejects a mapping without an exported name, naming the session index and context", () => {
    const error = errorOf([{ main: 1, searcher_0: 1 }, { main: 1, searcher0: 1 }], Samples.guideGroup())
    assert.include(error.message, `session index 1 (Session second), context "searcher_0"`)
    assert.include(error.message, `keys returned: "main", "searcher0"`)
  })

  it("reminds that an implicit export's key is \"null\"", () => {
    const group = { groupIndex: 0, sessions: [Samples.session("a", [Samples.sample()])] }
    const error = errorOf([{ main: 1 }], group)
    assert.include(error.message, "context null (implicit export)")
    assert.include(error.message, `an implicit export's key is "null"`)
  })

  it("rejects NaN and Infinity", () => {
    const nan = errorOf([{ main: 1, searcher_0: Number.NaN }, { main: 0, searcher_0: 0 }], Samples.guideGroup())
    assert.include(nan.message, `session index 0 (Session first), context "searcher_0"`)
    assert.include(nan.message, "the value is NaN")
    const inf = errorOf(
      [{ main: 1, searcher_0: 1 }, { main: Number.NEGATIVE_INFINITY, searcher_0: 0 }],
      Samples.guideGroup()
    )
    assert.include(inf.message, `session index 1 (Session second), context "main"`)
    assert.include(inf.message, "-Infinity")
  })

  it("rejects values that are neither numbers nor lists", () => {
    const error = errorOf([{ main: "1.0", searcher_0: 1 }, { main: 0, searcher_0: 0 }], Samples.guideGroup())
    assert.include(error.message, `the value is "1.0"; it must be a finite number or a list`)
    const bool = errorOf([{ main: true, searcher_0: 1 }, { main: 0, searcher_0: 0 }], Samples.guideGroup())
    assert.include(bool.message, "the value is true")
  })

  it("rejects a per-turn list whose length is not the number of assistant turns", () => {
    const error = errorOf([{ main: [1, 2, 3], searcher_0: 1 }, { main: 0, searcher_0: 0 }], Samples.guideGroup())
    assert.include(error.message, `context "main"`)
    assert.include(error.message, "the list has 3 values but the context has 2 assistant turns")
  })

  it("rejects a per-turn list with a non-finite entry, naming the turn", () => {
    const error = errorOf([{ main: [1, Number.NaN], searcher_0: 1 }, { main: 0, searcher_0: 0 }], Samples.guideGroup())
    assert.include(error.message, "the value for turn 1 is NaN, not a finite number")
  })
})
