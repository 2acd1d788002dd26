import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as ReasoningParser from "../../src/parsers/ReasoningParser.ts"
import * as Splits from "./splits.ts"

const parserNamed = (name: string) => {
  const r = ParserRegistry.ReasoningParsers.get(name)
  if (Result.isFailure(r)) throw r.failure
  return r.success
}

interface ReasoningCase {
  readonly parser: string
  readonly spec: string
  /** The SGLang test (test/srt/test_reasoning_parser.py) this reproduces. */
  readonly source?: string
  readonly note?: string
  readonly text: string
  readonly reasoningText: string
  readonly normalText: string
}

const cases: ReadonlyArray<ReasoningCase> = [
  {
    parser: "qwen3",
    spec: "splits a complete block",
    source: "test_detect_and_parse_qwen3_format",
    text: "<think>Let me think about this problem</think>The answer is 42.",
    reasoningText: "Let me think about this problem",
    normalText: "The answer is 42."
  },
  {
    parser: "qwen3",
    spec: "returns text without a block as normal text",
    source: "test_detect_and_parse_without_thinking",
    text: "Direct answer without thinking.",
    reasoningText: "",
    normalText: "Direct answer without thinking."
  },
  {
    parser: "qwen3",
    spec: "treats an unclosed block as all reasoning",
    source: "test_detect_and_parse_with_start_token",
    text: "<think>This is reasoning",
    reasoningText: "This is reasoning",
    normalText: ""
  },
  {
    parser: "qwen3",
    spec: "handles an empty block",
    source: "test_empty_reasoning_blocks",
    text: "<think></think>Just the answer.",
    reasoningText: "",
    normalText: "Just the answer."
  },
  {
    parser: "qwen3",
    spec: "strips the newlines the Qwen3 template puts around reasoning and before content",
    note: "SGLang (current) keeps \"\\nR\\n\" and \"\\n\\nA\"",
    text: "<think>\nLet me think.\n\nStep two.\n</think>\n\nThe answer.\n",
    reasoningText: "Let me think.\n\nStep two.",
    normalText: "The answer.\n"
  },
  {
    parser: "qwen3",
    spec: "keeps spaces (only newlines are stripped)",
    text: "<think> R </think> A",
    reasoningText: " R ",
    normalText: " A"
  },
  {
    parser: "qwen3",
    spec: "ends reasoning at a tool call when </think> is missing",
    text: "<think>\nI should call.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    reasoningText: "I should call.",
    normalText: "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"
  },
  {
    parser: "qwen3",
    spec: "recognises a block only at the start of the output",
    note: "SGLang also opens reasoning at a later <think>",
    text: "Use <think> tags.</think>",
    reasoningText: "",
    normalText: "Use <think> tags.</think>"
  },
  {
    parser: "qwen3",
    spec: "allows leading whitespace before the opening tag",
    text: "\n<think>R</think>A",
    reasoningText: "R",
    normalText: "A"
  },
  {
    parser: "qwen3-thinking",
    spec: "reads reasoning without an opening tag",
    source: "test_detect_and_parse_qwen3_forced_reasoning_format",
    text: "I need to think about this step by step.</think>The answer is 42.",
    reasoningText: "I need to think about this step by step.",
    normalText: "The answer is 42."
  },
  {
    parser: "qwen3-thinking",
    spec: "accepts an optional opening tag",
    source: "test_detect_and_parse_with_start_token",
    text: "<think>I need to think about this.</think>The answer is 42.",
    reasoningText: "I need to think about this.",
    normalText: "The answer is 42."
  },
  {
    parser: "qwen3-thinking",
    spec: "reads a whole forced response",
    source: "test_qwen3_forced_reasoning_complete_response",
    text:
      "Let me solve this step by step. The equation is x + 2 = 5. Subtracting 2 from both sides gives x = 3.</think>The solution is x = 3.",
    reasoningText:
      "Let me solve this step by step. The equation is x + 2 = 5. Subtracting 2 from both sides gives x = 3.",
    normalText: "The solution is x = 3."
  },
  {
    parser: "deepseek-r1",
    spec: "treats text without an end tag as reasoning",
    source: "test_detect_and_parse_r1_format",
    text: "I need to think about this. The answer is 42.",
    reasoningText: "I need to think about this. The answer is 42.",
    normalText: ""
  },
  {
    parser: "deepseek-r1",
    spec: "splits at the end tag",
    source: "test_detect_and_parse_with_end_token",
    text: "I think this is the answer</think>The final answer is 42.",
    reasoningText: "I think this is the answer",
    normalText: "The final answer is 42."
  },
  {
    parser: "deepseek-r1",
    spec: "accepts the R1-0528 opening tag",
    source: "test_detect_and_parse_with_start_token",
    text: "<think>I need to think about this.</think>The answer is 42.",
    reasoningText: "I need to think about this.",
    normalText: "The answer is 42."
  },
  {
    parser: "deepseek-r1",
    spec: "parses a complete response",
    source: "test_deepseek_r1_complete_response",
    text:
      "I need to solve this step by step. First, I'll analyze the problem. The given equation is x + 2 = 5. To solve for x, I subtract 2 from both sides: x = 5 - 2 = 3.</think>The answer is x = 3.",
    reasoningText:
      "I need to solve this step by step. First, I'll analyze the problem. The given equation is x + 2 = 5. To solve for x, I subtract 2 from both sides: x = 5 - 2 = 3.",
    normalText: "The answer is x = 3."
  },
  {
    parser: "kimi",
    spec: "splits Kimi's tags",
    source: "test_detect_and_parse_kimi_format",
    text: "◁think▷Let me consider this carefully◁/think▷The answer is 42.",
    reasoningText: "Let me consider this carefully",
    normalText: "The answer is 42."
  },
  {
    parser: "kimi",
    spec: "returns text without tags as normal text",
    source: "test_detect_and_parse_kimi_no_thinking",
    text: "Direct answer without thinking tokens.",
    reasoningText: "",
    normalText: "Direct answer without thinking tokens."
  },
  {
    parser: "glm45",
    spec: "splits <think> blocks",
    text: "<think>Reason through it</think>The answer is 42.",
    reasoningText: "Reason through it",
    normalText: "The answer is 42."
  },
  {
    parser: "glm45",
    spec: "keeps a lookalike fragment as text",
    source: "test_partial_start_tag_buffer_preservation",
    text: "<this is text",
    reasoningText: "",
    normalText: "<this is text"
  },
  {
    parser: "glm45",
    spec: "keeps a partial end tag outside reasoning",
    source: "test_partial_end_tag_buffer_loss_bug",
    text: "</answer",
    reasoningText: "",
    normalText: "</answer"
  },
  {
    parser: "gpt-oss",
    spec: "takes analysis as reasoning and unwraps the final message",
    text: "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello<|return|>",
    reasoningText: "Think.",
    normalText: "Hello"
  },
  {
    parser: "gpt-oss",
    spec: "keeps tool-call messages for the tool parser",
    text:
      "<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>analysis<|message|>B<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
    reasoningText: "A\nB",
    normalText: "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>"
  }
]

describe("reasoning parsers (SGLang cases)", () => {
  for (const c of cases) {
    describe(`${c.parser}: ${c.spec}`, () => {
      const parser = parserNamed(c.parser)
      it("parses in one shot as expected", () => {
        assert.deepStrictEqual(parser.parse(c.text), { reasoningText: c.reasoningText, normalText: c.normalText })
      })
      it("gives the one-shot result for every chunk split when streamed", () => {
        for (const chunks of Splits.splits(c.text)) {
          const stream = parser.stream()
          const parts = chunks.map((chunk) => stream.feed(chunk))
          parts.push(stream.finish())
          assert.deepStrictEqual(ReasoningParser.combine(parts), parser.parse(c.text), JSON.stringify(chunks))
        }
      })
    })
  }
})

describe("reasoning streaming", () => {
  it("streams reasoning as it arrives and never repeats it", () => {
    const stream = parserNamed("qwen3").stream()
    assert.deepStrictEqual(stream.feed("<think>"), { reasoningText: "", normalText: "" })
    assert.deepStrictEqual(stream.feed("thinking..."), { reasoningText: "thinking...", normalText: "" })
    assert.deepStrictEqual(stream.feed("</think>answer"), { reasoningText: "", normalText: "answer" })
    assert.deepStrictEqual(stream.finish(), { reasoningText: "", normalText: "" })
  })

  it("buffers a partial tag and flushes it when it does not match", () => {
    const stream = parserNamed("kimi").stream()
    assert.deepStrictEqual(stream.feed("◁thi"), { reasoningText: "", normalText: "" })
    assert.deepStrictEqual(stream.feed("nk▷Start"), { reasoningText: "Start", normalText: "" })
    assert.deepStrictEqual(stream.feed("◁/th"), { reasoningText: "", normalText: "" })
    assert.deepStrictEqual(stream.feed("ink▷answer"), { reasoningText: "", normalText: "answer" })
  })

  it("holds trailing newlines of reasoning until more reasoning arrives", () => {
    const stream = parserNamed("qwen3").stream()
    assert.strictEqual(stream.feed("<think>\nA\n").reasoningText, "A")
    assert.strictEqual(stream.feed("B\n").reasoningText, "\nB")
    assert.deepStrictEqual(stream.feed("</think>\n\nC"), { reasoningText: "", normalText: "C" })
  })
})
