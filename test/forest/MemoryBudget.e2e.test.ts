/**
 * The memory guard: the heap a Session's turns retain per stored token, measured deterministically (forced full
 * collections in a child process: vitest's workers cannot force them) over a fixed workload of 1,000
 * Sessions of two turns each through the generation core and the embedded engine (test/support/sessionMemory.ts).
 * It fails when a change keeps more per Session: a cache holding one more copy of each prompt's ids adds 3–5 bytes a
 * token (docs/performance.md, section 3, "Where a Session's bytes are").
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import type * as SessionMemory from "../support/sessionMemory.ts"

/** A little over what the workload measures (12.5 bytes a token on 6 December 2026, evening); lower it when a change saves. */
const BUDGET_BYTES_PER_TOKEN = 13.0

const probe = fileURLToPath(new URL("../support/sessionMemoryProbe.ts", import.meta.url))

const measure = (sessions: number): Promise<SessionMemory.SessionMemory> =>
  new Promise((resolve, reject) => {
    execFile(process.execPath, [probe, String(sessions)], (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`memory probe failed: ${error.message}\n${stderr}`))
      else resolve(JSON.parse(stdout) as SessionMemory.SessionMemory)
    })
  })

describe("memory per stored token", () => {
  it(`1,000 Sessions of two turns retain at most ${BUDGET_BYTES_PER_TOKEN} bytes a stored token`, async () => {
    const measured = await measure(1000)
    assert.strictEqual(measured.sessions, 1000)
    // 356 tokens of the first turn and 57 of the second (the answers and the added message) per Session.
    assert.strictEqual(measured.storedTokens, 413_000)
    assert.isAtMost(
      measured.bytesPerToken,
      BUDGET_BYTES_PER_TOKEN,
      `${measured.bytesPerToken.toFixed(2)} bytes a stored token (${measured.bytes} bytes for 1,000 Sessions)`
    )
  }, 120_000)
})
