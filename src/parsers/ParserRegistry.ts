/**
 * The parser registries, keyed by the names SGLang uses for `--tool-call-parser` / `--reasoning-parser`.
 *
 * **Details**
 * Adding a format is one module and one line here. An unknown name is an {@link UnknownParserError} whose message
 * lists the known names; `--agentic-tool-call-parser` / `--agentic-reasoning-parser` report it at startup.
 */
import { Data, Result } from "effect"
import * as GptOssReasoning from "./reasoning/GptOssReasoning.ts"
import * as ReasoningParser from "./ReasoningParser.ts"
import * as DeepSeekV3 from "./tool/DeepSeekV3.ts"
import * as DeepSeekV31 from "./tool/DeepSeekV31.ts"
import * as Glm45 from "./tool/Glm45.ts"
import * as GptOss from "./tool/GptOss.ts"
import * as KimiK2 from "./tool/KimiK2.ts"
import * as Llama3 from "./tool/Llama3.ts"
import * as Mistral from "./tool/Mistral.ts"
import * as Pythonic from "./tool/Pythonic.ts"
import * as Qwen25 from "./tool/Qwen25.ts"
import * as Qwen3Coder from "./tool/Qwen3Coder.ts"
import * as ToolCallParser from "./ToolCallParser.ts"

/** A parser name that is not registered. */
export class UnknownParserError extends Data.TaggedError("UnknownParserError")<{
  readonly flag: "--agentic-tool-call-parser" | "--agentic-reasoning-parser"
  readonly name: string
  readonly known: ReadonlyArray<string>
}> {
  override get message() {
    return `${this.flag}: unknown parser "${this.name}". Known names: ${this.known.join(", ")}. ` +
      `Use one of these (SGLang's names), or omit ${this.flag} to leave generated text unparsed.`
  }
}

const toolFormats: ReadonlyArray<readonly [string, ToolCallParser.Format]> = [
  ["qwen25", Qwen25.format],
  ["qwen", Qwen25.format],
  ["hermes", Qwen25.format],
  ["qwen3_coder", Qwen3Coder.format],
  ["llama3", Llama3.format],
  ["mistral", Mistral.format],
  ["deepseekv3", DeepSeekV3.format],
  ["deepseekv31", DeepSeekV31.format],
  ["kimi_k2", KimiK2.format],
  ["glm45", Glm45.format],
  ["glm", Glm45.format],
  ["gpt-oss", GptOss.format],
  ["pythonic", Pythonic.format]
]

const toolParsers: ReadonlyMap<string, ToolCallParser.ToolCallParser> = new Map(
  toolFormats.map(([name, format]) => [name, ToolCallParser.make(name, format)])
)

const reasoningParsers: ReadonlyMap<string, ReasoningParser.ReasoningParser> = new Map(
  [
    ReasoningParser.thinkTags("qwen3", { start: "<think>", end: "</think>", forced: false, toolStart: "<tool_call>" }),
    ReasoningParser.thinkTags("qwen3-thinking", {
      start: "<think>",
      end: "</think>",
      forced: true,
      toolStart: "<tool_call>"
    }),
    ReasoningParser.thinkTags("deepseek-r1", { start: "<think>", end: "</think>", forced: true }),
    ReasoningParser.thinkTags("glm45", { start: "<think>", end: "</think>", forced: false }),
    ReasoningParser.thinkTags("kimi", { start: "◁think▷", end: "◁/think▷", forced: false }),
    GptOssReasoning.parser
  ].map((p) => [p.name, p])
)

const toolParserNames: ReadonlyArray<string> = [...toolParsers.keys()]
const reasoningParserNames: ReadonlyArray<string> = [...reasoningParsers.keys()]

/** Tool-call parsers by SGLang name (names are exact, as in SGLang). */
export const ToolCallParsers = {
  names: toolParserNames,
  get: (name: string): Result.Result<ToolCallParser.ToolCallParser, UnknownParserError> => {
    const parser = toolParsers.get(name)
    return parser === undefined
      ? Result.fail(new UnknownParserError({ flag: "--agentic-tool-call-parser", name, known: toolParserNames }))
      : Result.succeed(parser)
  }
} as const

/** Reasoning parsers by SGLang name (matched case-insensitively, as in SGLang). */
export const ReasoningParsers = {
  names: reasoningParserNames,
  get: (name: string): Result.Result<ReasoningParser.ReasoningParser, UnknownParserError> => {
    const parser = reasoningParsers.get(name.toLowerCase())
    return parser === undefined
      ? Result.fail(new UnknownParserError({ flag: "--agentic-reasoning-parser", name, known: reasoningParserNames }))
      : Result.succeed(parser)
  }
} as const

export type { ReasoningParser, ReasoningResult, ReasoningStream } from "./ReasoningParser.ts"
export type { ToolCall, ToolCallParser, ToolCallResult, ToolCallStream } from "./ToolCallParser.ts"
