import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Path from "node:path"
import * as Advantage from "../../examples/multi-agent/advantage.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Cli from "../../src/cli.ts"
import { makeTrainer, memorySink, type RolloutOptionsInput, TrainerService } from "../../src/index.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const config = Cli.readConfigFile(Path.join(root, "examples", "multi-agent", "rollout.json"))

describe("the multi-agent example (Responses lead, Anthropic searchers, custom advantage)", () => {
  it.live(
    "exports main and two searchers per Session and credits them with the example's hook",
    () =>
      Effect.gen(function*() {
        assert.isTrue(Result.isSuccess(config))
        const trainer = yield* TrainerService
        const step = yield* trainer.step(0)
        const names = step.samples.map((s) => s.export_name)
        assert.deepStrictEqual(names, Array.from({ length: 4 }, () => ["main", "searcher_0", "searcher_1"]).flat())
        // The same seed gives the same outcomes; they differ inside the Group, so the credit is not all zero.
        const outcomes = step.samples.filter((s) => s.export_name === "main").map((s) => s.metadata["outcome"])
        assert.deepStrictEqual(outcomes, [0, 1, 0, 0])
        // The credit is exactly what advantage.ts computes from the exported metadata, Session by Session.
        const bySession = [0, 1, 2, 3].map((i) => {
          const contexts = step.samples.slice(i * 3, i * 3 + 3)
          return Object.fromEntries(contexts.map((s) => [s.export_name ?? "null", s.metadata]))
        })
        const expected = Advantage.advantage(bySession)
        step.samples.forEach((sample, i) => {
          assert.strictEqual(
            sample.advantage,
            expected[Math.floor(i / 3)]![sample.export_name ?? "null"],
            `sample ${i}`
          )
        })
        for (const sample of step.samples) {
          assert.strictEqual(sample.status, "completed")
          assert.strictEqual(sample.turn_spans.length, 2)
          if (sample.export_name === "main") {
            assert.include(sample.prompt, "You are the lead researcher")
            assert.include(sample.response, "delegate_search")
            assert.strictEqual(sample.reward, sample.metadata["outcome"])
          } else {
            assert.include(sample.prompt, "You are a searcher")
            assert.include(sample.response, "search_notes")
            assert.isNull(sample.reward)
          }
        }
        // A useful searcher found the answer the lead then gave.
        const useful = step.samples.find((s) => s.metadata["usefulness"] === 1)
        assert.isDefined(useful)
        assert.include(useful!.response, "Jupiter")
        assert.isNotNull(step.microBatches)
      }).pipe(Effect.provide(makeTrainer(
        { ...(Result.isSuccess(config) ? config.success : {}), rolloutBatchSize: 1 } as RolloutOptionsInput,
        { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant }
      ))),
    { timeout: 120_000 }
  )
})
