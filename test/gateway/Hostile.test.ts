/**
 * Hostile and malformed requests against the real gateway (embedded engine, scripted policy), table-driven across the
 * three protocols and both auth headers. Each case asserts the status, the protocol's error shape and a message naming
 * the field; after each one the same Session still completes a normal turn, exports a valid sample, and its forest
 * gained nothing from the refused request. No client input gets a 5xx.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as SupportSessions from "../support/sessions.ts"

/** Small limits, so the limit cases stay small too. */
const maxBodyBytes = 256 * 1024

const stack = GatewayStack.gatewayStack({ maxBodyBytes })

const newSession = SupportSessions.registeredSession({
  sampling: SupportSessions.sampling({ maxNewTokens: 256 }),
  maxContextLen: 4096
})

// ---------------------------------------------------------------------------------------------------------------
// The table

type Protocol = "chat" | "responses" | "messages"
type Body = Record<string, unknown>

interface Case {
  readonly name: string
  readonly protocol: Protocol
  /** The raw body: an object is serialized with JSON.stringify. */
  readonly body: Body | string | Buffer
  readonly status: number
  /** Must appear in the error message (and, for OpenAI shapes, be named by `param` unless `param` says otherwise). */
  readonly field: string
  /** The expected `param` when it is not part of `field` (Responses reports canonicalization errors on `input`). */
  readonly param?: string
  readonly contentType?: string
}

const paths: Record<Protocol, string> = {
  chat: "/v1/chat/completions",
  responses: "/v1/responses",
  messages: "/v1/messages"
}

const valid: Record<Protocol, Body> = {
  chat: { model: "m", messages: [{ role: "user", content: "hi" }] },
  responses: { model: "m", input: "hi" },
  messages: { model: "m", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }
}

const wrongTypes: ReadonlyArray<unknown> = [42, "text", true, [1], { a: 1 }]
const nameOf = (value: unknown) => JSON.stringify(value)

/**
 * 10,000 levels of nesting. JSON.stringify recurses, so the tables hold a placeholder that `serialize` replaces with
 * the nested text: `deepArray` / `deepObject` as JSON values, `deepObjectText` as a JSON string holding the object.
 */
const deepArray = "@@DEEP_ARRAY@@"
const deepObject = "@@DEEP_OBJECT@@"
const deepObjectText = "@@DEEP_OBJECT_TEXT@@"
const nested = (_depth: number, kind: "array" | "object"): string => kind === "array" ? deepArray : deepObject
const deep = 10_000
const deepArrayJson = "[".repeat(deep) + "1" + "]".repeat(deep)
const deepObjectJson = "{\"k\":".repeat(deep) + "1" + "}".repeat(deep)

/** The request body text of a case. */
const serialize = (body: Case["body"]): string | Buffer =>
  typeof body === "string" || Buffer.isBuffer(body)
    ? body
    : JSON.stringify(body)
      .replaceAll(`"${deepArray}"`, deepArrayJson)
      .replaceAll(`"${deepObject}"`, deepObjectJson)
      .replaceAll(`"${deepObjectText}"`, JSON.stringify(deepObjectJson))

const cases: Array<Case> = []
const add = (
  protocol: Protocol,
  name: string,
  body: Case["body"],
  status: number,
  field: string,
  contentType?: string
) => cases.push({ protocol, name, body, status, field, ...(contentType === undefined ? {} : { contentType }) })

for (const protocol of ["chat", "responses", "messages"] as const) {
  const base = valid[protocol]
  const withField = (extra: Body) => ({ ...base, ...extra })
  // Bodies that are not one JSON object.
  add(protocol, "bad JSON", "{\"model\": ", 400, "body")
  add(protocol, "empty body", "", 400, "body")
  add(protocol, "a JSON array", "[1, 2]", 400, "body")
  add(protocol, "JSON null", "null", 400, "body")
  add(protocol, "a JSON string", "\"hello\"", 400, "body")
  add(protocol, "trailing garbage", `${JSON.stringify(base)} trailing`, 400, "body")
  add(protocol, "a raw NUL byte in a string", Buffer.from(`{"model":"m","x":"a\u0000b"}`), 400, "body")
  add(
    protocol,
    "invalid UTF-8",
    Buffer.concat([Buffer.from("{\"model\":\"m\",\"x\":\""), Buffer.from([0xff, 0xfe]), Buffer.from("\"}")]),
    400,
    "UTF-8",
    undefined
  )
  cases[cases.length - 1] = { ...cases[cases.length - 1]!, param: "body" }
  add(protocol, "deep nesting of the body itself", { ...base, extra: nested(deep, "array") }, 400, "extra")
  // `stream` (common to all three).
  for (const value of [1, "yes", [true], { a: 1 }]) {
    add(protocol, `stream ${nameOf(value)}`, withField({ stream: value }), 400, "stream")
  }
}

// Chat Completions: wrong types for every field, illegal values, deep nesting.
{
  const c = (name: string, body: Body, field: string, status = 400) => add("chat", name, body, status, field)
  const base = valid.chat
  for (const value of [42, "text", true, { a: 1 }]) {
    c(`messages ${nameOf(value)}`, { ...base, messages: value }, "messages")
  }
  for (const value of wrongTypes.filter((v) => !Array.isArray(v) && typeof v !== "object")) {
    c(`messages[0] ${nameOf(value)}`, { ...base, messages: [value] }, "messages[0]")
  }
  c("a message without role", { ...base, messages: [{ content: "x" }] }, "messages[0]")
  for (const value of [1, null, ["user"]]) {
    c(`role ${nameOf(value)}`, { ...base, messages: [{ role: value, content: "x" }] }, "messages[0].role")
  }
  for (const role of ["robot", "", "USER", "function"]) {
    c(`role "${role}"`, { ...base, messages: [{ role, content: "x" }] }, "messages[0].role")
  }
  for (const value of [42, true, { a: 1 }]) {
    c(`content ${nameOf(value)}`, { ...base, messages: [{ role: "user", content: value }] }, "messages[0].content")
  }
  c("empty user content", { ...base, messages: [{ role: "user", content: "" }] }, "messages[0].content")
  c("null user content", { ...base, messages: [{ role: "user", content: null }] }, "messages[0].content")
  c("no content", { ...base, messages: [{ role: "user" }] }, "messages[0]")
  c("empty part list", { ...base, messages: [{ role: "user", content: [] }] }, "messages[0].content")
  for (const value of [1, "x", null]) {
    c(
      `content part ${nameOf(value)}`,
      { ...base, messages: [{ role: "user", content: [value] }] },
      "messages[0].content[0]"
    )
  }
  c(
    "empty text part",
    { ...base, messages: [{ role: "user", content: [{ type: "text", text: "" }] }] },
    "messages[0].content[0].text"
  )
  for (
    const url of [
      "file:///etc/passwd",
      "/etc/passwd",
      "./secret.png",
      "~/.ssh/id_rsa",
      "FILE:///etc/shadow",
      "ftp://x/y.png"
    ]
  ) {
    c(
      `image_url ${url}`,
      { ...base, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }] },
      "messages[0].content[0].image_url.url"
    )
  }
  for (const value of [1, "x", null, [1]]) {
    c(`image_url.url ${nameOf(value)}`, {
      ...base,
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: value } }] }]
    }, "messages[0].content[0].image_url.url")
  }
  for (const value of [1, "x", { a: 1 }]) {
    c(
      `tool_calls ${nameOf(value)}`,
      { ...base, messages: [{ role: "assistant", content: "", tool_calls: value }] },
      "messages[0].tool_calls"
    )
  }
  c(
    "tool call not an object",
    { ...base, messages: [{ role: "assistant", content: "", tool_calls: [1] }] },
    "messages[0].tool_calls[0]"
  )
  c("tool call without function", {
    ...base,
    messages: [{ role: "assistant", content: "", tool_calls: [{ id: "a" }] }]
  }, "messages[0].tool_calls[0].function")
  c("tool call empty id", {
    ...base,
    messages: [{ role: "assistant", content: "", tool_calls: [{ id: "", function: { name: "f", arguments: "{}" } }] }]
  }, "messages[0].tool_calls[0].id")
  c("tool call name 5", {
    ...base,
    messages: [{ role: "assistant", content: "", tool_calls: [{ id: "a", function: { name: 5, arguments: "{}" } }] }]
  }, "messages[0].tool_calls[0].function.name")
  for (const args of ["{", "[1]", "1", "{\"a\":1,\"a\":2}", "{\"a\": NaN}", 7, null, [1]]) {
    c(`tool call arguments ${nameOf(args)}`, {
      ...base,
      messages: [{
        role: "assistant",
        content: "",
        tool_calls: [{ id: "a", function: { name: "f", arguments: args } }]
      }]
    }, "messages[0].tool_calls[0].function.arguments")
  }
  c("tool call arguments nested 10,000 levels (string)", {
    ...base,
    messages: [{
      role: "assistant",
      content: "",
      tool_calls: [{ id: "a", function: { name: "f", arguments: deepObjectText } }]
    }]
  }, "messages[0].tool_calls[0].function.arguments")
  c("tool call arguments nested 10,000 levels (object)", {
    ...base,
    messages: [{
      role: "assistant",
      content: "",
      tool_calls: [{ id: "a", function: { name: "f", arguments: nested(deep, "object") } }]
    }]
  }, "messages")
  for (const value of [1, "", []]) {
    c(
      `tool_call_id ${nameOf(value)}`,
      { ...base, messages: [{ role: "tool", tool_call_id: value, content: "x" }] },
      "messages[0].tool_call_id"
    )
  }
  c(
    "reasoning_content 5",
    { ...base, messages: [{ role: "assistant", content: "x", reasoning_content: 5 }] },
    "messages[0].reasoning_content"
  )
  for (const value of [1, "x", { a: 1 }]) c(`tools ${nameOf(value)}`, { ...base, tools: value }, "tools")
  c("a tool that is not an object", { ...base, tools: [1] }, "tools[0]")
  c("tools nested 10,000 levels", {
    ...base,
    tools: [{ type: "function", function: { name: "f", parameters: nested(deep, "object") } }]
  }, "tools")
  for (const value of [1, "x", [1], true]) {
    c(`chat_template_kwargs ${nameOf(value)}`, { ...base, chat_template_kwargs: value }, "chat_template_kwargs")
  }
  for (const key of ["add_generation_prompt", "tokenize", "tools"]) {
    c(`chat_template_kwargs sets ${key}`, { ...base, chat_template_kwargs: { [key]: true } }, "chat_template_kwargs")
  }
  c(
    "chat_template_kwargs nested 10,000 levels",
    { ...base, chat_template_kwargs: { x: nested(deep, "object") } },
    "chat_template_kwargs"
  )
  for (const value of [0, -1, 1.5, "8", true, 1e20]) {
    c(`max_tokens ${nameOf(value)}`, { ...base, max_tokens: value }, "max_tokens")
  }
  for (const value of [0, -3, "8"]) {
    c(`max_completion_tokens ${nameOf(value)}`, { ...base, max_completion_tokens: value }, "max_completion_tokens")
  }
  for (const value of [1, [1], { a: 1 }, ["a", 2]]) c(`stop ${nameOf(value)}`, { ...base, stop: value }, "stop")
  for (const value of ["yes", 1]) c(`logprobs ${nameOf(value)}`, { ...base, logprobs: value }, "logprobs")
  for (const value of ["1", 1.5]) c(`seed ${nameOf(value)}`, { ...base, seed: value }, "seed")
}

// Responses.
{
  const r = (name: string, body: Body, field: string, status = 400) => add("responses", name, body, status, field)
  const base = valid.responses
  for (const value of [42, true, { a: 1 }, null]) r(`input ${nameOf(value)}`, { ...base, input: value }, "input")
  const { input: _input, ...noInput } = base
  r("no input", noInput, "input")
  for (const value of [42, "", [1]]) {
    r(`instructions ${nameOf(value)}`, { ...base, instructions: value }, "instructions")
  }
  for (const value of [42, true]) {
    r(`message content ${nameOf(value)}`, { ...base, input: [{ role: "user", content: value }] }, "input[0].content")
  }
  r(
    "empty input_text",
    { ...base, input: [{ role: "user", content: [{ type: "input_text", text: "" }] }] },
    "input[0].content[0]"
  )
  r(
    "input_text 5",
    { ...base, input: [{ role: "user", content: [{ type: "input_text", text: 5 }] }] },
    "input[0].content[0]"
  )
  for (const url of ["file:///etc/passwd", "/etc/passwd", "../../x.png", "ftp://x/y.png"]) {
    r(
      `input_image ${url}`,
      { ...base, input: [{ role: "user", content: [{ type: "input_image", image_url: url }] }] },
      "input[0].content[0].image_url"
    )
  }
  r(
    "input_image without url",
    { ...base, input: [{ role: "user", content: [{ type: "input_image" }] }] },
    "input[0].content[0].image_url"
  )
  r(
    "function_call without call_id",
    { ...base, input: [{ type: "function_call", name: "f", arguments: "{}" }] },
    "input[0].call_id"
  )
  r(
    "function_call without name",
    { ...base, input: [{ type: "function_call", call_id: "c", arguments: "{}" }] },
    "input[0].name"
  )
  for (const args of [{ a: 1 }, 5, null]) {
    r(`function_call arguments ${nameOf(args)}`, {
      ...base,
      input: [{ type: "function_call", call_id: "c", name: "f", arguments: args }]
    }, "input[0].arguments")
  }
  for (const args of ["{", "[1]", "{\"a\":1,\"a\":2}"]) {
    r(`function_call arguments text ${nameOf(args)}`, {
      ...base,
      input: [{ role: "user", content: "hi" }, { type: "function_call", call_id: "c", name: "f", arguments: args }]
    }, "arguments")
    cases[cases.length - 1] = { ...cases[cases.length - 1]!, param: "input" }
  }
  r("function_call arguments nested 10,000 levels", {
    ...base,
    input: [{ role: "user", content: "hi" }, {
      type: "function_call",
      call_id: "c",
      name: "f",
      arguments: deepObjectText
    }]
  }, "arguments")
  cases[cases.length - 1] = { ...cases[cases.length - 1]!, param: "input" }
  r(
    "function_call_output without call_id",
    { ...base, input: [{ type: "function_call_output", output: "x" }] },
    "input[0].call_id"
  )
  for (const value of [5, [{ type: "image" }], { a: 1 }]) {
    r(`function_call_output output ${nameOf(value)}`, {
      ...base,
      input: [{ type: "function_call_output", call_id: "c", output: value }]
    }, "input[0].output")
  }
  r("assistant item with no text", { ...base, input: [{ role: "assistant", content: [] }] }, "input[0].content")
  for (const value of [1, "x", { a: 1 }]) r(`tools ${nameOf(value)}`, { ...base, tools: value }, "tools")
  r("tool without name", { ...base, tools: [{ type: "function", parameters: {} }] }, "tools")
  r("tool with parameters 5", { ...base, tools: [{ type: "function", name: "f", parameters: 5 }] }, "tools")
  r("tools nested 10,000 levels", {
    ...base,
    tools: [{ type: "function", name: "f", parameters: nested(deep, "object") }]
  }, "tools")
  for (const value of [0, -1, "8", 2.5]) {
    r(`max_output_tokens ${nameOf(value)}`, { ...base, max_output_tokens: value }, "max_output_tokens")
  }
}

// Anthropic Messages.
{
  const m = (name: string, body: Body, field: string, status = 400) => add("messages", name, body, status, field)
  const base = valid.messages
  for (const value of [42, "x", { a: 1 }, null]) {
    m(`messages ${nameOf(value)}`, { ...base, messages: value }, "messages")
  }
  const { max_tokens: _max, ...noMax } = base
  m("no max_tokens", noMax, "max_tokens")
  for (const value of [0, -1, "16", 1.5]) m(`max_tokens ${nameOf(value)}`, { ...base, max_tokens: value }, "max_tokens")
  for (const value of [42, true]) {
    m(`content ${nameOf(value)}`, { ...base, messages: [{ role: "user", content: value }] }, "messages[0].content")
  }
  m("empty block list", { ...base, messages: [{ role: "user", content: [] }] }, "messages[0].content")
  m(
    "empty text block",
    { ...base, messages: [{ role: "user", content: [{ type: "text", text: "" }] }] },
    "messages[0].content[0].text"
  )
  m(
    "image without source",
    { ...base, messages: [{ role: "user", content: [{ type: "image" }] }] },
    "messages[0].content[0].source"
  )
  m("image source type file", {
    ...base,
    messages: [{ role: "user", content: [{ type: "image", source: { type: "file", file_id: "x" } }] }]
  }, "messages[0].content[0].source.type")
  for (const url of ["file:///etc/passwd", "/etc/passwd", "C:\\secret.png"]) {
    m(`image url ${url}`, {
      ...base,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url } }] }]
    }, "messages[0].content[0].source.url")
  }
  m("base64 image with a text media type", {
    ...base,
    messages: [{
      role: "user",
      content: [{ type: "image", source: { type: "base64", media_type: "text/plain", data: "aGk=" } }]
    }]
  }, "messages[0].content[0].source.media_type")
  m("base64 image without data", {
    ...base,
    messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png" } }] }]
  }, "messages[0].content[0].source.data")
  m("tool_result without id", {
    ...base,
    messages: [{ role: "user", content: [{ type: "tool_result", content: "x" }] }]
  }, "messages[0].content[0].tool_use_id")
  m("tool_result content 5", {
    ...base,
    messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: 5 }] }]
  }, "messages[0].content[0].content")
  m("tool_use without id", {
    ...base,
    messages: [{ role: "user", content: "hi" }, {
      role: "assistant",
      content: [{ type: "tool_use", name: "f", input: {} }]
    }]
  }, "messages[1].content[0].id")
  m("tool_use input \"x\"", {
    ...base,
    messages: [{ role: "user", content: "hi" }, {
      role: "assistant",
      content: [{ type: "tool_use", id: "t", name: "f", input: "x" }]
    }]
  }, "messages[1].content[0].input")
  m("tool_use input nested 10,000 levels", {
    ...base,
    messages: [{ role: "user", content: "hi" }, {
      role: "assistant",
      content: [{ type: "tool_use", id: "t", name: "f", input: nested(deep, "object") }]
    }]
  }, "messages")
  m("thinking 5", {
    ...base,
    messages: [{ role: "user", content: "hi" }, { role: "assistant", content: [{ type: "thinking", thinking: 5 }] }]
  }, "messages[1].content[0].thinking")
  for (const value of [5, "", [{ type: "image" }]]) m(`system ${nameOf(value)}`, { ...base, system: value }, "system")
  for (const value of [5, ["a", 1]]) {
    m(`stop_sequences ${nameOf(value)}`, { ...base, stop_sequences: value }, "stop_sequences")
  }
  for (const value of [1, "x"]) m(`tools ${nameOf(value)}`, { ...base, tools: value }, "tools")
  m("tool without input_schema", { ...base, tools: [{ name: "f" }] }, "tools")
  m("tools nested 10,000 levels", { ...base, tools: [{ name: "f", input_schema: nested(deep, "object") }] }, "tools")
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP

interface Reply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

const send = (
  url: string,
  options: { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: string | Buffer }
): Effect.Effect<Reply> =>
  Effect.callback<Reply>((resume) => {
    const req = http.request(url, { method: options.method ?? "POST", headers: options.headers ?? {} }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () =>
        resume(
          Effect.succeed({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8")
          })
        ))
    })
    req.on("error", (error) => resume(Effect.die(error)))
    if (options.body !== undefined) {
      req.write(options.body)
    }
    req.end()
  })

type Auth = "bearer" | "x-api-key"
const auth = (style: Auth, token: string): Record<string, string> =>
  style === "bearer" ? { authorization: `Bearer ${token}` } : { "x-api-key": token }

/** The error message of a reply, after checking the protocol's error shape. */
const errorMessage = (protocol: Protocol, reply: Reply): { readonly message: string; readonly param: unknown } => {
  const body: unknown = JSON.parse(reply.body)
  if (protocol === "messages") {
    expect(body).toMatchObject({ type: "error", error: { type: expect.any(String), message: expect.any(String) } })
    const error = (body as { error: { message: string } }).error
    return { message: error.message, param: undefined }
  }
  expect(body).toMatchObject({
    error: { message: expect.any(String), type: expect.any(String), code: expect.any(String) }
  })
  const error = (body as { error: { message: string; param: unknown } }).error
  expect(error).toHaveProperty("param")
  return { message: error.message, param: error.param }
}

/** A normal Chat turn on the Session, then every leaf exported as a training sample and checked. */
const normalTurn = (baseUrl: string, sessionId: string) =>
  Effect.gen(function*() {
    const reply = yield* send(`${baseUrl}/v1/chat/completions`, {
      headers: { ...auth("bearer", sessionId), "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        messages: [{ role: "user", content: "Please compute 2+2?" }],
        tools: [Policy.calcTool]
      })
    })
    assert.strictEqual(reply.status, 200, reply.body)
    const forest = yield* (yield* Forests.Forests).get(sessionId)
    const tokenizer = yield* Tokenizer.Tokenizer
    for (const leaf of Forest.leaves(forest)) {
      const sample = Sample.build(forest, leaf, (ids) => tokenizer.decode(ids), {
        rolloutId: 0,
        exportName: null,
        reward: 1,
        metadata: {}
      })
      assert.isAbove(sample.response_length, 0)
      assert.strictEqual(sample.loss_mask.length, sample.response_length)
      assert.strictEqual(sample.rollout_log_probs.length, sample.response_length)
      assert.isTrue(sample.tokens.length > sample.response_length)
    }
    return forest.nodeMap.size
  })

const nodeCount = (sessionId: string) =>
  Effect.gen(function*() {
    return (yield* (yield* Forests.Forests).get(sessionId)).nodeMap.size
  })

/** Write raw bytes on a fresh connection; resolve with what came back when the server closes or `wait` ms pass. */
const raw = (port: number, bytes: string | Buffer, options: { readonly destroyAfterWrite?: boolean } = {}) =>
  Effect.callback<string>((resume) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("error", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
    socket.on("close", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
    socket.write(bytes, () => {
      if (options.destroyAfterWrite === true) socket.destroy()
      else socket.end()
    })
  })

const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0)

describe("hostile requests", () => {
  it("the table holds at least 200 requests across the three protocols and both auth headers", () => {
    assert.isAtLeast(cases.length * 2, 200)
    console.log(
      `hostile table: ${cases.length} bodies x 2 auth headers = ${cases.length * 2} requests ` +
        `(chat ${cases.filter((c) => c.protocol === "chat").length}, responses ${
          cases.filter((c) => c.protocol === "responses").length
        }, ` +
        `messages ${cases.filter((c) => c.protocol === "messages").length})`
    )
    for (const protocol of ["chat", "responses", "messages"]) {
      assert.isAtLeast(cases.filter((c) => c.protocol === protocol).length, 30)
    }
  })

  it.layer(stack, { timeout: 120_000 })((it) => {
    it.effect("every malformed body is refused with its protocol's error naming the field; the Session keeps working", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const sessionId = yield* newSession
        let committed = yield* normalTurn(baseUrl, sessionId)
        const failures: Array<string> = []
        for (const c of cases) {
          for (const style of ["bearer", "x-api-key"] as const) {
            const reply = yield* send(`${baseUrl}${paths[c.protocol]}`, {
              headers: { ...auth(style, sessionId), "content-type": c.contentType ?? "application/json" },
              body: serialize(c.body)
            })
            const label = `${c.protocol} ${c.name} (${style})`
            if (reply.status !== c.status) {
              failures.push(`${label}: status ${reply.status}, expected ${c.status}: ${reply.body.slice(0, 300)}`)
            } else {
              const { message, param } = errorMessage(c.protocol, reply)
              if (!message.includes(c.field)) failures.push(`${label}: message does not name ${c.field}: ${message}`)
              const expected = c.param ?? c.field
              if (
                c.protocol !== "messages" &&
                !(typeof param === "string" && (param.startsWith(expected) || expected.startsWith(param)))
              ) {
                failures.push(`${label}: param ${String(param)} does not name ${c.param ?? c.field}`)
              }
              if ((yield* nodeCount(sessionId)) !== committed) failures.push(`${label} changed the committed state`)
            }
            committed = yield* normalTurn(baseUrl, sessionId)
          }
        }
        assert.deepStrictEqual(failures, [], failures.join("\n"))
      }))

    it.effect("limits, methods, paths, content types, foreign and finished Session ids, cut bodies, gone clients", () =>
      Effect.gen(function*() {
        const { baseUrl, port } = yield* Gateway.Gateway
        const sessions = yield* Sessions.Sessions
        const sessionId = yield* newSession
        const other = yield* newSession
        const finished = yield* newSession
        yield* sessions.close(finished)
        yield* normalTurn(baseUrl, sessionId)
        yield* normalTurn(baseUrl, other)
        const json = { "content-type": "application/json" }
        const afterEach = (label: string) =>
          Effect.gen(function*() {
            const before = yield* nodeCount(sessionId)
            const after = yield* normalTurn(baseUrl, sessionId)
            assert.isAtLeast(after, before, `${label}: committed state was lost`)
          })
        const expectError = (label: string, protocol: Protocol, reply: Reply, status: number, text: string) => {
          assert.strictEqual(reply.status, status, `${label}: ${reply.body}`)
          assert.include(errorMessage(protocol, reply).message, text, label)
        }

        for (const style of ["bearer", "x-api-key"] as const) {
          for (const protocol of ["chat", "responses", "messages"] as const) {
            const url = `${baseUrl}${paths[protocol]}`
            const label = `${protocol} (${style})`
            // Oversize bodies: declared, and chunked without a length.
            const big = JSON.stringify({ ...valid[protocol], pad: "x".repeat(maxBodyBytes) })
            expectError(
              `${label} oversize`,
              protocol,
              yield* send(url, { headers: { ...auth(style, sessionId), ...json }, body: big }),
              413,
              "body"
            )
            expectError(
              `${label} oversize chunked`,
              protocol,
              yield* send(url, {
                headers: { ...auth(style, sessionId), ...json, "transfer-encoding": "chunked" },
                body: big
              }),
              413,
              "body"
            )
            yield* afterEach(`${label} oversize`)
            // Content types: the body is read as JSON whatever the header says (as the reference does).
            for (
              const contentType of [
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "text/plain"
              ]
            ) {
              expectError(
                `${label} ${contentType}`,
                protocol,
                yield* send(url, {
                  headers: { ...auth(style, sessionId), "content-type": contentType },
                  body: "a=b&c=d"
                }),
                400,
                "body"
              )
            }
            const asText = yield* send(url, {
              headers: { ...auth(style, sessionId), "content-type": "text/plain" },
              body: JSON.stringify(valid[protocol])
            })
            assert.strictEqual(asText.status, 200, `${label} JSON sent as text/plain`)
            // Methods other than POST on a model route: 405 in the route's shape.
            for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
              const reply = yield* send(url, { method, headers: auth(style, sessionId) })
              expectError(`${label} ${method}`, protocol, reply, 405, "accepts POST only")
              assert.strictEqual(reply.headers["allow"], "POST")
            }
            // A finished Session and an unknown one: 404 session_discarded.
            expectError(
              `${label} finished`,
              protocol,
              yield* send(url, {
                headers: { ...auth(style, finished), ...json },
                body: JSON.stringify(valid[protocol])
              }),
              404,
              "session"
            )
            expectError(
              `${label} unknown`,
              protocol,
              yield* send(url, {
                headers: { ...auth(style, "0".repeat(32)), ...json },
                body: JSON.stringify(valid[protocol])
              }),
              404,
              "session"
            )
            // Another Session's id is that Session's request: it lands there, never here.
            const mine = yield* nodeCount(sessionId)
            const theirs = yield* nodeCount(other)
            const foreign = yield* send(url, {
              headers: { ...auth(style, other), ...json },
              body: JSON.stringify({
                ...valid[protocol],
                ...(protocol === "responses" ? { input: `foreign ${style}` } : {})
              })
            })
            assert.strictEqual(foreign.status, 200)
            assert.strictEqual(yield* nodeCount(sessionId), mine, `${label}: a foreign id changed this Session`)
            assert.isAtLeast(yield* nodeCount(other), theirs)
            yield* afterEach(`${label} foreign`)
          }
          // Unknown paths, inside and outside the mount: 404 with the OpenAI shape.
          for (
            const path of [
              "/agentic_api/v1/completions",
              "/agentic_api/v2/chat/completions",
              "/agentic_api/",
              "/",
              "/v1/chat/completions"
            ]
          ) {
            const origin = baseUrl.slice(0, baseUrl.indexOf("/agentic_api"))
            expectError(
              `${path} (${style})`,
              "chat",
              yield* send(`${origin}${path}`, { headers: { ...auth(style, sessionId), ...json }, body: "{}" }),
              404,
              "No route"
            )
          }
        }

        // Header limits: a header block over 16 KiB is Node's 431, before any handler runs.
        const hugeHeader = yield* raw(
          port,
          `POST /agentic_api/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${sessionId}\r\n` +
            `X-Pad: ${"a".repeat(32 * 1024)}\r\nContent-Length: 2\r\n\r\n{}`
        )
        assert.strictEqual(statusOf(hugeHeader), 431)
        yield* afterEach("huge header")

        // A body cut short: the declared length never arrives and the client half-closes; then one that vanishes.
        const head = (length: number) =>
          `POST /agentic_api/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${sessionId}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`
        const partial = JSON.stringify(valid.chat).slice(0, 20)
        const cut = yield* raw(port, head(200) + partial)
        const cutStatus = statusOf(cut)
        assert.isTrue(cutStatus === 0 || (cutStatus >= 400 && cutStatus < 500), `cut body: ${cut}`)
        // Node's HTTP parser answers this one itself (a bare 400: the request never reached a handler).
        yield* afterEach("cut body")
        yield* raw(port, head(200) + partial, { destroyAfterWrite: true })
        yield* afterEach("client gone mid-body")
        // Chunked, cut inside a chunk.
        yield* raw(
          port,
          `POST /agentic_api/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${sessionId}\r\n` +
            `Transfer-Encoding: chunked\r\n\r\n40\r\n${partial}`,
          { destroyAfterWrite: true }
        )
        yield* afterEach("client gone mid-chunk")

        // A client gone mid-stream: the generation still completes and is committed.
        const before = yield* nodeCount(sessionId)
        yield* raw(
          port,
          head(
            Buffer.byteLength(
              JSON.stringify({ ...valid.chat, stream: true, messages: [{ role: "user", content: "streamed" }] })
            )
          ) +
            JSON.stringify({ ...valid.chat, stream: true, messages: [{ role: "user", content: "streamed" }] }),
          { destroyAfterWrite: true }
        )
        // Let the event loop run (no clock involved) until the gateway-owned generation has committed.
        for (let i = 0; i < 100_000 && (yield* nodeCount(sessionId)) === before; i++) {
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        }
        assert.isAbove(yield* nodeCount(sessionId), before, "the streamed generation was committed")
        yield* afterEach("client gone mid-stream")
      }))
  })
})

describe("the bind address", () => {
  it("only loopback addresses count as loopback (any other bind logs a warning)", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "::ffff:127.0.0.1"]) {
      assert.isTrue(Gateway.isLoopback(host), host)
    }
    for (
      const host of [
        "0.0.0.0",
        "::",
        "192.168.1.5",
        "10.0.0.1",
        "example.com",
        "127.0.0.1.example.com",
        "::ffff:10.0.0.1"
      ]
    ) {
      assert.isFalse(Gateway.isLoopback(host), host)
    }
  })
})
