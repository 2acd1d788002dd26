import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as ToolCallParser from "../../src/parsers/ToolCallParser.ts"
import * as Splits from "./splits.ts"
import * as ToolCases from "./toolCases.ts"

const parserNamed = (name: string) => {
  const r = ParserRegistry.ToolCallParsers.get(name)
  if (Result.isFailure(r)) throw r.failure
  return r.success
}

const sortKeys = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(sortKeys)
    : value !== null && typeof value === "object"
    ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, sortKeys(v)]))
    : value

describe("tool-call parsers (SGLang cases)", () => {
  for (const c of [...ToolCases.toolCases, ...ToolCases.numberCases, ...ToolCases.ruleCases]) {
    describe(`${c.parser}: ${c.spec}`, () => {
      const parser = parserNamed(c.parser)
      it("parses in one shot as expected", () => {
        const result = parser.parse(c.text, c.tools)
        assert.strictEqual(result.normalText, c.normalText)
        assert.deepStrictEqual(result.calls.map((call) => call.name), c.calls.map((call) => call.name))
        result.calls.forEach((call, i) => {
          const expected = c.calls[i]
          assert.deepStrictEqual(sortKeys(JSON.parse(call.arguments)), sortKeys(expected?.args))
          if (expected?.text !== undefined) assert.strictEqual(call.arguments, expected.text)
        })
        assert.strictEqual(result.droppedUnknownTools, c.dropped ?? 0)
        assert.strictEqual(result.malformed, c.malformed ?? 0)
      })
      it("gives the one-shot result for every chunk split when streamed", () => {
        const oneShot = parser.parse(c.text, c.tools)
        for (const chunks of Splits.splits(c.text)) {
          const stream = parser.stream(c.tools)
          const parts = chunks.map((chunk) => stream.feed(chunk))
          parts.push(stream.finish())
          assert.deepStrictEqual(ToolCallParser.combine(parts), oneShot, JSON.stringify(chunks))
        }
      })
    })
  }
})

describe("tool-call parsing rules", () => {
  const qwen = parserNamed("qwen25")
  const call = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>"

  it("parses nothing when the request defines no tools", () => {
    assert.deepStrictEqual(qwen.parse(call, []), { normalText: call, calls: [], droppedUnknownTools: 0, malformed: 0 })
  })

  it("returns text with no call unchanged, whitespace included", () => {
    assert.strictEqual(qwen.parse("  hi there \n", ToolCases.tools.weather).normalText, "  hi there \n")
  })

  it("streams text before a call as it arrives and holds back only a possible marker", () => {
    const stream = qwen.stream(ToolCases.tools.weather)
    assert.strictEqual(stream.feed("Hello wor").normalText, "Hello wor")
    assert.strictEqual(stream.feed("ld <tool").normalText, "ld")
    const done = stream.feed("_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>")
    assert.deepStrictEqual(done.calls, [{ name: "search", arguments: "{}" }])
    assert.deepStrictEqual(stream.finish(), ToolCallParser.empty)
  })

  it("flushes a partial marker that turned out to be text", () => {
    const stream = qwen.stream(ToolCases.tools.weather)
    assert.strictEqual(stream.feed("a <tool").normalText, "a")
    assert.strictEqual(stream.feed("box").normalText, " <toolbox")
  })

  it("never throws on arbitrary input", () => {
    const inputs = [
      "<tool_call>",
      "<tool_call>\n{",
      "[TOOL_CALLS]",
      "<|python_tag|>{",
      "[f(",
      "<|channel|>",
      "{\"name\"",
      "\u0000\ud800"
    ]
    for (const name of ParserRegistry.ToolCallParsers.names) {
      for (const input of inputs) {
        const result = parserNamed(name).parse(input, ToolCases.tools.weather)
        assert.isTrue(result.calls.length === 0, `${name} on ${input}`)
      }
    }
  })
})
