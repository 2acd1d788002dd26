/**
 * Chat-template rendering with `@huggingface/jinja`, the JS counterpart of `tokenizer.apply_chat_template(tokenize=False)`.
 *
 * **Details**
 * Tool-call `arguments` are canonical JSON strings; for rendering only they are decoded to objects, as the reference
 * does, so a template's `tojson` re-serializes them with its own spacing (Qwen3: `{"name": ..., "arguments": {...}}`).
 * Empty tool lists are passed as absent so `{% if tools %}` behaves as in Python.
 *
 * A template whose source is Qwen3's (the bundled tokenizer's) renders through a JavaScript function that writes the
 * interpreter's text directly (src/template/Qwen3Template.ts); inputs it does not mirror, and every other template,
 * go through the interpreter.
 */
import { Template } from "@huggingface/jinja"
import { Data, Result } from "effect"
import type * as Canonical from "../protocol/Canonical.ts"
import * as Thrown from "../Thrown.ts"
import * as Qwen3Template from "./Qwen3Template.ts"

/**
 * The chat template cannot render a conversation: a tool call's arguments are not a JSON object, or the template
 * itself rejected the input (raised an exception, e.g. for image parts under a text-only template).
 */
export class TemplateError extends Data.TaggedError("TemplateError")<{
  /** `tool-arguments`: a tool call's arguments are not a JSON object; `template`: the template raised. */
  readonly reason: TemplateErrorReason
  /** What was wrong, in words (the template's own message for `template`). */
  readonly detail: string
  /** What the template raised, for `template`. */
  readonly cause?: unknown
}> {
  override get message() {
    return `chat template rendering failed: ${this.detail}`
  }
}

/** Why a conversation cannot be rendered. */
export type TemplateErrorReason = "tool-arguments" | "template"

export interface Compiled {
  readonly source: string
  readonly template: Template
  readonly specialTokens: { readonly bos_token: string; readonly eos_token: string }
  /** How the template's text depends on `tools` (see {@link toolsPrefix}). */
  readonly toolsPrefix: ToolsPrefix | undefined
  /** A renderer that writes the interpreter's text without interpreting the template, for the templates it knows. */
  readonly direct: ((input: Qwen3Template.Input) => string | undefined) | undefined
}

/** Compile a chat template once; rendering reuses the parsed AST. */
export const compile = (source: string, specialTokens: Compiled["specialTokens"]): Compiled => {
  const template = new Template(source)
  const direct = source === Qwen3Template.SOURCE ? Qwen3Template.render : undefined
  return { source, template, specialTokens, toolsPrefix: toolsPrefix(template), direct }
}

/**
 * A template whose text is a part that depends on the tools followed by a part that does not: every statement that
 * reads `tools` is one of the template's first top-level statements, and those statements read only the tools, the
 * messages at literal indexes below `messagesRead`, and the kwargs (see {@link toolsPrefix}).
 */
export interface ToolsPrefix {
  /** One more than the largest literal index of `messages` the leading statements read (0 when none). */
  readonly messagesRead: number
}

type AstNode = { readonly [key: string]: unknown }

const isAstNode = (value: unknown): value is AstNode => value !== null && typeof value === "object"

/**
 * Visits every node under `value` (statements, expressions, their arrays and the Maps of object literals) with its
 * parent; an object already on the path (a cycle) is not entered again.
 */
const walkAst = (value: unknown, visit: (node: AstNode, parent: AstNode | undefined) => void): void => {
  const path = new Set<object>()
  const walk = (item: unknown, parent: AstNode | undefined): void => {
    if (!isAstNode(item) || path.has(item)) return
    path.add(item)
    enter(item, parent)
    path.delete(item)
  }
  const enter = (item: AstNode, parent: AstNode | undefined): void => {
    if (Array.isArray(item)) {
      for (const element of item) walk(element, parent)
    } else if (item instanceof Map) {
      for (const [key, element] of item) {
        walk(key, parent)
        walk(element, parent)
      }
    } else {
      visit(item, parent)
      for (const child of Object.values(item)) walk(child, item)
    }
  }
  walk(value, undefined)
}

const isIdentifier = (node: AstNode, name: string): boolean => node["type"] === "Identifier" && node["value"] === name

const readsName = (statement: unknown, name: string): boolean => {
  let found = false
  walkAst(statement, (node) => {
    if (isIdentifier(node, name)) found = true
  })
  return found
}

/** Statements that change what later statements see: assignments (namespace attributes included) and macros. */
const STATEFUL_STATEMENTS: ReadonlySet<unknown> = new Set(["Set", "Macro", "CallStatement"])
/** Context names that differ between renders of one tool list: the generation prompt flag and the clock. */
const VARYING_NAMES: ReadonlySet<unknown> = new Set(["add_generation_prompt", "strftime_now"])

/**
 * Whether the template's text is `prefix(tools, messages[0 .. messagesRead - 1], kwargs) + rest(messages, kwargs,
 * add_generation_prompt)`, proven on its syntax tree; `undefined` when that cannot be shown.
 *
 * **Details**
 * Jinja renders top-level statements in order and concatenates their text, and a statement affects the ones after it
 * only through assignments (`set`, namespace attributes included) and macros. So when the statements that mention
 * `tools` are a leading run of the template's top-level statements, assign nothing, define or call no macro, call no
 * method, and read `messages` only at literal non-negative indexes and neither `add_generation_prompt` nor the clock,
 * their text is a function of the tools, those first messages and the kwargs, and the text of the rest does not depend
 * on the tools. Qwen2.5's and Qwen3's templates have this shape (the `{% if tools %}` system block); a template that
 * mentions no `tools` has it with no prefix. Names are matched conservatively: a loop variable or attribute named
 * `tools` or `messages` counts as a mention.
 */
export const toolsPrefix = (template: Template): ToolsPrefix | undefined => {
  const body: ReadonlyArray<unknown> = template.parsed.body
  let leading = 0
  while (leading < body.length && readsName(body[leading], "tools")) leading++
  for (let i = leading; i < body.length; i++) if (readsName(body[i], "tools")) return undefined
  let messagesRead = 0
  let separable = true
  walkAst(body.slice(0, leading), (node, parent) => {
    if (STATEFUL_STATEMENTS.has(node["type"])) separable = false
    // Method calls are refused too: none of the interpreter's methods changes its object, but a later one might.
    if (
      node["type"] === "CallExpression" && isAstNode(node["callee"]) && node["callee"]["type"] === "MemberExpression"
    ) {
      separable = false
    }
    if (node["type"] !== "Identifier") return
    if (VARYING_NAMES.has(node["value"])) separable = false
    if (node["value"] !== "messages") return
    const index = parent?.["property"]
    const literalIndex = parent?.["type"] === "MemberExpression" && parent["computed"] === true &&
      parent["object"] === node && isAstNode(index) && index["type"] === "IntegerLiteral" &&
      typeof index["value"] === "number" && Number.isInteger(index["value"]) && index["value"] >= 0
    if (literalIndex) messagesRead = Math.max(messagesRead, Number(index["value"]) + 1)
    else separable = false
  })
  return separable ? { messagesRead } : undefined
}

export interface RenderInput {
  readonly messages: ReadonlyArray<Canonical.Message>
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly chatTemplateKwargs: Canonical.TemplateKwargs
  readonly addGenerationPrompt: boolean
}

const decodeArguments = (text: string): Result.Result<object, TemplateError> => {
  const parsed = Result.try(() => JSON.parse(text) as unknown)
  if (Result.isFailure(parsed)) {
    return Result.fail(
      new TemplateError({
        reason: "tool-arguments",
        detail: "Assistant tool call function.arguments must be valid JSON."
      })
    )
  }
  const value = parsed.success
  return value === null || typeof value !== "object" || Array.isArray(value)
    ? Result.fail(
      new TemplateError({
        reason: "tool-arguments",
        detail: "Assistant tool call function.arguments must be a JSON object."
      })
    )
    : Result.succeed(value)
}

/**
 * Content as the template sees it: a part list made only of text parts becomes its joined text, which is what a
 * multimodal template renders for such a list and the only form text-only templates (Qwen3's) accept. Lists with
 * other parts (images) are passed as they are, for templates that render them.
 */
const templateContent = (content: Canonical.Message["content"]): Canonical.Message["content"] => {
  if (typeof content === "string") return content
  let text = ""
  for (const part of content) {
    const value = part["text"]
    if (part["type"] !== "text" || typeof value !== "string") return content
    text += value
  }
  return text
}

/** The message as the template sees it: text-only part lists joined, tool-call arguments as objects. */
export const toTemplateMessage = (
  message: Canonical.Message
): Result.Result<Record<string, unknown>, TemplateError> => {
  const content = templateContent(message.content)
  if (message.tool_calls === undefined) return Result.succeed({ ...message, content })
  const calls: Array<Record<string, unknown>> = []
  for (const call of message.tool_calls) {
    const args = decodeArguments(call.function.arguments)
    if (Result.isFailure(args)) return Result.fail(args.failure)
    calls.push({ ...call, function: { ...call.function, arguments: args.success } })
  }
  return Result.succeed({ ...message, content, tool_calls: calls })
}

/**
 * The messages as {@link Compiled.direct} reads them: `undefined` when one has content that is not text once its
 * text parts are joined (images) or a tool call without a string name (the interpreter renders those); a failure
 * when a tool call's arguments do not decode to an object (the interpreter's path fails the same way first).
 */
const directMessages = (
  messages: ReadonlyArray<Canonical.Message>
): Result.Result<Array<Qwen3Template.TemplateMessage>, TemplateError> | undefined => {
  const out: Array<Qwen3Template.TemplateMessage> = []
  for (const message of messages) {
    const content = templateContent(message.content)
    if (typeof content !== "string") return undefined
    const toolCalls = message.tool_calls
    if (toolCalls === undefined) {
      out.push({ role: message.role, content, reasoning_content: message.reasoning_content })
      continue
    }
    const calls: Array<{ readonly name: string; readonly arguments: object }> = []
    for (const call of toolCalls) {
      const name = call.function.name
      if (typeof name !== "string") return undefined
      const args = decodeArguments(call.function.arguments)
      if (Result.isFailure(args)) return Result.fail(args.failure)
      calls.push({ name, arguments: args.success })
    }
    out.push({ role: message.role, content, reasoning_content: message.reasoning_content, tool_calls: calls })
  }
  return Result.succeed(out)
}

/** Render a conversation to prompt text; a template that raises is a {@link TemplateError} with its message. */
export const render = (compiled: Compiled, input: RenderInput): Result.Result<string, TemplateError> => {
  if (compiled.direct !== undefined) {
    const messages = directMessages(input.messages)
    if (messages !== undefined && Result.isFailure(messages)) return Result.fail(messages.failure)
    const text = messages === undefined ? undefined : compiled.direct({
      messages: messages.success,
      tools: input.tools,
      kwargs: input.chatTemplateKwargs,
      addGenerationPrompt: input.addGenerationPrompt
    })
    if (text !== undefined) return Result.succeed(text)
  }
  return interpret(compiled, input)
}

/** Render with the jinja interpreter. */
export const interpret = (compiled: Compiled, input: RenderInput): Result.Result<string, TemplateError> => {
  const messages: Array<Record<string, unknown>> = []
  for (const message of input.messages) {
    const converted = toTemplateMessage(message)
    if (Result.isFailure(converted)) return Result.fail(converted.failure)
    messages.push(converted.success)
  }
  // The jinja library reports template errors by throwing: this is where they become a value.
  return Result.try({
    try: () =>
      compiled.template.render({
        ...input.chatTemplateKwargs,
        ...compiled.specialTokens,
        messages,
        tools: input.tools.length > 0 ? input.tools : undefined,
        add_generation_prompt: input.addGenerationPrompt
      }),
    catch: (error) => new TemplateError({ reason: "template", detail: Thrown.messageOf(error), cause: error })
  })
}
