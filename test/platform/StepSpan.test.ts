import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, References } from "effect"
import * as StepSpan from "../../layers/platform/StepSpan.ts"
import * as Tracing from "../support/tracing.ts"

const recording = Tracing.recordingTracer

/** The name of the span the effect runs in, or null outside any span. */
const currentSpanName = Effect.currentSpan.pipe(
  Effect.map((span) => span.name),
  Effect.orElseSucceed(() => null)
)

describe("StepSpan", () => {
  it.effect("opens no span under Effect's native tracer, which exports spans nowhere", () =>
    Effect.gen(function*() {
      assert.isFalse(yield* Effect.withFiber((fiber) => Effect.succeed(StepSpan.isTracing(fiber))))
      assert.strictEqual(yield* currentSpanName.pipe(StepSpan.step("Test.step")), null)
      assert.strictEqual(yield* Effect.succeed(42).pipe(StepSpan.step("Test.step")), 42)
    }))

  it.effect("opens the named span with its attributes, nested under the caller's, when a tracer is installed", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      const inner = currentSpanName.pipe(StepSpan.step("Test.inner", { rid: "r1" }))
      const names = yield* Effect.all([currentSpanName, inner]).pipe(
        StepSpan.step("Test.outer"),
        Effect.withTracer(tracer)
      )
      assert.deepStrictEqual(names, ["Test.outer", "Test.inner"])
      assert.deepStrictEqual(spans.map((span) => span.name), ["Test.outer", "Test.inner"])
      const inner0 = spans[1]
      assert.strictEqual(inner0?.attributes.get("rid"), "r1")
      assert.strictEqual(
        Option.match(inner0?.parent ?? Option.none(), { onNone: () => null, onSome: (parent) => parent.spanId }),
        spans[0]?.spanId
      )
      assert.isTrue(spans.every((span) => span.status._tag === "Ended"))
    }))

  it.effect("opens no span when tracing is disabled, even with a tracer installed", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      const name = yield* currentSpanName.pipe(
        StepSpan.step("Test.step"),
        Effect.withTracer(tracer),
        Effect.provideService(References.TracerEnabled, false)
      )
      assert.strictEqual(name, null)
      assert.deepStrictEqual(spans, [])
    }))

  it.effect("stepOf makes its effect when it runs, in the named span only with a tracer", () =>
    Effect.gen(function*() {
      let made = 0
      const step = StepSpan.stepOf("Test.stepOf", () => {
        made++
        return currentSpanName
      })
      assert.strictEqual(made, 0)
      assert.strictEqual(yield* step, null)
      const { spans, tracer } = recording()
      assert.strictEqual(yield* step.pipe(Effect.withTracer(tracer)), "Test.stepOf")
      assert.strictEqual(made, 2)
      assert.deepStrictEqual(spans.map((span) => span.name), ["Test.stepOf"])
      assert.strictEqual(yield* StepSpan.stepOf("Test.fails", () => Effect.fail("no")).pipe(Effect.flip), "no")
    }))

  it.effect("inline gives the step's generator itself without a tracer, an effect in the named span with one", () =>
    Effect.gen(function*() {
      function* body() {
        const name = yield* currentSpanName
        return `in ${name ?? "none"}`
      }
      const request = (tracing: boolean) =>
        Effect.gen(function*() {
          return yield* StepSpan.inline(tracing, "Test.inline", body())
        })
      const plain = body()
      assert.strictEqual(StepSpan.inline(false, "Test.inline", plain), plain)
      assert.strictEqual(yield* request(false), "in none")
      const { spans, tracer } = recording()
      assert.strictEqual(yield* request(true).pipe(Effect.withTracer(tracer)), "in Test.inline")
      assert.deepStrictEqual(spans.map((span) => span.name), ["Test.inline"])
    }))
})
