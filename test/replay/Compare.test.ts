/**
 * The answer comparison of `replay` (src/replay/Compare.ts): the first difference between the answer the agent
 * received and today's, as a JSON path (with the character index for texts), leaving out what is per run.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Compare from "../../src/replay/Compare.ts"
import type * as Received from "../../src/replay/Received.ts"

const chat = (id: string, created: number, content: string): Received.Answer => ({
  status: 200,
  body: { id: `chatcmpl_${id}`, created, choices: [{ index: 0, message: { role: "assistant", content } }] }
})

describe("Compare.answer", () => {
  it("the completion's random id and its time are per run: not a difference", () => {
    const a = chat("0123456789abcdef0123456789abcdef", 1_796_548_036, "The answer is 8.")
    const b = chat("fedcba9876543210fedcba9876543210", 1_796_549_000, "The answer is 8.")
    assert.isUndefined(Compare.answer(1, a, b))
  })

  it("a changed text: its JSON path and the index of its first different character", () => {
    const a = chat("0123456789abcdef0123456789abcdef", 1, "The answer is 8.")
    const b = chat("0123456789abcdef0123456789abcdef", 1, "The answer is 9.")
    assert.deepStrictEqual(Compare.answer(2, a, b), {
      request: 2,
      field: "answer body.choices[0].message.content",
      index: 14,
      recorded: "\"The answer is 8.\"",
      now: "\"The answer is 9.\""
    })
  })

  it("a field today's renderer adds, and a frame a stream lost", () => {
    const a = chat("0123456789abcdef0123456789abcdef", 1, "x")
    const b: Received.Answer = { ...a, body: { ...(a.body as Received.JsonObject), system_fingerprint: "fp" } }
    assert.deepStrictEqual(Compare.answer(1, a, b), {
      request: 1,
      field: "answer body.system_fingerprint",
      recorded: "(none)",
      now: "\"fp\""
    })
    const stream: Received.Answer = { status: 200, frames: [{ data: { type: "a" } }, { data: "[DONE]" }] }
    const cut: Received.Answer = { status: 200, frames: [{ data: { type: "a" } }] }
    assert.deepStrictEqual(Compare.answer(3, stream, cut), {
      request: 3,
      field: "answer frames[1]",
      recorded: "{\"data\":\"[DONE]\"}",
      now: "(none)"
    })
  })
})
