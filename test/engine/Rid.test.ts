import { assert, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import * as Rid from "../../src/engine/Rid.ts"

// The rid as it was first written: `relax-` and the first 32 hex digits of the SHA-256.
const reference = (input: Rid.RidInput): string =>
  "relax-" +
  createHash("sha256").update(
    `${input.sessionId}\u0000${input.parent}\u0000${input.turn}${input.attempt === 0 ? "" : `\u0000${input.attempt}`}`
  ).digest("hex").slice(0, 32)

describe("Rid", () => {
  it("is `relax-` and the first 32 hex digits of the SHA-256 of session, parent, turn and attempt", () => {
    for (
      const input of [
        { sessionId: "s", parent: "root", turn: 0, attempt: 0 },
        { sessionId: "group-3/7", parent: "a".repeat(64), turn: 12, attempt: 2 },
        { sessionId: "é ünïcode ✓", parent: "p", turn: 1, attempt: 0 }
      ]
    ) {
      const rid = Rid.forAttempt(input)
      assert.strictEqual(rid, reference(input))
      assert.strictEqual(rid.length, Rid.length)
      assert.isTrue(Rid.isValid(rid))
    }
  })
})
