/**
 * Chat-template rendering with `@huggingface/jinja`, the JS counterpart of `tokenizer.apply_chat_template(tokenize=False)`.
 *
 * **Details**
 * Tool-call `arguments` are canonical JSON strings; for rendering only they are decoded to objects, as the reference
 * does, so a template's `tojson` re-serializes them with its own spacing (Qwen3: `{"name": ..., "arguments": {...}}`).
 * Empty tool lists are passed as absent so `{% if tools %}` behaves as in Python.
 */
import { Template } from "@huggingface/jinja"
import { Data, Result } from "effect"
import type * as Canonical from "../protocol/canonical.ts"

/**
 * The chat template cannot render a conversation: a tool call's arguments are not a JSON object, or the template
 * itself rejected the input (raised an exception, e.g. for image parts under a text-only template).
 */
export class TemplateError extends Data.TaggedError("TemplateError")<{ readonly reason: string }> {
  override get message() {
    return `chat template rendering failed: ${this.reason}`
  }
}

export interface Compiled {
  readonly source: string
  readonly template: Template
  readonly specialTokens: { readonly bos_token: string; readonly eos_token: string }
}

/** Compile a chat template once; rendering reuses the parsed AST. */
export const compile = (source: string, specialTokens: Compiled["specialTokens"]): Compiled => ({
  source,
  template: new Template(source),
  specialTokens
})

export interface RenderInput {
  readonly messages: ReadonlyArray<Canonical.Message>
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly chatTemplateKwargs: Canonical.TemplateKwargs
  readonly addGenerationPrompt: boolean
}

const decodeArguments = (text: string): Result.Result<unknown, TemplateError> => {
  const parsed = Result.try(() => JSON.parse(text) as unknown)
  if (Result.isFailure(parsed)) {
    return Result.fail(new TemplateError({ reason: "Assistant tool call function.arguments must be valid JSON." }))
  }
  const value = parsed.success
  return value === null || typeof value !== "object" || Array.isArray(value)
    ? Result.fail(new TemplateError({ reason: "Assistant tool call function.arguments must be a JSON object." }))
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
export const toTemplateMessage = (message: Canonical.Message): Result.Result<Record<string, unknown>, TemplateError> => {
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

/** Render a conversation to prompt text; a template that raises is a {@link TemplateError} with its message. */
export const render = (compiled: Compiled, input: RenderInput): Result.Result<string, TemplateError> => {
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
    catch: (error) => new TemplateError({ reason: error instanceof Error ? error.message : String(error) })
  })
}
