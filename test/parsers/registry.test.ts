import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"

describe("parser registry", () => {
  it("knows SGLang's tool-call parser names", () => {
    for (
      const name of [
        "qwen25",
        "hermes",
        "qwen3_coder",
        "llama3",
        "mistral",
        "deepseekv3",
        "deepseekv31",
        "kimi_k2",
        "glm45",
        "gpt-oss",
        "pythonic"
      ]
    ) {
      assert.isTrue(ParserRegistry.ToolCallParsers.names.includes(name), name)
      assert.isTrue(Result.isSuccess(ParserRegistry.ToolCallParsers.get(name)), name)
    }
  })

  it("knows SGLang's reasoning parser names, case-insensitively", () => {
    for (const name of ["qwen3", "qwen3-thinking", "deepseek-r1", "glm45", "kimi", "gpt-oss", "QWEN3", "DeepSeek-R1"]) {
      assert.isTrue(Result.isSuccess(ParserRegistry.ReasoningParsers.get(name)), name)
    }
  })

  it("rejects an unknown tool-call parser with a message listing the known names", () => {
    const r = ParserRegistry.ToolCallParsers.get("qwen2")
    assert.isTrue(Result.isFailure(r))
    if (Result.isFailure(r)) {
      assert.instanceOf(r.failure, ParserRegistry.UnknownParserError)
      assert.include(r.failure.message, "--agentic-tool-call-parser: unknown parser \"qwen2\"")
      for (const name of ParserRegistry.ToolCallParsers.names) assert.include(r.failure.message, name)
    }
  })

  it("rejects an unknown reasoning parser naming its flag", () => {
    const r = ParserRegistry.ReasoningParsers.get("o1")
    assert.isTrue(
      Result.isFailure(r) && r.failure.message.startsWith("--agentic-reasoning-parser: unknown parser \"o1\"")
    )
  })
})
