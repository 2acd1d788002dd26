import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Settings from "../../src/config/Settings.ts"
import * as LoraOptions from "../../src/lora/LoraOptions.ts"

const base = { promptData: "train.jsonl", rolloutBatchSize: 2, agentCommand: "true" }

/** The message of the refusal of `options`. */
const refusal = (options: Record<string, unknown>) =>
  Effect.map(Effect.flip(Settings.resolve({ ...base, ...options })), (error) => error.message)

describe("LoRA flags (Relax's names)", () => {
  it.effect("select the mode: off, in place, versioned", () =>
    Effect.gen(function*() {
      const off = yield* Settings.resolve(base)
      const inPlace = yield* Settings.resolve({ ...base, loraAdapterMode: true })
      const versioned = yield* Settings.resolve({
        ...base,
        loraAdapterMode: true,
        enableVersionedLoraPublication: true,
        fullyAsync: true
      })
      assert.deepStrictEqual([off, inPlace, versioned].map(LoraOptions.modeOf), ["off", "in-place", "versioned"])
    }))

  it.effect("refuse versioned publication without --lora-adapter-mode or without --fully-async", () =>
    Effect.gen(function*() {
      assert.include(
        yield* refusal({ enableVersionedLoraPublication: true, fullyAsync: true }),
        "--enable-versioned-lora-publication: needs --lora-adapter-mode"
      )
      assert.include(
        yield* refusal({ enableVersionedLoraPublication: true, loraAdapterMode: true }),
        "--enable-versioned-lora-publication: needs --fully-async"
      )
    }))

  it.effect("refuse an engine that cannot apply adapters (the embedded engine under --embedded-policy)", () =>
    Effect.gen(function*() {
      const message = yield* refusal({ loraAdapterMode: true, embeddedPolicy: "policy.mjs" })
      assert.include(
        message,
        "--lora-adapter-mode: the embedded engine cannot apply an adapter under --embedded-policy"
      )
    }))

  it.effect("refuse --sglang-lora-path with --lora-adapter-mode; alone it keeps working as before", () =>
    Effect.gen(function*() {
      const sglang = { engine: "sglang", sglangUrls: ["http://127.0.0.1:1"], tokenizer: "tok" }
      const message = yield* refusal({ ...sglang, loraAdapterMode: true, sglangLoraPath: "fixed" })
      assert.include(message, "--sglang-lora-path: names a fixed adapter you loaded yourself")
      const fixed = yield* Settings.resolve({ ...base, ...sglang, sglangLoraPath: "fixed" })
      assert.deepStrictEqual([fixed.sglangLoraPath, LoraOptions.modeOf(fixed)], ["fixed", "off"])
    }))
})
