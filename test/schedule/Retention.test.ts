import { assert, describe, it } from "@effect/vitest"
import * as Retention from "../../src/schedule/Retention.ts"

const partial: Retention.Mode = { partialRollout: true, fullyAsync: false }
const fullyAsync: Retention.Mode = { partialRollout: false, fullyAsync: true }

describe("step close condition", () => {
  it("closes with interrupted Groups owed only in fully async mode, outside the final backfill", () => {
    assert.isTrue(Retention.closesWithInterrupted(fullyAsync, false))
    assert.isFalse(Retention.closesWithInterrupted(fullyAsync, true))
    assert.isFalse(Retention.closesWithInterrupted(partial, false))
    assert.isFalse(Retention.closesWithInterrupted(Retention.synchronous, false))
  })

  it("the final backfill is fully async's extra step rollout_id == num_rollout", () => {
    assert.isFalse(Retention.isFinalBackfill(fullyAsync, 4, 5))
    assert.isTrue(Retention.isFinalBackfill(fullyAsync, 5, 5))
    assert.isFalse(Retention.isFinalBackfill(partial, 5, 5))
    assert.strictEqual(Retention.stepCount(fullyAsync, 5), 6)
    assert.strictEqual(Retention.stepCount(partial, 5), 5)
  })

  it("retains running Groups across the boundary only with partial rollout or fully async, never in the final backfill", () => {
    assert.isFalse(Retention.retainsAcrossSteps(Retention.synchronous, false))
    assert.isTrue(Retention.retainsAcrossSteps(partial, false))
    assert.isTrue(Retention.retainsAcrossSteps(fullyAsync, false))
    assert.isFalse(Retention.retainsAcrossSteps(fullyAsync, true))
  })
})

describe("protection", () => {
  it("protects after --partial-rollout-max-aborted-count aborts, only with partial rollout", () => {
    const limited = { ...partial, maxAbortedCount: 2 }
    assert.isFalse(Retention.isProtected(limited, 1))
    assert.isTrue(Retention.isProtected(limited, 2))
    assert.isFalse(Retention.isProtected(partial, 99))
    assert.isFalse(Retention.isProtected({ ...fullyAsync, maxAbortedCount: 1 }, 3))
  })
})

describe("interrupted Sessions and Groups", () => {
  const parked = { running: false, aborted: true }
  const queued = { running: false, aborted: false }
  const running = { running: true, aborted: false }

  it("a Session is interrupted when its agent is between requests, or every live request is parked after an abort", () => {
    assert.isTrue(Retention.isSessionInterrupted({ active: true, protected: false, requests: [] }))
    assert.isTrue(Retention.isSessionInterrupted({ active: true, protected: false, requests: [parked, queued] }))
    assert.isFalse(Retention.isSessionInterrupted({ active: true, protected: false, requests: [queued] }))
    assert.isFalse(Retention.isSessionInterrupted({ active: true, protected: false, requests: [parked, running] }))
    assert.isFalse(Retention.isSessionInterrupted({ active: true, protected: true, requests: [] }))
    assert.isFalse(Retention.isSessionInterrupted({ active: false, protected: false, requests: [] }))
  })

  it("a Group is interrupted when all its unfinished Sessions are, and it neither failed nor left Runtime", () => {
    assert.isTrue(
      Retention.isGroupInterrupted({ runtime: true, failed: false, unfinishedSessions: 2, interruptedSessions: 2 })
    )
    assert.isFalse(
      Retention.isGroupInterrupted({ runtime: true, failed: false, unfinishedSessions: 2, interruptedSessions: 1 })
    )
    assert.isFalse(
      Retention.isGroupInterrupted({ runtime: true, failed: false, unfinishedSessions: 0, interruptedSessions: 0 })
    )
    assert.isFalse(
      Retention.isGroupInterrupted({ runtime: true, failed: true, unfinishedSessions: 1, interruptedSessions: 1 })
    )
    assert.isFalse(
      Retention.isGroupInterrupted({ runtime: false, failed: false, unfinishedSessions: 1, interruptedSessions: 1 })
    )
  })
})
