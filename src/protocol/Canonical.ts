/**
 * The canonical conversation model: what every protocol request is normalized to before SessionForest matching,
 * template rendering and generation.
 *
 * **Details**
 * Canonical messages are Chat-Completions shaped (roles user/assistant/system/tool). All three wire protocols
 * (Chat Completions, Responses, Anthropic Messages) project their requests onto raw Chat-shaped messages and then
 * call {@link canonicalize}, so validation and canonicalization live in exactly one place. The rules and error texts
 * are the reference's `check_messages` / `normalize_tools` / `normalize_template_kwargs` (docs/requests.md "Canonical
 * messages"); type names in messages are Python's (`<class 'dict'>`) because agents and tests compare the texts.
 */
import { Result, Schema } from "effect"
import * as PyJson from "../json/PythonJson.ts"
import * as CanonicalCheck from "./CanonicalCheck.ts"
import * as ToolArguments from "./ToolArguments.ts"

export { CanonicalError, pythonType } from "./CanonicalCheck.ts"
export { canonicalArguments, canonicalArgumentsUncached } from "./ToolArguments.ts"

/** Any JSON value (content parts and tool schemas are kept verbatim as JSON). */
export const Json = Schema.Json
export type Json = Schema.Json
export type JsonObject = Schema.JsonObject

/** A content part: `{type:"text",text}`, `{type:"image_url",image_url:{url}}`, or another typed part kept verbatim. */
export const ContentPart = Schema.Record(Schema.String, Schema.Json)
export type ContentPart = typeof ContentPart.Type

/**
 * A tool call on an assistant message; `function.arguments` is compact, key-sorted JSON text.
 *
 * **Details**
 * Keys other than `id` / `function.name` / `function.arguments` (e.g. `type: "function"`, `index`) are kept as the
 * client sent them, as the reference does, so they take part in the state hash; only the SDKs' derived
 * `function.parsed_arguments` is dropped.
 */
export const ToolCall = Schema.StructWithRest(
  Schema.Struct({
    id: Schema.optionalKey(Schema.String),
    type: Schema.optionalKey(Schema.Json),
    function: Schema.StructWithRest(
      Schema.Struct({
        name: Schema.optionalKey(Schema.String),
        arguments: Schema.String
      }),
      [Schema.Record(Schema.String, Schema.Json)]
    )
  }),
  [Schema.Record(Schema.String, Schema.Json)]
)
export type ToolCall = typeof ToolCall.Type

/**
 * One tool call a tool-call parser read from generated text (src/parsers/ToolCallParser.ts); `arguments` is JSON
 * object text (the model's own text where it wrote JSON).
 */
export interface ParsedToolCall {
  readonly name: string
  readonly arguments: string
}

/** The message shape of a generated tool call (`{id, type: "function", function: {name, arguments}}`). */
export const toolCallOf = (
  call: { readonly id: string; readonly name: string; readonly arguments: string }
): ToolCall => ({
  id: call.id,
  type: "function",
  function: { name: call.name, arguments: call.arguments }
})

export const Role = Schema.Literals(["system", "user", "assistant", "tool"])
export type Role = typeof Role.Type

/** One canonical message. Keys other than these are dropped by {@link canonicalize}. */
export const Message = Schema.Struct({
  role: Role,
  content: Schema.Union([Schema.String, Schema.Array(ContentPart)]),
  reasoning_content: Schema.optionalKey(Schema.String),
  tool_calls: Schema.optionalKey(Schema.Array(ToolCall)),
  tool_call_id: Schema.optionalKey(Schema.String)
})
export type Message = typeof Message.Type

/** A canonical function tool: `{type:"function", function:{name, parameters, description?}}`. */
export const Tool = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.Json,
    parameters: Schema.Json,
    description: Schema.optionalKey(Schema.Json)
  })
})
export type Tool = typeof Tool.Type

/** Chat-template keyword arguments, with keys recursively sorted. */
export const TemplateKwargs = Schema.Record(Schema.String, Schema.Json)
export type TemplateKwargs = typeof TemplateKwargs.Type

/** A complete canonical conversation state: the triple SessionForest hashes and matches on. */
export const State = Schema.Struct({
  messages: Schema.Array(Message),
  tools: Schema.Array(Tool),
  chat_template_kwargs: TemplateKwargs
})
export type State = typeof State.Type

// ---------------------------------------------------------------------------------------------------------------
// Messages

/**
 * `function.parsed_arguments`: the OpenAI SDKs' client-side parse of `arguments` (the JS `chat.completions.stream`
 * helper and `parse()` with strict tools, Python's stream helper always). It repeats `arguments`, which the
 * assistant message keeps, so it is dropped: an SDK-returned message echoed unchanged must match its committed state.
 */
const CLIENT_PARSED_ARGUMENTS = "parsed_arguments"

/** No tool calls (shared: never written to). */
const noToolCalls: CanonicalCheck.Checked<ReadonlyArray<ToolCall>> = Result.succeed([])

const normalizeToolCalls = (
  message: CanonicalCheck.Dict,
  index: number
): CanonicalCheck.Checked<ReadonlyArray<ToolCall>> => {
  const toolCalls = CanonicalCheck.get(message, "tool_calls")
  if (toolCalls === undefined || toolCalls === null) return noToolCalls
  if (!Array.isArray(toolCalls)) {
    return CanonicalCheck.fail(
      `messages[${index}].tool_calls must be a list, got ${CanonicalCheck.pythonType(toolCalls)}`,
      `messages[${index}].tool_calls`
    )
  }
  return CanonicalCheck.traverse(toolCalls, (call: unknown, j): CanonicalCheck.Checked<ToolCall> => {
    // Paths are built only for an error (every echoed call is checked again on every request).
    const path = () => `messages[${index}].tool_calls[${j}]`
    if (!CanonicalCheck.isDict(call)) {
      return CanonicalCheck.fail(`${path()} must be a dict, got ${CanonicalCheck.pythonType(call)}`, path())
    }
    const id = CanonicalCheck.get(call, "id")
    if (id !== undefined && id !== null && (typeof id !== "string" || id.length === 0)) {
      return CanonicalCheck.fail(`${path()}.id must be a non-empty string`, `${path()}.id`)
    }
    const fn = CanonicalCheck.get(call, "function")
    if (!CanonicalCheck.isDict(fn)) {
      return CanonicalCheck.fail(
        `${path()}.function must be a dict, got ${CanonicalCheck.pythonType(fn)}`,
        `${path()}.function`
      )
    }
    const name = CanonicalCheck.get(fn, "name")
    if (name !== undefined && name !== null && typeof name !== "string") {
      return CanonicalCheck.fail(
        `${path()}.function.name must be a string, got ${CanonicalCheck.pythonType(name)}`,
        `${path()}.function.name`
      )
    }
    const argumentsText = argumentsTextAt(CanonicalCheck.get(fn, "arguments"), path)
    if (Result.isFailure(argumentsText)) return Result.fail(argumentsText.failure)
    // Other keys are kept verbatim (reference: deepcopy of the call), in the client's order after `id`. A null
    // `id` / `name` (accepted by the reference) is dropped: the canonical type has no null there. A `__proto__` key
    // is dropped too (it never was an own key of the copy).
    const out: Record<string, Json> = typeof id === "string" ? { id } : {}
    for (const key in call) {
      if (key !== "id" && key !== "function" && key !== "__proto__" && CanonicalCheck.has(call, key)) {
        out[key] = CanonicalCheck.copyJson(call[key])
      }
    }
    const fnOut: Record<string, Json> = {}
    for (const key in fn) {
      if (
        key !== "name" && key !== "arguments" && key !== CLIENT_PARSED_ARGUMENTS && key !== "__proto__" &&
        CanonicalCheck.has(fn, key)
      ) {
        fnOut[key] = CanonicalCheck.copyJson(fn[key])
      }
    }
    if (typeof name === "string") fnOut["name"] = name
    fnOut["arguments"] = argumentsText.success
    out["function"] = fnOut
    // Decoding boundary: built key by key from the checked call above.
    return Result.succeed(out as unknown as ToolCall)
  })
}

const argumentsTextAt = (raw: unknown, call: () => string): Result.Result<string, CanonicalCheck.CanonicalError> =>
  ToolArguments.argumentsText(raw, () => `${call()}.function.arguments`)

/**
 * Why an image URL from a request is refused, or `undefined` when it is accepted: only `data:` and `http(s)://` URLs
 * are. The engine (SGLang's `image_data`) would read a local path or `file://` URL from its own disk; an agent must not
 * make it read files (only dataset images are read from disk, before the agent starts).
 */
export const refusedImageUrl = (url: unknown): string | undefined => {
  if (typeof url !== "string" || url.length === 0) return "must be a non-empty string"
  if (/^(data:|https?:\/\/)/i.test(url)) return undefined
  const shown = url.length > 80 ? `${url.slice(0, 80)}...` : url
  return `must be a data: URL or an http(s):// URL, got ${JSON.stringify(shown)} (local files and other schemes are ` +
    "not read: put images in the dataset, or send them inline as base64 data: URLs)"
}

const checkContent = (
  message: CanonicalCheck.Dict,
  index: number,
  role: Role,
  allowEmpty: boolean
): CanonicalCheck.Checked<string | Array<ContentPart>> => {
  const content = CanonicalCheck.get(message, "content")
  if (typeof content === "string" && (content.length > 0 || role === "tool" || allowEmpty)) {
    return Result.succeed(content)
  }
  const path = `messages[${index}].content`
  if (!CanonicalCheck.has(message, "content") && !allowEmpty) {
    return CanonicalCheck.fail(`messages[${index}] must include content`, path)
  }
  if (content === undefined || content === null) {
    if (!allowEmpty) return CanonicalCheck.fail(`${path} must not be empty`, path)
    return Result.succeed("")
  }
  if (typeof content === "string") return CanonicalCheck.fail(`${path} must not be empty`, path)
  if (Array.isArray(content)) {
    if (content.length === 0) return CanonicalCheck.fail(`${path} must not be empty`, path)
    return CanonicalCheck.traverse(content, (item: unknown, j): CanonicalCheck.Checked<ContentPart> => {
      if (!CanonicalCheck.isDict(item)) {
        return CanonicalCheck.fail(
          `${path}[${j}] must be a dict, got ${CanonicalCheck.pythonType(item)}`,
          `${path}[${j}]`
        )
      }
      if (CanonicalCheck.get(item, "type") === "text" && CanonicalCheck.get(item, "text") === "") {
        return CanonicalCheck.fail(`${path}[${j}].text must not be empty`, `${path}[${j}].text`)
      }
      if (CanonicalCheck.get(item, "type") === "image_url") {
        const image = CanonicalCheck.get(item, "image_url")
        const refused = refusedImageUrl(CanonicalCheck.isDict(image) ? CanonicalCheck.get(image, "url") : image)
        if (refused !== undefined) {
          return CanonicalCheck.fail(`${path}[${j}].image_url.url ${refused}`, `${path}[${j}].image_url.url`)
        }
      }
      return Result.succeed(CanonicalCheck.copyJson(item) as ContentPart)
    })
  }
  return CanonicalCheck.fail(`${path} must be a list, string, or None, got ${CanonicalCheck.pythonType(content)}`, path)
}

const roles: ReadonlyArray<string> = ["assistant", "system", "tool", "user"]
const isRole = (value: string): value is Role => roles.includes(value)

/** A canonical message, or the text chunks of a system message (merged into one leading system message). */
const canonicalizeMessage = (
  message: unknown,
  index: number
): CanonicalCheck.Checked<Message | ReadonlyArray<string>> => {
  if (!CanonicalCheck.isDict(message)) {
    return CanonicalCheck.fail(
      `messages[${index}] must be a dict, got ${CanonicalCheck.pythonType(message)}`,
      `messages[${index}]`
    )
  }
  if (!CanonicalCheck.has(message, "role")) {
    return CanonicalCheck.fail(`messages[${index}] must include role`, `messages[${index}].role`)
  }
  const role = message["role"]
  if (typeof role !== "string") {
    return CanonicalCheck.fail(
      `messages[${index}].role must be a string, got ${CanonicalCheck.pythonType(role)}`,
      `messages[${index}].role`
    )
  }
  if (!isRole(role)) {
    return CanonicalCheck.fail(`messages[${index}].role must be one of: ${roles.join(", ")}`, `messages[${index}].role`)
  }
  const normalized = role === "assistant" ? normalizeToolCalls(message, index) : noToolCalls
  if (Result.isFailure(normalized)) return Result.fail(normalized.failure)
  const toolCalls = normalized.success
  const reasoning = CanonicalCheck.get(message, "reasoning_content")
  if (reasoning !== undefined && reasoning !== null && typeof reasoning !== "string") {
    return CanonicalCheck.fail(
      `messages[${index}].reasoning_content must be a string, got ${CanonicalCheck.pythonType(reasoning)}`,
      `messages[${index}].reasoning_content`
    )
  }
  const hasReasoning = typeof reasoning === "string" && reasoning.length > 0
  const allowEmpty = role === "assistant" && (toolCalls.length > 0 || hasReasoning)
  let toolCallId: string | undefined
  if (role === "tool" && CanonicalCheck.has(message, "tool_call_id")) {
    const value = message["tool_call_id"]
    if (typeof value !== "string" || value.length === 0) {
      return CanonicalCheck.fail(
        `messages[${index}].tool_call_id must be a non-empty string`,
        `messages[${index}].tool_call_id`
      )
    }
    toolCallId = value
  }
  const checked = checkContent(message, index, role, allowEmpty)
  if (Result.isFailure(checked)) return Result.fail(checked.failure)
  const content = checked.success
  if (role === "system") {
    if (typeof content === "string") return Result.succeed([content])
    const chunks: Array<string> = []
    for (const part of content) if (typeof part["text"] === "string") chunks.push(part["text"])
    return Result.succeed(chunks)
  }
  // The keys in this order (they are hashed and rendered): role, content, reasoning_content, tool_calls, tool_call_id.
  // One literal of every key a message has where it can (the forest keeps a copy of each message, and a copy has its
  // source's layout: a key added to a smaller literal goes to a property array of its own, 40 bytes a message).
  if (toolCallId === undefined) {
    if (!hasReasoning) {
      return Result.succeed(toolCalls.length > 0 ? { role, content, tool_calls: toolCalls } : { role, content })
    }
    return Result.succeed(
      toolCalls.length > 0
        ? { role, content, reasoning_content: reasoning, tool_calls: toolCalls }
        : { role, content, reasoning_content: reasoning }
    )
  }
  if (!hasReasoning && toolCalls.length === 0) return Result.succeed({ role, content, tool_call_id: toolCallId })
  const out: Mutable<Message> = { role, content }
  if (hasReasoning) out.reasoning_content = reasoning
  if (toolCalls.length > 0) out.tool_calls = toolCalls
  out.tool_call_id = toolCallId
  return Result.succeed(out)
}

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

const isSystemChunks = (value: Message | ReadonlyArray<string>): value is ReadonlyArray<string> => Array.isArray(value)

/**
 * Validate and canonicalize a raw Chat-shaped message list (docs/requests.md "Canonical messages").
 *
 * **Details**
 * `null`/absent → `[]`. Unknown keys are dropped, tool-call arguments become canonical JSON text, empty
 * `reasoning_content` is dropped, and every system message (wherever it occurs) is merged into one leading system
 * message joined by `"\n\n"` (text parts only for list contents).
 */
export const canonicalizeMessages = (
  raw: unknown,
  known?: KnownPrefix | undefined
): Result.Result<ReadonlyArray<Message>, CanonicalCheck.CanonicalError> => {
  if (raw === undefined || raw === null) return Result.succeed([])
  if (!Array.isArray(raw)) {
    return CanonicalCheck.fail(`messages must be a list, got ${CanonicalCheck.pythonType(raw)}`, "messages")
  }
  if (known !== undefined && known.count <= raw.length) {
    const resumed = canonicalizeAfter(raw, known)
    if (resumed !== undefined) return resumed
  }
  const systemChunks: Array<string> = []
  const out: Array<Message> = []
  for (let index = 0; index < raw.length; index++) {
    const checked = canonicalizeMessage(raw[index], index)
    if (Result.isFailure(checked)) return Result.fail(checked.failure)
    const canonical = checked.success
    if (isSystemChunks(canonical)) systemChunks.push(...canonical)
    else out.push(canonical)
  }
  return Result.succeed(
    systemChunks.length > 0 ? [{ role: "system", content: systemChunks.join("\n\n") }, ...out] : out
  )
}

/**
 * What the first `count` raw messages of a request are known to canonicalize to (`messages`, system messages merged):
 * the previous request of the Session sent them byte for byte (src/protocol/RawEcho.ts).
 */
export interface KnownPrefix {
  readonly count: number
  readonly messages: ReadonlyArray<Message>
}

/**
 * {@link canonicalizeMessages} of `raw` whose first `known.count` messages canonicalize to `known.messages`: those
 * followed by the rest canonicalized. `undefined` when the rest holds a system message (it would be merged into the
 * leading one): canonicalize the whole list then. A failure names the same message and text the whole list's would,
 * as the known messages canonicalized without one.
 */
const canonicalizeAfter = (
  raw: ReadonlyArray<unknown>,
  known: KnownPrefix
): Result.Result<ReadonlyArray<Message>, CanonicalCheck.CanonicalError> | undefined => {
  const out: Array<Message> = known.messages.slice()
  for (let index = known.count; index < raw.length; index++) {
    const checked = canonicalizeMessage(raw[index], index)
    if (Result.isFailure(checked)) return Result.fail(checked.failure)
    const canonical = checked.success
    if (isSystemChunks(canonical)) return undefined
    out.push(canonical)
  }
  return Result.succeed(out)
}

// ---------------------------------------------------------------------------------------------------------------
// Tools and template kwargs

/**
 * Project raw tools onto canonical function tools: `{type:"function", function:{name, parameters, description?}}`.
 * Non-function tools are skipped; `null`/absent → `[]`.
 */
export const normalizeTools = (raw: unknown): Result.Result<ReadonlyArray<Tool>, CanonicalCheck.CanonicalError> => {
  if (raw === undefined || raw === null) return Result.succeed([])
  if (!Array.isArray(raw)) {
    return CanonicalCheck.fail(`tools must be a list, got ${CanonicalCheck.pythonType(raw)}`, "tools")
  }
  const out: Array<Tool> = []
  for (let index = 0; index < raw.length; index++) {
    const tool: unknown = raw[index]
    if (!CanonicalCheck.isDict(tool)) {
      return CanonicalCheck.fail(
        `tools[${index}] must be a dict, got ${CanonicalCheck.pythonType(tool)}`,
        `tools[${index}]`
      )
    }
    const fn = CanonicalCheck.get(tool, "function")
    if (CanonicalCheck.get(tool, "type") !== "function" || !CanonicalCheck.isDict(fn)) continue
    const description = CanonicalCheck.get(fn, "description")
    out.push({
      type: "function",
      function: {
        name: CanonicalCheck.copyJson(CanonicalCheck.get(fn, "name") ?? null),
        parameters: CanonicalCheck.copyJson(CanonicalCheck.get(fn, "parameters") ?? null),
        ...(description !== undefined && description !== null
          ? { description: CanonicalCheck.copyJson(description) }
          : {})
      }
    })
  }
  return Result.succeed(out)
}

const sortKeysDeep = (value: unknown): Json => {
  if (Array.isArray(value)) return value.map(sortKeysDeep)
  if (CanonicalCheck.isDict(value)) {
    const out: Record<string, Json> = {}
    for (const key of Object.keys(value).sort(PyJson.compareKeys)) out[key] = sortKeysDeep(value[key])
    return out
  }
  return CanonicalCheck.copyJson(value)
}

/** Validate chat-template kwargs (`null`/absent → `{}`) and sort their keys recursively. */
export const normalizeTemplateKwargs = (raw: unknown): Result.Result<TemplateKwargs, CanonicalCheck.CanonicalError> => {
  if (raw === undefined || raw === null) return Result.succeed({})
  if (!CanonicalCheck.isDict(raw)) {
    return CanonicalCheck.fail(
      `chat_template_kwargs must be a dict, got ${CanonicalCheck.pythonType(raw)}`,
      "chat_template_kwargs"
    )
  }
  const sorted = sortKeysDeep(raw)
  return Result.succeed(CanonicalCheck.isDict(sorted) ? (sorted as TemplateKwargs) : {})
}

/** Canonicalize a whole request state: messages, then tools, then template kwargs (first error wins). */
export const canonicalize = (raw: {
  readonly messages: unknown
  readonly tools?: unknown
  readonly chat_template_kwargs?: unknown
}, known?: KnownPrefix | undefined): Result.Result<State, CanonicalCheck.CanonicalError> => {
  const messages = canonicalizeMessages(raw.messages, known)
  if (Result.isFailure(messages)) return Result.fail(messages.failure)
  const tools = normalizeTools(raw.tools)
  if (Result.isFailure(tools)) return Result.fail(tools.failure)
  const kwargs = normalizeTemplateKwargs(raw.chat_template_kwargs)
  if (Result.isFailure(kwargs)) return Result.fail(kwargs.failure)
  return Result.succeed({ messages: messages.success, tools: tools.success, chat_template_kwargs: kwargs.success })
}

/** The message without its `reasoning_content` (what clients that drop reasoning send back). */
export const withoutReasoning = (message: Message): Message => {
  if (message.reasoning_content === undefined) return message
  const { reasoning_content: _dropped, ...rest } = message
  return rest
}
