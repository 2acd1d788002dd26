/**
 * The controller's settings as one text (src/cluster/Fingerprint.ts `toText` / `textReader`), as `PollRunner` carries
 * them: a fingerprint read back from its text is the same fingerprint (and compares equal with the runner's own), a
 * reader keeps the last text it read (a controller sends the same one every time), and a text that is not a
 * fingerprint (not JSON, not an object, a value not a string) reads as `undefined`, without spoiling the next read.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import * as Settings from "../../src/config/Settings.ts"

describe("Fingerprint as text", () => {
  it.effect("a fingerprint read back from its text is the same; the reader keeps the last one it read", () =>
    Effect.gen(function*() {
      const fingerprint = Fingerprint.of(
        yield* Settings.resolve({ promptData: "train.jsonl", rolloutBatchSize: 4, rolloutStop: ["</answer>", "\n\""] })
      )
      const text = Fingerprint.toText(fingerprint)
      const read = Fingerprint.textReader()
      const back = read(text)
      assert.deepStrictEqual(back, fingerprint)
      assert.isUndefined(Fingerprint.mismatch(back ?? {}, fingerprint))
      // The same text again: the fingerprint read before, not read anew.
      assert.strictEqual(read(text), back)
      // Another controller's settings: read anew, and the difference names its flag.
      const other = Fingerprint.of(
        yield* Settings.resolve({ promptData: "train.jsonl", rolloutBatchSize: 4, rolloutTemperature: 0.25 })
      )
      assert.include(Fingerprint.mismatch(read(Fingerprint.toText(other)) ?? {}, fingerprint), "--rollout-temperature")
    }))

  it("a text that is no fingerprint reads as undefined; the next good text still reads", () => {
    const read = Fingerprint.textReader()
    for (const text of ["", "not json", "[\"a\"]", "null", "\"text\"", "{\"rolloutTemperature\":1}", "{\"a\":null}"]) {
      assert.isUndefined(read(text), text)
      // Read twice: the reader keeps that it was not one.
      assert.isUndefined(read(text), text)
    }
    const fingerprint = { rolloutTemperature: "1", tokenizer: "null" }
    assert.deepStrictEqual(read(Fingerprint.toText(fingerprint)), fingerprint)
    assert.isUndefined(read("{"))
  })
})
