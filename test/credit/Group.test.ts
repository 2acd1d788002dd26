import { assert, describe, it } from "@effect/vitest"
import { Option, Result } from "effect"
import * as Group from "../../src/credit/Group.ts"
import * as Samples from "./samples.ts"

const failureOf = <E>(result: Result.Result<void, E>): E | undefined => Option.getOrUndefined(Result.getFailure(result))

const multi = { customAdvantagePath: "hooks/advantage.ts", useDynamicBatchSize: true }

describe("export rules", () => {
  it("accepts one context per Session without any hook", () => {
    const group = {
      groupIndex: 0,
      sessions: [Samples.session("a", [Samples.sample()]), Samples.session("b", [Samples.sample()])]
    }
    assert.isTrue(Result.isSuccess(Group.validateExports(group, { useDynamicBatchSize: false })))
  })

  it("accepts several contexts per Session with a custom advantage hook and dynamic batching", () => {
    assert.isTrue(Result.isSuccess(Group.validateExports(Samples.guideGroup(), multi)))
  })

  it("requires --agentic-custom-advantage-path for more than one context per Session", () => {
    const error = failureOf(Group.validateExports(Samples.guideGroup(), { useDynamicBatchSize: true }))
    assert.strictEqual(error?._tag, "CreditConfigError")
    assert.include(error?.message, `Session first in Group 3 exported 2 contexts ("main", "searcher_0")`)
    assert.include(error?.message, "requires --agentic-custom-advantage-path")
  })

  it("requires dynamic batching for more than one context per Session", () => {
    const error = failureOf(
      Group.validateExports(Samples.guideGroup(), { customAdvantagePath: "a.ts", useDynamicBatchSize: false })
    )
    assert.include(error?.message, "multi-context export requires --use-dynamic-batch-size with --max-tokens-per-gpu")
  })

  it("rejects a Session without exports and duplicate names", () => {
    const empty = failureOf(Group.validateExports({ groupIndex: 1, sessions: [Samples.session("a", [])] }, multi))
    assert.include(empty?.message, "Session a in Group 1 exported no context")
    const twice = failureOf(Group.validateExports(
      {
        groupIndex: 1,
        sessions: [
          Samples.session("a", [Samples.sample({ export_name: "main" }), Samples.sample({ export_name: "main" })])
        ]
      },
      multi
    ))
    assert.include(twice?.message, `exported context "main" more than once`)
  })

  it("lists rows Session by Session and puts replaced rows back in place", () => {
    const group = Samples.guideGroup()
    const rows = Group.rows(group)
    assert.deepStrictEqual(rows.map((row) => `${row.session_id}/${row.export_name}`), [
      "first/main",
      "first/searcher_0",
      "second/main",
      "second/searcher_0"
    ])
    const replaced = Group.withRows(group, rows.map((row, i) => ({ ...row, advantage: i })))
    assert.deepStrictEqual(replaced.sessions.map((s) => s.exports.map((row) => row.advantage)), [[0, 1], [2, 3]])
  })
})
