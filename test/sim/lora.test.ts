/**
 * Versioned LoRA under fully async training (docs/lora.md), on the simulation of lifecycle.ts under the TestClock:
 * the trainer publishes a new adapter version after every training (10 publications in all, the first before any
 * Session starts) while generation keeps running. Every sample's turns carry the one version its Session bound, the
 * tokens are that version's (recomputed with it), and no worker ever holds more than 2 versions.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as LoraEngine from "../../layers/lora/LoraEngine.ts"
import * as LoraVersions from "../../layers/lora/LoraVersions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as LoraAdapters from "../support/LoraAdapters.ts"
import * as Workload from "../support/Workload.ts"
import * as Lifecycle from "./lifecycle.ts"

const Trace = Schema.Struct({
  turns: Schema.Array(Schema.Struct({ lora_versions: Schema.Array(Schema.String) }))
})

describe("versioned LoRA under fully async training (TestClock)", () => {
  it.effect(
    "10 publications: every sample's turns carry its one bound version, its tokens are that version's, ≤ 2 loaded",
    () =>
      Effect.gen(function*() {
        const { dirs } = yield* LoraAdapters.versions(10)
        const loaded = new Set<string>()
        let mostLoaded = 0
        const published: Array<string> = []
        let versions: LoraVersions.LoraVersionsShape | undefined
        const report = yield* Lifecycle.simulate({
          mode: "fully-async",
          steps: 9,
          batch: 2,
          overSampling: 3,
          concurrency: 3,
          samplesPerPrompt: 2,
          trainSeconds: 60,
          agentTimeout: 3600,
          workload: Workload.longTail(11),
          // The engine with LoRA versions; what its worker holds is watched at every load and unload.
          wrapEngine: (engine) =>
            Effect.gen(function*() {
              const port = engine.adapters!
              const watched: Engine.EngineShape = {
                ...engine,
                adapters: {
                  ...port,
                  load: (worker, adapter) =>
                    Effect.tap(port.load(worker, adapter), () =>
                      Effect.sync(() => {
                        loaded.add(adapter.name)
                        mostLoaded = Math.max(mostLoaded, loaded.size)
                      })),
                  unload: (worker, name) =>
                    Effect.tap(port.unload(worker, name), () => Effect.sync(() => loaded.delete(name)))
                }
              }
              // A publication may wait for a long-tail Session to release its version: longer than any Session runs
              // (the agent timeout), so it never gives up. Its adapter files are read from disk in real time while the
              // clock is driven, so how many simulated seconds it waits varies from run to run.
              const made = yield* LoraVersions.make(watched, {
                mode: "versioned",
                epoch: "0123456789ab",
                capacityWait: "2 hours"
              }).pipe(
                Effect.orDie
              )
              versions = made
              // The first version exists before any Session asks for one.
              published.push((yield* made.publish({ path: dirs[0]! }).pipe(Effect.orDie)).version)
              return LoraEngine.wrap(watched, made)
            }),
          afterTraining: () =>
            Effect.gen(function*() {
              const next = yield* versions!.publish({ path: dirs[published.length]! }).pipe(Effect.orDie)
              published.push(next.version)
            })
        })
        assert.strictEqual(published.length, 10)
        // Fully async parks requests at step boundaries: resumed attempts ran, and carried the version too (below).
        assert.isAbove(report.attempts.filter((a) => a.resumedTokens > 0).length, 0)
        assert.strictEqual(new Set(published).size, 10)
        assert.isAtMost(mostLoaded, 2, "a worker held more than 2 LoRA versions")
        const samples = report.results.flatMap((r) => r.samples)
        assert.isAbove(samples.length, 0)
        const used = new Set<string>()
        for (const sample of samples) {
          const bound = sample.metadata["lora_version"]
          assert.isString(bound)
          used.add(bound as string)
          assert.deepStrictEqual(new Set(sample.lora_versions), new Set([bound]))
          assert.strictEqual(sample.lora_versions?.length, sample.weight_versions.length)
          const turns = Schema.decodeUnknownSync(Trace)(sample.metadata["agentic_trace"]).turns
          for (const turn of turns) assert.deepStrictEqual(new Set(turn.lora_versions), new Set([bound]))
        }
        // Sessions bound several versions over the run (generation never paused for a publication).
        assert.isAbove(used.size, 2)
        // The tokens are the bound version's: regenerated with that adapter they are the same.
        const tokenizer = yield* Tokenizer.Tokenizer
        const check = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
          ...EmbeddedEngine.EmbeddedEngine.instant,
          seed: 42,
          model: { eosProbability: 0 }
        })
        for (const [i, name] of published.entries()) {
          yield* check.adapters!.load("embedded", { name, path: dirs[i]!, pinned: true }).pipe(Effect.orDie)
        }
        let differsFromBase = 0
        for (const sample of samples) {
          const promptLength = sample.tokens.length - sample.response_length
          const [start, end] = sample.turn_spans[0]!
          const request = Lifecycle.turnRequest(
            sample,
            [start, end],
            42 + (sample.index % 2),
            `check-${sample.session_id}`
          )
          const withAdapter = yield* check.generate({ ...request, lora: sample.metadata["lora_version"] as string })
            .pipe(Effect.orDie)
          assert.deepStrictEqual(sample.tokens.slice(promptLength + start, promptLength + end), [
            ...withAdapter.outputIds
          ])
          const base = yield* check.generate({ ...request, rid: `${request.rid}-base` }).pipe(Effect.orDie)
          if (base.outputIds.join() !== withAdapter.outputIds.join()) differsFromBase++
        }
        assert.isAbove(differsFromBase, 0, "the adapters sample as the base model does")
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer), Effect.scoped),
    { timeout: 180_000 }
  )
})
