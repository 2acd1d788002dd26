/**
 * Differential test of the prompts' id texts kept per Session (src/engine/sglang/PromptIdsJson.ts): every text it gives, reused or
 * written whole, is `JSON.stringify`'s text of the ids, over random sequences of prompts per Session (the conversation
 * going on, another branch, a shorter prompt, the same one again, ids outside the plain range), as plain arrays and as
 * views of one buffer extended in place the way the forest's inference prefix is; the kept bytes stay under the bound.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Generate from "../../layers/engine/sglang/Generate.ts"
import * as PromptIdsJson from "../../src/engine/sglang/PromptIdsJson.ts"
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import * as StableIds from "../../src/ids/StableIds.ts"
import * as SeededRandom from "../support/SeededRandom.ts"
import * as SupportSessions from "../support/sessions.ts"

const random = SeededRandom.floats

const expected = (ids: ArrayLike<number>): string => JSON.stringify(Array.from(ids)).slice(1, -1)
const decode = (text: Uint8Array | undefined): string | undefined =>
  text === undefined ? undefined : Buffer.from(text).toString("latin1")

/** The `/generate` body of a prompt, as the engine builds it. */
const wire = (ids: Int32Array | ReadonlyArray<number>, rid: string) =>
  Generate.toWire({ inputIds: ids, sampling: SupportSessions.sampling(), rid, returnLogprob: true }, {
    samplingSeed: false,
    sessionId: false,
    priority: false,
    loraPath: undefined,
    routedExperts: false
  })

describe("IdsText.IdsTextCache", () => {
  it("gives JSON.stringify's text for every prompt of random conversations, reused or whole", () => {
    const next = random(11)
    const cache = new PromptIdsJson.IdsTextCache(1 << 20)
    const sessions = Array.from({ length: 5 }, (_, i) => ({ key: `s${i}`, ids: [] as Array<number> }))
    let reusable = 0
    for (let step = 0; step < 3000; step++) {
      const session = sessions[Math.floor(next() * sessions.length)]!
      const roll = next()
      if (roll < 0.6) {
        // The conversation goes on.
        session.ids = [
          ...session.ids,
          ...Array.from({ length: 1 + Math.floor(next() * 40) }, () => Math.floor(next() * 152_000))
        ]
        reusable++
      } else if (roll < 0.8) {
        // Another branch: a shorter shared part, other ids after it.
        const keep = Math.floor(next() * session.ids.length)
        session.ids = [
          ...session.ids.slice(0, keep),
          ...Array.from({ length: Math.floor(next() * 30) }, () => Math.floor(next() * 152_000))
        ]
      } else if (roll < 0.9) {
        // The same prompt again (a retried turn), or one id changed in the middle.
        if (next() < 0.5 && session.ids.length > 0) {
          session.ids = [...session.ids]
          session.ids[Math.floor(next() * session.ids.length)] = Math.floor(next() * 152_000)
        }
      } else {
        // Ids a prompt never holds: the whole text is left to the body's own encoder.
        const odd = [...session.ids, next() < 0.5 ? -1 : 1.5]
        assert.isUndefined(cache.text(session.key, odd))
        continue
      }
      const text = cache.text(session.key, session.ids)
      assert.strictEqual(decode(text), expected(session.ids), `step ${step}`)
    }
    assert.isAbove(reusable, 1000)
    assert.isUndefined(decode(cache.text(undefined, [-3])))
    assert.strictEqual(decode(cache.text(undefined, [1, 2, 3])), "1,2,3")
  })

  it("reuses a view of the same buffer, extended in place, without comparing only when the buffer is stable", () => {
    // An Int32Array of the caller's own, rewritten in place: compared, so a change is seen.
    const own = new PromptIdsJson.IdsTextCache(1 << 20)
    const mine = new Int32Array(8)
    mine.set([1, 2, 3])
    assert.strictEqual(decode(own.text("s", mine.subarray(0, 3))), "1,2,3")
    mine.set([9, 2, 3, 4])
    assert.strictEqual(decode(own.text("s", mine.subarray(0, 4))), "9,2,3,4")
    // A buffer marked stable (the forest's inference prefix): not compared. Changed behind its back (against the
    // contract), the kept text shows that the comparison was skipped.
    const stable = new PromptIdsJson.IdsTextCache(1 << 20)
    const marked = StableIds.mark(new Int32Array(8))
    marked.set([1, 2, 3])
    stable.text("s", marked.subarray(0, 3))
    marked.set([9, 2, 3, 4])
    assert.strictEqual(decode(stable.text("s", marked.subarray(0, 4))), "1,2,3,4")

    const next = random(5)
    const cache = new PromptIdsJson.IdsTextCache(1 << 20)
    const buffer = StableIds.mark(new Int32Array(10_000))
    let count = 0
    for (let turn = 0; turn < 50; turn++) {
      const added = 1 + Math.floor(next() * 150)
      for (let i = 0; i < added; i++) buffer[count + i] = Math.floor(next() * 152_000)
      count += added
      const view = buffer.subarray(0, count)
      assert.strictEqual(decode(cache.text("s", view)), expected(view), `turn ${turn}`)
    }
    // The body around the kept text is JSON.stringify's.
    const view = buffer.subarray(0, count)
    const body = Generate.toWire({
      inputIds: view,
      sampling: SupportSessions.sampling(),
      rid: "r",
      returnLogprob: true
    }, {
      samplingSeed: false,
      sessionId: false,
      priority: false,
      loraPath: undefined,
      routedExperts: false
    })
    assert.strictEqual(
      Buffer.from(SglangWire.encodeGenerateRequest(body, cache.text("s", view))).toString("utf8"),
      JSON.stringify({ ...body, input_ids: Array.from(view) })
    )
  })

  it("writes JSON.stringify's body from the kept head, as the whole-text path does, over random conversations", () => {
    const next = random(23)
    const cache = new PromptIdsJson.IdsTextCache(1 << 20)
    const whole = new PromptIdsJson.IdsTextCache(1 << 20)
    const buffer = StableIds.mark(new Int32Array(60_000))
    const sessions = Array.from(
      { length: 4 },
      (_, i) => ({ key: `s${i}`, ids: [] as Int32Array | ReadonlyArray<number> })
    )
    let reused = 0
    for (let step = 0; step < 2000; step++) {
      const session = sessions[Math.floor(next() * sessions.length)]!
      const roll = next()
      const fresh = () => Array.from({ length: Math.floor(next() * 40) }, () => Math.floor(next() * 152_000))
      if (roll < 0.5) session.ids = [...Array.from(session.ids), ...fresh()]
      else if (roll < 0.65) {
        session.ids = [...Array.from(session.ids).slice(0, Math.floor(next() * session.ids.length)), ...fresh()]
      } else if (roll < 0.75) {
        // Ids a prompt never holds (once): written as JSON.stringify writes them; such a text is not kept.
        const odd = [-1, 1.5, -0, 1e21, 123_456_789, Number.NaN][Math.floor(next() * 6)]!
        const ids = [...Array.from(session.ids), odd, ...fresh()]
        const encoded = SglangWire.encodeGenerateBody(wire(ids, "odd"), cache.head(session.key, ids))
        // -0 is plain (JSON writes it "0"), the rest are not.
        assert.strictEqual(encoded.idsText === undefined, !PromptIdsJson.isPlainId(odd))
        cache.forget(session.key)
        assert.strictEqual(
          Buffer.from(encoded.body).toString("utf8"),
          JSON.stringify({ ...wire(ids, "odd"), input_ids: ids })
        )
        continue
      } else if (roll < 0.9 && session.key === "s0") {
        // The forest's inference prefix: views of one stable buffer extended in place.
        const count = Math.min(buffer.length, session.ids.length + Math.floor(next() * 60))
        for (let i = session.ids.length; i < count; i++) buffer[i] = Math.floor(next() * 152_000)
        if (!(session.ids instanceof Int32Array)) buffer.set(Array.from(session.ids).map((id) => id | 0), 0)
        session.ids = buffer.subarray(0, count)
      }
      // else: the same prompt again (a retried turn)
      const head = cache.head(session.key, session.ids)
      if (head.from > 0) reused++
      const encoded = SglangWire.encodeGenerateBody(wire(session.ids, `r${step}`), head)
      // A text with an id that is not a plain one is not kept (the Session's last is dropped, as the engine does).
      if (encoded.idsText !== undefined) cache.keep(session.key, session.ids, encoded.idsText)
      else cache.forget(session.key)
      const expectedBody = JSON.stringify({ ...wire(session.ids, `r${step}`), input_ids: Array.from(session.ids) })
      const got = Buffer.from(encoded.body).toString("utf8")
      assert.strictEqual(got, expectedBody, `step ${step}`)
      if (encoded.idsText !== undefined) {
        assert.strictEqual(decode(encoded.idsText), expected(session.ids), `step ${step}`)
      }
      // The whole-text path agrees where it gives a text (plain ids only).
      const text = whole.text(session.key, session.ids)
      if (text !== undefined) {
        assert.strictEqual(
          Buffer.from(SglangWire.encodeGenerateRequest(wire(session.ids, `r${step}`), text)).toString("utf8"),
          expectedBody
        )
      }
      assert.isAtMost(cache.size, 1 << 20)
    }
    assert.isAbove(reused, 800)
    // No Session: nothing reused, nothing kept.
    assert.strictEqual(cache.head(undefined, [1, 2]).from, 0)
    const size = cache.size
    cache.keep(undefined, [1, 2], new Uint8Array(3))
    assert.strictEqual(cache.size, size)
  })

  it("counts a kept view's whole buffer against its bound", () => {
    const cache = new PromptIdsJson.IdsTextCache(1000)
    const body = SglangWire.encodeGenerateBody(wire([1, 2, 3], "r"))
    assert.strictEqual(SglangWire.encodeGenerateBody(wire([1, 1.5], "r")).idsText, undefined)
    assert.isDefined(body.idsText)
    cache.keep("a", [1, 2, 3], body.idsText!)
    assert.strictEqual(cache.size, body.idsText!.buffer.byteLength + 12)
    assert.strictEqual(decode(cache.head("a", [1, 2, 3, 4]).text), "1,2,3")
    cache.keep("b", [5], new Uint8Array(new ArrayBuffer(2000), 0, 1))
    assert.strictEqual(cache.size, body.idsText!.buffer.byteLength + 12)
    assert.strictEqual(cache.head("b", [5]).from, 0)
  })

  it("keeps at most its bound, least recently used out, and forgets an ended Session", () => {
    const cache = new PromptIdsJson.IdsTextCache(200)
    const ids = (n: number) => Array.from({ length: n }, (_, i) => 100 + i)
    cache.text("a", ids(10)) // 39 bytes of text and 10 ids: 79
    cache.text("b", ids(10))
    assert.strictEqual(cache.size, 158)
    cache.text("c", ids(10)) // over 200: "a" goes
    assert.strictEqual(cache.size, 158)
    cache.forget("b")
    assert.strictEqual(cache.size, 79)
    cache.text("d", ids(40)) // larger than the bound: given, not kept
    assert.strictEqual(cache.size, 79)
    assert.strictEqual(decode(cache.text("a", ids(12))), expected(ids(12)))
  })
})
