/**
 * In-place LoRA (`--lora-adapter-mode` alone, docs/lora.md) on the SGLang double: a publication is the two-phase
 * weight update — pause, the fixed adapter unloaded and reloaded on every worker, resume labelled with the adapter
 * version — so attempts carry the adapter version in `weight_versions`, and one cut by the pause resumes on the new.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as SglangEngine from "../../layers/engine/sglang/SglangEngine.ts"
import * as LoraEngine from "../../layers/lora/LoraEngine.ts"
import * as LoraVersions from "../../layers/lora/LoraVersions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Rid from "../../src/engine/Rid.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as LoraAdapters from "../support/LoraAdapters.ts"

const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]
let rids = 0
const request = (sessionId: string): Engine.GenerateRequest => ({
  inputIds: prompt,
  sampling: { maxNewTokens: 8, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed: 5 },
  rid: Rid.forAttempt({ sessionId, parent: "root", turn: rids++, attempt: 0 }),
  returnLogprob: true,
  sessionId
})

describe("in-place LoRA through the two-phase protocol", () => {
  it.live("pauses, swaps relax_policy_lora on every worker, resumes on the adapter version", () =>
    Effect.gen(function*() {
      const { dirs } = yield* LoraAdapters.versions(2)
      const model = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
        ...EmbeddedEngine.EmbeddedEngine.instant,
        seed: 3
      })
      const a = yield* FakeSglang.make({ engine: model })
      const b = yield* FakeSglang.make({ engine: model })
      const sglang = yield* SglangEngine.SglangEngine.make({ workerUrls: [a.url, b.url], retryBase: "1 millis" }).pipe(
        Effect.orDie
      )
      const versions = yield* LoraVersions.make(sglang, { mode: "in-place", epoch: "0123456789ab" }).pipe(Effect.orDie)
      const engine = LoraEngine.wrap(sglang, versions)
      // Before any publication: the base model, no lora_path.
      const base = yield* engine.generate(request("s"))
      const first = yield* versions.publish({ path: dirs[0]! })
      const control = (server: FakeSglang.FakeSglang) =>
        server.requests.filter((r) => r.path !== "/generate" && r.path !== "/health" && !r.path.startsWith("/get_"))
          .map((r) => [r.path, r.body])
      for (const server of [a, b]) {
        assert.deepStrictEqual(control(server), [
          ["/pause_generation", { mode: "abort" }],
          ["/load_lora_adapter", { lora_name: "relax_policy_lora", lora_path: dirs[0], pinned: true }],
          ["/update_weight_version", { new_version: first.version, abort_all_requests: false }],
          ["/continue_generation", {}]
        ])
      }
      const one = yield* engine.generate(request("s"))
      assert.strictEqual(one.weightVersion, first.version)
      assert.notDeepEqual(one.outputIds, base.outputIds)
      // A generation in flight at the next publication is cut by the pause and reports the version it ran on.
      a.hold(2)
      b.hold(2)
      const inFlight = yield* Effect.forkChild(engine.generate(request("t")))
      // Session s went to one worker; t reached either this one (its third request) or the other (its first).
      yield* Effect.raceFirst(a.awaitGenerates(3), b.awaitGenerates(1))
      const second = yield* versions.publish({ path: dirs[1]! })
      a.release()
      b.release()
      const cut = yield* Fiber.join(inFlight)
      assert.deepStrictEqual([cut.finishReason.type, cut.weightVersion, cut.cutByUpdate], [
        "abort",
        first.version,
        true
      ])
      assert.deepStrictEqual(control(a).slice(4).map(([path]) => path), [
        "/pause_generation",
        "/unload_lora_adapter",
        "/load_lora_adapter",
        "/update_weight_version",
        "/continue_generation"
      ])
      const after = yield* engine.generate(request("t"))
      assert.strictEqual(after.weightVersion, second.version)
      const bodies = [...a.requests, ...b.requests].filter((r) => r.path === "/generate")
        .map((r) => (r.body as Record<string, unknown>)["lora_path"])
      assert.deepStrictEqual(bodies, [undefined, "relax_policy_lora", "relax_policy_lora", "relax_policy_lora"])
      // The same content again changes nothing.
      const again = yield* versions.publish({ path: dirs[1]! })
      assert.deepStrictEqual([again.version, again.noOp], [second.version, true])
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})
