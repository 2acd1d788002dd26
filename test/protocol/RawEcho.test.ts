import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { createHash } from "node:crypto"
import * as RawEcho from "../../src/protocol/RawEcho.ts"

const encoder = new TextEncoder()
const bytesOf = (text: string): Uint8Array => encoder.encode(text)
const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/** JSON texts with strings that hold quotes, backslashes, brackets and non-ASCII, pretty-printed or not. */
const element = fc.tuple(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(undefined, 1, 2)
).map(([value, indent]) => JSON.stringify(value, null, indent) ?? "null")
const space = fc.constantFrom("", " ", "\n  ", "\t")
const member = fc.tuple(
  fc.constantFrom("model", "max_tokens", "tools", "x\"y", "messagesx", "message"),
  fc.jsonValue({ maxDepth: 2 })
)
  .map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value)}`)

/**
 * A body built from parts, so the test knows where its `messages` elements end: members before and after the
 * `messages` member, whitespace around every token, and the messages key spelled plainly or with an escape.
 */
const body = fc.record({
  before: fc.array(member, { maxLength: 3 }),
  after: fc.array(member, { maxLength: 3 }),
  elements: fc.array(element, { minLength: 1, maxLength: 5 }),
  key: fc.constantFrom("\"messages\"", "\"m\\u0065ssages\""),
  ws: space
})

const assemble = (
  b: {
    before: ReadonlyArray<string>
    after: ReadonlyArray<string>
    elements: ReadonlyArray<string>
    key: string
    ws: string
  }
) => {
  const head = `{${b.ws}${b.before.map((m) => `${m},${b.ws}`).join("")}${b.key}${b.ws}:${b.ws}[${b.ws}`
  const messages = b.elements.join(`${b.ws},${b.ws}`)
  const text = `${head}${messages}${b.ws}]${b.after.map((m) => `,${b.ws}${m}`).join("")}${b.ws}}`
  const end = byteLength(head + messages)
  return { text, end, open: byteLength(head) - byteLength(b.ws) - 1 }
}

const digest = (text: string, end: number): string =>
  createHash("sha256").update(bytesOf(text).subarray(0, end)).digest("base64")

describe("RawEcho.read", () => {
  it("marks where the last element of messages ends, how many there are, and the digest before it", () => {
    fc.assert(
      fc.property(body, (b) => {
        const { end, open, text } = assemble(b)
        assert.deepStrictEqual(JSON.parse(text).messages.length, b.elements.length)
        const reading = RawEcho.read(bytesOf(text), undefined)
        assert.deepStrictEqual(reading, {
          mark: { open, end, count: b.elements.length, digest: digest(text, end) },
          repeats: false
        })
      }),
      { numRuns: 1000 }
    )
  })

  it("recognizes a body that repeats the previous one's history and continues its mark", () => {
    fc.assert(
      fc.property(body, fc.array(element, { maxLength: 3 }), (b, more) => {
        const first = assemble(b)
        const previous = RawEcho.read(bytesOf(first.text), undefined).mark
        const next = assemble({ ...b, elements: [...b.elements, ...more] })
        const reading = RawEcho.read(bytesOf(next.text), previous)
        // Continued from the previous mark, it is the mark the whole body gets.
        assert.deepStrictEqual(reading, { mark: RawEcho.read(bytesOf(next.text), undefined).mark, repeats: true })
      }),
      { numRuns: 1000 }
    )
  })

  it("does not take a body for a repeat when a byte of the history differs or another messages key follows", () => {
    fc.assert(
      fc.property(body, element, fc.nat(), (b, extra, at) => {
        const first = assemble(b)
        const previous = RawEcho.read(bytesOf(first.text), undefined).mark
        assert.isDefined(previous)
        const next = assemble({ ...b, elements: [...b.elements, extra] })
        const bytes = bytesOf(next.text)
        // One byte of the previous history changed (kept ASCII so the body stays well-formed for the scanner).
        const i = at % first.end
        const changed = bytes.slice()
        changed[i] = changed[i] === 0x20 ? 0x09 : 0x20
        if (Buffer.compare(changed.subarray(0, first.end), bytes.subarray(0, first.end)) !== 0) {
          assert.isFalse(RawEcho.read(changed, previous).repeats)
        }
        // A second messages member after the first: JSON.parse keeps that one, so nothing is reused nor marked.
        const duplicated = bytesOf(`${next.text.slice(0, next.text.lastIndexOf("}"))},"messages":[${extra}]}`)
        const reading = RawEcho.read(duplicated, previous)
        assert.isFalse(reading.repeats)
        assert.isUndefined(reading.mark)
      }),
      { numRuns: 500 }
    )
  })

  it("gives no mark to a body whose last messages member is not a non-empty array", () => {
    for (
      const text of [
        "{\"messages\":[]}",
        "{\"messages\":\"x\"}",
        "{\"messages\":[1],\"messages\":null}",
        "{\"model\":\"m\"}",
        "[1]"
      ]
    ) {
      assert.isUndefined(RawEcho.read(bytesOf(text), undefined).mark, text)
    }
    const later = RawEcho.read(bytesOf("{\"messages\":null,\"messages\":[{\"a\":\"]\"}]}"), undefined).mark
    assert.deepStrictEqual(later?.count, 1)
  })

  it("takes a retry of the same body (the history ends where it ended) for a repeat", () => {
    const text =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi \\\"there\\\" \\\\\"}],\"max_tokens\":16}"
    const previous = RawEcho.read(bytesOf(text), undefined).mark
    assert.deepStrictEqual(RawEcho.read(bytesOf(text), previous), { mark: previous, repeats: true })
  })

  it("ends on any bytes, a body's prefix with anything after it included, without throwing", () => {
    fc.assert(
      fc.property(body, fc.uint8Array({ maxLength: 40 }), fc.nat(), (b, tail, cut) => {
        const { text } = assemble(b)
        const bytes = bytesOf(text)
        const previous = RawEcho.read(bytes, undefined).mark
        const at = cut % (bytes.length + 1)
        const mangled = Buffer.concat([bytes.subarray(0, at), tail])
        for (const [read, of] of [[mangled, previous], [mangled, undefined], [tail, previous]] as const) {
          const mark = RawEcho.read(read, of).mark
          if (mark !== undefined) assert.isTrue(mark.open < mark.end && mark.end <= read.length)
        }
      }),
      { numRuns: 1000 }
    )
  })
})
