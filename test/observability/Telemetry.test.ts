import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as OutputPaths from "../../src/rollout/OutputPaths.ts"

describe("progress", () => {
  it.effect("counts scored sessions and draws only on a TTY", () =>
    Effect.gen(function*() {
      const tty = Telemetry.memorySink(true)
      const plain = Telemetry.memorySink(false)
      for (const sink of [tty, plain]) {
        const telemetry = Telemetry.make(sink)
        yield* Effect.scoped(Effect.gen(function*() {
          const bar = yield* telemetry.progress({
            description: "Rollout 0 generation",
            total: 8,
            unit: "session",
            showPrepared: true
          })
          yield* bar.advance(4)
          yield* bar.setPrepared(2)
          yield* bar.advance(8)
          assert.deepStrictEqual(yield* bar.snapshot, { scored: 8, total: 8, prepared: 2 })
        }))
      }
      assert.strictEqual(plain.captured.frames.length, 0)
      assert.strictEqual(
        tty.captured.frames.at(-1),
        "Rollout 0 generation: ######################## 8/8 session [scored=8, prepared=2]"
      )
    }))
})

describe("progress without a TTY", () => {
  it.effect("prints a one-line status every interval while the step runs, and nothing after it", () =>
    Effect.gen(function*() {
      const plain = Telemetry.memorySink(false)
      const telemetry = Telemetry.make(plain)
      yield* Effect.scoped(Effect.gen(function*() {
        const bar = yield* telemetry.progress({
          description: "Rollout 3 generation",
          total: 16,
          unit: "session",
          showPrepared: false
        })
        yield* bar.advance(5)
        yield* TestClock.adjust("29 seconds")
        assert.deepStrictEqual(plain.captured.lines, [])
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(plain.captured.lines, ["AGENTIC Rollout 3 generation: 5/16 session [scored=5]"])
        yield* bar.advance(3)
        yield* TestClock.adjust("30 seconds")
        assert.strictEqual(plain.captured.lines.at(-1), "AGENTIC Rollout 3 generation: 8/16 session [scored=8]")
      }))
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(plain.captured.lines.length, 2)
      assert.strictEqual(plain.captured.frames.length, 0)
    }))

  it.effect("prints no status lines on a TTY (the bar is drawn instead)", () =>
    Effect.gen(function*() {
      const tty = Telemetry.memorySink(true)
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Telemetry.make(tty).progress({
          description: "Eval gsm8k",
          total: 4,
          unit: "sample",
          showPrepared: false
        })
        yield* TestClock.adjust("90 seconds")
      }))
      assert.deepStrictEqual(tty.captured.lines, [])
    }))
})

describe("debug dump paths", () => {
  it("fill {rollout_id} in the debug dump template", () => {
    assert.strictEqual(OutputPaths.debugDumpPath("/d/dump_{rollout_id}.jsonl", 3), "/d/dump_3.jsonl")
    assert.strictEqual(OutputPaths.debugDumpPath("/d/dump_{rollout_id}.jsonl", "eval_2"), "/d/dump_eval_2.jsonl")
  })
})
