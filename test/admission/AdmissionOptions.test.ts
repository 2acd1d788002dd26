/**
 * Relax's six admission flags through the settings: defaults, ranges checked only with admission on (each refusal
 * names the flag and its range), the decode cap's default, and the line `check` prints.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"
import * as Settings from "../../src/config/Settings.ts"

const base = { promptData: "train.jsonl", rolloutBatchSize: 4 }
const on = { ...base, agenticProgramAdmission: true }

describe("admission flags", () => {
  it.effect("default to Relax's values and resolve to nothing while admission is off", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve(base)
      assert.strictEqual(s.agenticProgramAdmission, false)
      assert.strictEqual(s.agenticAdmissionHeadroom, 0.9)
      assert.strictEqual(s.agenticAdmissionPressureThreshold, 0.92)
      assert.strictEqual(s.agenticAdmissionExpectedDecodeCap, undefined)
      assert.strictEqual(s.agenticAdmissionMaxWaitS, 30)
      assert.strictEqual(s.agenticAdmissionScope, "train")
      assert.isUndefined(Settings.admission(s))
      assert.include(AdmissionOptions.describe(Settings.admission(s)), "KV admission: off")
    }))

  it.effect("are not range-checked while admission is off, as in Relax", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve({ ...base, agenticAdmissionHeadroom: 7, agenticAdmissionMaxWaitS: -1 })
      assert.strictEqual(s.agenticAdmissionHeadroom, 7)
    }))

  it.effect("refuse an out-of-range value with admission on, naming the flag and the range", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [Record<string, unknown>, string, string]> = [
        [{ agenticAdmissionHeadroom: 0 }, "--agentic-admission-headroom", "(0, 1]"],
        [{ agenticAdmissionHeadroom: 1.5 }, "--agentic-admission-headroom", "(0, 1]"],
        [{ agenticAdmissionPressureThreshold: -0.1 }, "--agentic-admission-pressure-threshold", "(0, 1]"],
        [{ agenticAdmissionExpectedDecodeCap: 0 }, "--agentic-admission-expected-decode-cap", "> 0"],
        [{ agenticAdmissionMaxWaitS: -1 }, "--agentic-admission-max-wait-s", ">= 0"]
      ]
      for (const [flags, flag, range] of cases) {
        const error = yield* Effect.flip(Settings.resolve({ ...on, ...flags }))
        assert.strictEqual(error.option, flag)
        assert.include(error.message, range)
      }
      const scope = yield* Effect.flip(Settings.resolve({ ...on, agenticAdmissionScope: "eval" }))
      assert.include(scope.message, "agentic-admission-scope")
    }))

  it.effect("default the decode cap to --rollout-max-response-len and print the settings", () =>
    Effect.gen(function*() {
      const s = yield* Settings.resolve({ ...on, rolloutMaxResponseLen: 512, agenticAdmissionMaxWaitS: 0 })
      const admission = Settings.admission(s)
      assert.deepStrictEqual(admission, {
        headroom: 0.9,
        pressureThreshold: 0.92,
        expectedDecodeCap: 512,
        maxWaitMs: 0,
        scope: "train",
        ...AdmissionOptions.constants
      })
      assert.strictEqual(
        AdmissionOptions.describe(admission),
        "KV admission: on; headroom 0.9, pressure threshold 0.92, expected decode cap 512 tokens, max wait 0 s, " +
          "scope train; snapshot every 2 s, stale after 6 s"
      )
      const capped = yield* Settings.resolve({
        ...on,
        rolloutMaxResponseLen: 512,
        agenticAdmissionExpectedDecodeCap: 64
      })
      assert.strictEqual(Settings.admission(capped)?.expectedDecodeCap, 64)
    }))

  it.effect("refuse the embedded engine's KV pool with --engine sglang", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Settings.resolve({
        ...base,
        engine: "sglang",
        sglangUrls: ["http://127.0.0.1:1"],
        tokenizer: "t",
        embeddedKvTokens: 1000
      }))
      assert.strictEqual(error.option, "--embedded-kv-tokens")
    }))
})
