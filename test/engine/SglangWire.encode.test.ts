/**
 * Differential test of the `/generate` body encoder: `SglangWire.encodeGenerateRequest` (ids written as digits into the
 * sent buffer) against `JSON.stringify` of the same request (what was sent before), byte for byte, on realistic and
 * adversarial requests.
 */
import { assert, describe, it } from "@effect/vitest"
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

const random = SeededRandom.floats

const request = (
  ids: ReadonlyArray<number>,
  extra: Partial<SglangWire.GenerateRequest> = {}
): SglangWire.GenerateRequest => ({
  input_ids: ids,
  sampling_params: {
    max_new_tokens: 16,
    temperature: 0.7,
    top_p: 1,
    top_k: -1,
    min_p: 0,
    stop: ["</tool_call>", "ü\n"],
    stop_token_ids: [151645],
    skip_special_tokens: false,
    spaces_between_special_tokens: false,
    no_stop_trim: true
  },
  rid: "00000000000000000000000000000042",
  return_logprob: true,
  ...extra
})

const same = (value: SglangWire.GenerateRequest, label: string) => {
  const encoded = SglangWire.encodeGenerateRequest(value)
  const expected = Buffer.from(JSON.stringify(value))
  assert.strictEqual(Buffer.from(encoded).toString("utf8"), expected.toString("utf8"), label)
  assert.isTrue(Buffer.from(encoded).equals(expected), label)
}

describe("Wire.encodeGenerateRequest", () => {
  it("gives JSON.stringify's bytes for prompts of random token ids", () => {
    const next = random(7)
    for (let i = 0; i < 300; i++) {
      const length = Math.floor(next() * 5000)
      const ids = Array.from({ length }, () => Math.floor(next() * (next() < 0.1 ? 100_000_000 : 152_000)))
      same(request(ids), `prompt ${i} of ${length} ids`)
      // The generation core sends its ids as an Int32Array: the bytes of the array of numbers it holds.
      const typed = Int32Array.from(ids)
      assert.isTrue(
        Buffer.from(SglangWire.encodeGenerateRequest({ ...request(ids), input_ids: typed })).equals(
          Buffer.from(JSON.stringify(request([...typed])))
        ),
        `prompt ${i} as an Int32Array`
      )
    }
  })

  it("gives JSON.stringify's bytes at every digit count and for ids outside the token range", () => {
    const edges = [
      0,
      1,
      9,
      10,
      11,
      99,
      100,
      101,
      999,
      1000,
      9999,
      10_000,
      99_999,
      100_000,
      151_643,
      999_999,
      1_000_000,
      9_999_999,
      10_000_000,
      99_999_999,
      100_000_000,
      2 ** 31 - 1,
      2 ** 31,
      2 ** 32,
      Number.MAX_SAFE_INTEGER,
      1e21,
      1e300,
      -1,
      -0,
      -99,
      0.5,
      1.5,
      123.456,
      1e-7,
      Number.MIN_VALUE,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      -1.2345678901234567e-300
    ]
    same(request(edges), "edges")
    for (const id of edges) same(request([id]), `one id ${id}`)
    same(request([]), "no ids")
  })

  it("gives JSON.stringify's bytes with every optional field, unicode and escapes in the strings", () => {
    same(
      request([1, 2, 3], {
        image_data: ["data:image/png;base64,iVBORw0KGgo=", "https://example.com/ü.png"],
        session_id: "sess-\"quoted\"\\-😀-\u2028",
        sampling_params: { ...request([]).sampling_params, sampling_seed: 42, stop: ["\u0000", "\ud800", "日本語"] }
      }),
      "optional fields"
    )
    same(request([5], { rid: "" }), "empty rid")
  })
})
