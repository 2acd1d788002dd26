/**
 * The generation core's steps run inline (no tracing backend: one generator from match to commit) and as effects in
 * their own spans (a tracer installed: each step an effect, as every request ran before issue 24's fifth pass): the
 * same completions, counters and SessionForest nodes, token for token and to the simulated millisecond, for Sessions
 * taking turns on the embedded engine's clock while weight updates abort their generations (resumed attempts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Tracing from "../support/tracing.ts"
import * as UpdateScenario from "../support/updateScenario.ts"

const scenario = Effect.map(UpdateScenario.turnsUnderUpdates(), (run) => run.result)

describe("Generation inline and traced", () => {
  it.effect("give the same completions, counters and forest nodes under weight updates", () =>
    Effect.gen(function*() {
      const { spans, tracer } = Tracing.recordingTracer()
      const inline = yield* scenario
      const traced = yield* scenario.pipe(Effect.withTracer(tracer))
      const names = new Set(spans.map((span) => span.name))
      // The traced run opened the steps' spans (so it ran them as effects), with resumed attempts among them.
      for (const name of ["Generation.match", "Generation.attempts", "Generation.attempt", "Generation.parse"]) {
        assert.isTrue(names.has(name), name)
      }
      assert.isTrue(inline.counters.some((c) => c.aborts > 0), "no generation was aborted")
      assert.deepStrictEqual(inline, traced)
    }))
})
