/**
 * EchoBody against the path it replaces: a body parsed and decoded without its repeated history gives the same
 * canonical request, or the same error answer (status, headers, body text), as the whole body parsed and decoded.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import * as Chat from "../../src/protocol/Chat.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as EchoBody from "../../src/protocol/EchoBody.ts"
import * as ErrorAnswer from "../../src/protocol/ErrorAnswer.ts"
import * as JsonBody from "../../src/protocol/JsonBody.ts"
import type * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as RawEcho from "../../src/protocol/RawEcho.ts"
import * as Conversation from "../bench/conversation.ts"

const encoder = new TextEncoder()

type Decoded = Result.Result<Completion.CanonicalRequest, ProtocolError.AnyError>

/** The path EchoBody replaces: the whole body parsed, then decoded with the same known prefix. */
const viaWhole = (bytes: Uint8Array, depth: number, known: EchoBody.Known | undefined): Decoded => {
  const whole = JsonBody.parseObject(bytes, depth)
  return Result.isFailure(whole) ? Result.fail(whole.failure) : Chat.decode(whole.success, known)
}

/** What the client would get: the canonical request, or the error answer's status, headers and body text. */
const answerOf = (decoded: Decoded) =>
  Result.isSuccess(decoded)
    ? { request: decoded.success }
    : { error: ErrorAnswer.render(Chat.adapter, decoded.failure) }

/** The known prefix of `next` after `previous` (decoded; its mark), as the generation core gives it. */
const knownAfter = (previous: Uint8Array, mark: RawEcho.Mark | undefined, next: Uint8Array, depth: number) => {
  const reading = RawEcho.read(next, mark)
  if (!reading.repeats || mark === undefined) return { reading, known: undefined }
  const decoded = viaWhole(previous, depth, undefined)
  if (Result.isFailure(decoded)) return { reading, known: undefined }
  const known: EchoBody.Known = { count: mark.count, messages: decoded.success.state.messages, repeated: mark }
  return { reading, known }
}

/**
 * Compare both paths on `next`; when the partial parse took it, also compare its object with the whole parse's (the
 * known elements are `0`s there). Returns whether the partial parse had no doubt.
 */
const compare = (next: Uint8Array, depth: number, known: EchoBody.Known | undefined): boolean => {
  assert.deepStrictEqual(
    answerOf(EchoBody.decode(next, depth, known, Chat.decode)),
    answerOf(viaWhole(next, depth, known))
  )
  if (known === undefined) return false
  const partial = EchoBody.parseAfter(next, known.repeated, depth)
  if (partial === undefined) return false
  const whole = JsonBody.parseObject(next, depth)
  assert.isTrue(Result.isSuccess(whole), "the partial parse succeeded where the whole parse failed")
  if (Result.isFailure(whole)) return false
  const wholeMessages = whole.success["messages"] as Array<unknown>
  const partialMessages = partial["messages"] as Array<unknown>
  for (let i = 0; i < known.count; i++) assert.strictEqual(partialMessages[i], 0)
  assert.deepStrictEqual(
    { ...partial, messages: [...wholeMessages.slice(0, known.count), ...partialMessages.slice(known.count)] },
    whole.success
  )
  return true
}

// ---------------------------------------------------------------------------------------------------------------
// Generated bodies

const text = fc.string({
  unit: fc.constantFrom("a", "b", " ", "\"", "\\", "[", "]", "{", "}", ",", "é", "😀", "\u2028")
})
const toolCall = fc.record({
  id: fc.constantFrom("call_1", "call_2", ""),
  type: fc.constant("function"),
  function: fc.record({
    name: fc.constantFrom("read_file", "calc"),
    arguments: fc.constantFrom("{\"path\": \"a.txt\"}", "{\"a\":1,\"a\":2}", "{}", "not json", "{\"x\": NaN}", "[1]")
  })
})
const deep = (levels: number): unknown => levels === 0 ? "x" : [deep(levels - 1)]
/** Messages, mostly valid, some that the decoder rejects or that nest deep. */
const message = fc.oneof(
  { weight: 4, arbitrary: fc.record({ role: fc.constant("user"), content: text }) },
  {
    weight: 2,
    arbitrary: fc.record({
      role: fc.constant("user"),
      content: fc.array(fc.record({ type: fc.constant("text"), text }), { minLength: 1, maxLength: 2 })
    })
  },
  {
    weight: 3,
    arbitrary: fc.record(
      {
        role: fc.constant("assistant"),
        content: text,
        reasoning_content: fc.option(text),
        tool_calls: fc.array(toolCall, { maxLength: 2 })
      },
      { requiredKeys: ["role", "content"] }
    )
  },
  { weight: 2, arbitrary: fc.record({ role: fc.constant("tool"), tool_call_id: text, content: text }) },
  { weight: 1, arbitrary: fc.record({ role: fc.constant("system"), content: text }) },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.constant<unknown>(5),
      fc.constant<unknown>(null),
      fc.constant<unknown>({ role: "robot", content: "x" }),
      fc.constant<unknown>({ content: "no role" }),
      fc.constant<unknown>({ role: "user", content: 7 }),
      fc.integer({ min: 1, max: 12 }).map((levels) => ({ role: "user", content: deep(levels) })),
      fc.constant<unknown>(JSON.parse("{\"role\":\"user\",\"content\":\"a\",\"__proto__\":{\"x\":1}}"))
    )
  }
)
const validMessage = fc.oneof(
  fc.record({ role: fc.constant("user"), content: text }),
  fc.record({ role: fc.constant("assistant"), content: text, reasoning_content: text }),
  fc.record({ role: fc.constant("system"), content: text })
)
const tool = { type: "function", function: { name: "calc", parameters: { type: "object", properties: {} } } }
/** Top-level members: mostly ones a decoder accepts, some with any JSON value. */
const member = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      ["model", "m"],
      ["max_tokens", 16],
      ["stream", false],
      ["tools", [tool]],
      ["temperature", 0.5],
      ["x\"y", { a: [1] }],
      ["messagesx", []],
      ["chat_template_kwargs", { enable_thinking: false }]
    )
  },
  {
    weight: 1,
    arbitrary: fc.tuple(
      fc.constantFrom("model", "max_tokens", "stream", "tools", "logprobs", "seed", "stop"),
      fc.jsonValue({ maxDepth: 2 })
    )
  }
).map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value)}`)
const space = fc.constantFrom("", " ", "\n  ", "\t")
const indent = fc.constantFrom(undefined, 1, 2)

const previousBody = fc.record({
  before: fc.array(member, { maxLength: 3 }),
  after: fc.array(member, { maxLength: 3 }),
  messages: fc.array(validMessage, { minLength: 1, maxLength: 5 }),
  key: fc.constantFrom("\"messages\"", "\"messages\"", "\"m\\u0065ssages\""),
  ws: space,
  indent
})

/** A body and the byte offset after its `messages` elements, assembled so that its history's bytes are known. */
const assemble = (
  b: {
    readonly before: ReadonlyArray<string>
    readonly after: ReadonlyArray<string>
    readonly key: string
    readonly ws: string
    readonly indent: number | undefined
  },
  messages: ReadonlyArray<unknown>
) => {
  const head = `{${b.ws}${b.before.map((m) => `${m},${b.ws}`).join("")}${b.key}${b.ws}:${b.ws}[${b.ws}`
  const elements = messages.map((m) => JSON.stringify(m, null, b.indent)).join(`${b.ws},${b.ws}`)
  return encoder.encode(`${head}${elements}${b.ws}]${b.after.map((m) => `,${b.ws}${m}`).join("")}${b.ws}}`)
}

/** Byte-level damage to what follows the repeated history: none, or one edit. */
const damage = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: "none" as const, at: 0, bytes: [] as ReadonlyArray<number> }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constantFrom("insert" as const, "replace" as const, "delete" as const, "truncate" as const),
      at: fc.nat(),
      bytes: fc.constantFrom(
        [0x22],
        [0x5c],
        [0x2c],
        [0x5d],
        [0x7d],
        [0x7b],
        [0x3a],
        [0x20],
        [0x30],
        [0xff],
        [0xc3],
        [0xef, 0xbb, 0xbf],
        [0x00],
        [...encoder.encode(",\"messages\":[]")],
        [...encoder.encode(",\"messages\":5")]
      )
    })
  }
)

const applyDamage = (
  bytes: Uint8Array,
  from: number,
  d: { readonly kind: string; readonly at: number; readonly bytes: ReadonlyArray<number> }
): Uint8Array => {
  if (d.kind === "none") return bytes
  const at = from + (d.at % (bytes.length - from + 1))
  const head = bytes.subarray(0, at)
  switch (d.kind) {
    case "insert":
      return Buffer.concat([head, Uint8Array.from(d.bytes), bytes.subarray(at)])
    case "replace":
      return Buffer.concat([head, Uint8Array.from(d.bytes), bytes.subarray(at + 1)])
    case "delete":
      return Buffer.concat([head, bytes.subarray(at + 1)])
    default:
      return head
  }
}

describe("EchoBody.decode", () => {
  it("answers as the whole body's parse and decode, on generated continuations and damaged ones", () => {
    let partial = 0
    let repeated = 0
    fc.assert(
      fc.property(
        previousBody,
        fc.array(message, { maxLength: 3 }),
        fc.array(member, { maxLength: 2 }),
        damage,
        fc.constantFrom(5, 8, 64),
        (b, more, after, d, depth) => {
          const previous = assemble(b, b.messages)
          const mark = RawEcho.read(previous, undefined).mark
          const body = assemble({ ...b, after: [...b.after, ...after] }, [...b.messages, ...more])
          const next = applyDamage(body, mark?.end ?? 0, d)
          const { known } = knownAfter(previous, mark, next, depth)
          if (known !== undefined) repeated++
          if (compare(next, depth, known)) partial++
        }
      ),
      { numRuns: 3000 }
    )
    // The comparison above covered the partial parse: it was taken for most bodies that repeat a decoded history.
    assert.isAbove(partial, repeated / 2)
  })

  it("answers as the whole path turn by turn over the benchmark's conversation, taking the partial parse each turn", () => {
    const history: Array<unknown> = [...Conversation.conversation(30, 470)]
    let previous = encoder.encode(JSON.stringify({ model: "bench", messages: history, max_tokens: 16 }))
    let mark = RawEcho.read(previous, undefined).mark
    for (let turn = 0; turn < 24; turn++) {
      history.push(
        turn % 3 === 0
          ? {
            role: "assistant",
            content: "",
            reasoning_content: "think",
            tool_calls: [{ id: `call_${turn}`, type: "function", function: { name: "f", arguments: "{\"a\": 1}" } }]
          }
          : { role: "assistant", content: `answer ${turn}` },
        turn % 3 === 0
          ? { role: "tool", tool_call_id: `call_${turn}`, content: Conversation.text(turn, 200) }
          : { role: "user", content: Conversation.text(turn + 1000, 300) }
      )
      const next = encoder.encode(JSON.stringify({ model: "bench", messages: history, max_tokens: 16 }))
      const { known, reading } = knownAfter(previous, mark, next, 64)
      assert.isDefined(known)
      assert.isTrue(compare(next, 64, known))
      previous = next
      mark = reading.mark
    }
  })

  it("decodes whole when a system message follows the known ones, or the known count does not fit", () => {
    const first = encoder.encode(JSON.stringify({ messages: [{ role: "user", content: "a" }] }))
    const mark = RawEcho.read(first, undefined).mark
    const next = encoder.encode(
      JSON.stringify({
        messages: [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, {
          role: "system",
          content: "late"
        }]
      })
    )
    const { known } = knownAfter(first, mark, next, 64)
    assert.isDefined(known)
    // The partial parse has no doubt; the decoder needs the whole list (the system message is merged first).
    assert.isDefined(known && EchoBody.parseAfter(next, known.repeated, 64))
    compare(next, 64, known)
    const decoded = EchoBody.decode(next, 64, known, Chat.decode)
    assert.deepStrictEqual(
      Result.isSuccess(decoded) ? decoded.success.state.messages.map((m) => m.role) : [],
      ["system", "user", "assistant"]
    )
    if (known !== undefined) {
      // A mark that does not fit the body is not trusted.
      assert.isUndefined(EchoBody.parseAfter(next, { ...known.repeated, end: next.length + 1 }, 64))
      // U+FEFF after the known elements is a character, not a byte-order mark to strip: the body is not JSON.
      const end = known.repeated.end
      const bom = Buffer.concat([next.subarray(0, end), Uint8Array.of(0xef, 0xbb, 0xbf), next.subarray(end)])
      assert.isTrue(Result.isFailure(JsonBody.parseObject(bom, 64)))
      assert.isUndefined(EchoBody.parseAfter(bom, known.repeated, 64))
    }
  })
})
