/**
 * Chat-template rendering with `@huggingface/jinja`, the JS counterpart of `tokenizer.apply_chat_template(tokenize=False)`.
 *
 * **Details**
 * Tool-call `arguments` are canonical JSON strings; for rendering only they are decoded to objects, as the reference
 * does, so a template's `tojson` re-serializes them with its own spacing (Qwen3: `{"name": ..., "arguments": {...}}`).
 * Empty tool lists are passed as absent so `{% if tools %}` behaves as in Python.
 */
import { Template } from "@huggingface/jinja"
import type * as Canonical from "../protocol/canonical.ts"

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

/** Thrown (as a defect-free failure by callers) when a tool call's canonical arguments cannot feed the template. */
export class TemplateArgumentsError extends Error {
  readonly _tag = "TemplateArgumentsError"
}

const decodeArguments = (text: string): unknown => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new TemplateArgumentsError("Assistant tool call function.arguments must be valid JSON.")
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TemplateArgumentsError("Assistant tool call function.arguments must be a JSON object.")
  }
  return value
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
export const toTemplateMessage = (message: Canonical.Message): Record<string, unknown> => ({
  ...message,
  content: templateContent(message.content),
  ...(message.tool_calls === undefined
    ? {}
    : {
      tool_calls: message.tool_calls.map((call) => ({
        ...call,
        function: { ...call.function, arguments: decodeArguments(call.function.arguments) }
      }))
    })
})

/** Render a conversation to prompt text. Throws `TemplateArgumentsError` or the template's own error. */
export const render = (compiled: Compiled, input: RenderInput): string =>
  compiled.template.render({
    ...input.chatTemplateKwargs,
    ...compiled.specialTokens,
    messages: input.messages.map(toTemplateMessage),
    tools: input.tools.length > 0 ? input.tools : undefined,
    add_generation_prompt: input.addGenerationPrompt
  })
