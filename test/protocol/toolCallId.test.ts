import { assert, describe, it } from "@effect/vitest"
import * as Completion from "../../src/protocol/Completion.ts"

describe("toolCallId", () => {
  const base = { sessionId: "actor.session-1", responseKey: "rid-7", position: 0 } as const

  it("has the protocol's shape", () => {
    assert.match(Completion.toolCallId({ ...base, prefix: "call_" }), /^call_[0-9a-f]{24}$/)
    assert.match(Completion.toolCallId({ ...base, prefix: "toolu_" }), /^toolu_[0-9a-f]{24}$/)
  })

  it("is the same for the same session, response and position (a retry)", () => {
    assert.strictEqual(
      Completion.toolCallId({ ...base, prefix: "call_" }),
      Completion.toolCallId({ ...base, prefix: "call_" })
    )
    assert.strictEqual(
      Completion.toolCallId({ ...base, prefix: "call_" }).slice(5),
      Completion.toolCallId({ ...base, prefix: "toolu_" }).slice(6)
    )
  })

  it("differs when session, response or position differs", () => {
    const ids = new Set([
      Completion.toolCallId({ ...base, prefix: "call_" }),
      Completion.toolCallId({ ...base, prefix: "call_", position: 1 }),
      Completion.toolCallId({ ...base, prefix: "call_", responseKey: "rid-8" }),
      Completion.toolCallId({ ...base, prefix: "call_", sessionId: "actor.session-2" })
    ])
    assert.strictEqual(ids.size, 4)
  })
})
