import Anthropic from "@anthropic-ai/sdk"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as FakeModelApi from "../support/fakeModelApi.ts"
import * as Results from "../support/results.ts"
import * as SseParser from "./sseParser.ts"

const ok = Results.success
const err = Results.rejection
const base = { model: "qwen", max_tokens: 64 }
const messagesOf = (body: Record<string, unknown>) => ok(Messages.decode({ ...base, ...body })).state.messages

const completion: Completion.Completion = {
  id: "beef02",
  created: 1_700_000_200,
  reasoning: "Add them.",
  content: "It is 5.",
  toolCalls: [{ id: "toolu_1", name: "calc", arguments: "{\"e\":\"2+3\",\"n\":{\"k\":[1,2]}}" }],
  finish: "tool_calls",
  usage: { promptTokens: 40, completionTokens: 11, cachedTokens: 16 }
}

describe("Messages decode: the projection table", () => {
  it("projects system as a string or text blocks to the system message", () => {
    assert.deepStrictEqual(messagesOf({ system: "Be brief.", messages: [{ role: "user", content: "Hi" }] }), [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi" }
    ])
    assert.deepStrictEqual(
      messagesOf({
        system: [{ type: "text", text: "A", cache_control: { type: "ephemeral" } }, { type: "text", text: "B" }],
        messages: [{ role: "user", content: "Hi" }]
      })[0],
      { role: "system", content: "A\n\nB" }
    )
  })

  it("projects user and assistant text (strings or text blocks) to message text", () => {
    assert.deepStrictEqual(
      messagesOf({
        messages: [
          { role: "user", content: [{ type: "text", text: "Hello " }, { type: "text", text: "there" }] },
          { role: "assistant", content: [{ type: "text", text: "Hi" }, { type: "text", text: "!" }] },
          { role: "user", content: "Q" }
        ]
      }),
      [
        { role: "user", content: "Hello there" },
        { role: "assistant", content: "Hi!" },
        { role: "user", content: "Q" }
      ]
    )
  })

  it("projects user images with a URL or base64 source to image_url content (base64 as a data URI)", () => {
    assert.deepStrictEqual(
      messagesOf({
        messages: [{
          role: "user",
          content: [
            { type: "image", source: { type: "url", url: "https://example.com/cat.png" } },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
            { type: "text", text: "Same cat?" }
          ]
        }]
      }),
      [{
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          { type: "text", text: "Same cat?" }
        ]
      }]
    )
  })

  it("projects assistant thinking to reasoning_content, dropping empty and redacted thinking", () => {
    assert.deepStrictEqual(
      messagesOf({
        messages: [
          { role: "user", content: "Q" },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "T1", signature: "sig" },
              { type: "redacted_thinking", data: "xxx" },
              { type: "thinking", thinking: "", signature: "sig" },
              { type: "thinking", thinking: "T2", signature: "sig" },
              { type: "text", text: "A" }
            ]
          }
        ]
      })[1],
      { role: "assistant", content: "A", reasoning_content: "T1\n\nT2" }
    )
  })

  it("projects tool_use and tool_result with the same id, splitting user text after results", () => {
    assert.deepStrictEqual(
      messagesOf({
        messages: [
          { role: "user", content: "Q" },
          {
            role: "assistant",
            content: [
              { type: "tool_use", id: "toolu_1", name: "calc", input: { e: "2+3", a: 1 } },
              { type: "tool_use", id: "toolu_2", name: "calc", input: {} }
            ]
          },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "toolu_1", content: "5" },
              {
                type: "tool_result",
                tool_use_id: "toolu_2",
                content: [{ type: "text", text: "1" }, { type: "text", text: "6" }],
                is_error: false
              },
              { type: "tool_result", tool_use_id: "toolu_3" },
              { type: "text", text: "Now sum them." }
            ]
          }
        ]
      }),
      [
        { role: "user", content: "Q" },
        {
          role: "assistant",
          content: "",
          tool_calls: [
            { id: "toolu_1", type: "function", function: { name: "calc", arguments: "{\"a\":1,\"e\":\"2+3\"}" } },
            { id: "toolu_2", type: "function", function: { name: "calc", arguments: "{}" } }
          ]
        },
        { role: "tool", content: "5", tool_call_id: "toolu_1" },
        { role: "tool", content: "16", tool_call_id: "toolu_2" },
        { role: "tool", content: "", tool_call_id: "toolu_3" },
        { role: "user", content: "Now sum them." }
      ]
    )
  })

  it("keeps only user and assistant roles", () => {
    assert.deepStrictEqual(
      messagesOf({ messages: [{ role: "system", content: "x" }, 3, { role: "user", content: "Q" }] }),
      [
        { role: "user", content: "Q" }
      ]
    )
  })

  it("projects custom and untyped tools, max_tokens, stop_sequences and thinking", () => {
    const req = ok(Messages.decode({
      ...base,
      messages: [{ role: "user", content: "Q" }],
      tools: [
        { name: "calc", description: "Evaluate.", input_schema: { type: "object" } },
        { type: "custom", name: "look", input_schema: { type: "object", properties: {} } },
        { type: "web_search_20250305", name: "web_search" }
      ],
      stop_sequences: ["</answer>"],
      thinking: { type: "enabled", budget_tokens: 1024 },
      temperature: 0.2,
      top_k: 3,
      stream: true
    }))
    assert.deepStrictEqual(req.state.tools, [
      { type: "function", function: { name: "calc", parameters: { type: "object" }, description: "Evaluate." } },
      { type: "function", function: { name: "look", parameters: { type: "object", properties: {} } } }
    ])
    assert.strictEqual(req.maxTokens, 64)
    assert.deepStrictEqual(req.stop, ["</answer>"])
    assert.deepStrictEqual(req.state.chat_template_kwargs, { enable_thinking: true })
    assert.isTrue(req.stream)
    assert.strictEqual(req.model, "qwen")
    assert.isFalse(req.logprobs)
    const disabled = ok(
      Messages.decode({ ...base, messages: [{ role: "user", content: "Q" }], thinking: { type: "disabled" } })
    )
    assert.deepStrictEqual(disabled.state.chat_template_kwargs, { enable_thinking: false })
    assert.deepStrictEqual(
      ok(Messages.decode({ ...base, messages: [{ role: "user", content: "Q" }] })).state.chat_template_kwargs,
      {}
    )
  })
})

describe("Messages decode: errors", () => {
  it("rejects each malformed field with the reference text and its param", () => {
    const q = [{ role: "user", content: "Q" }]
    const asst = (content: unknown) => [...q, { role: "assistant", content }]
    const usr = (content: unknown) => [{ role: "user", content }]
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string, string]> = [
      [{ system: "", messages: q }, "system", "system must not be empty"],
      [{ system: 5, messages: q }, "system", "system must be a string or text block list"],
      [{ system: [{ type: "image" }], messages: q }, "system", "system must be a string or text block list"],
      [{ system: [{ type: "text", text: "" }], messages: q }, "system[0].text", "system[0].text must be non-empty"],
      [{}, "messages", "messages is required and must be a list"],
      [{ messages: { role: "user" } }, "messages", "messages is required and must be a list"],
      [{ messages: usr(5) }, "messages[0].content", "messages[0].content must be a string or list"],
      [
        { messages: asst([{ type: "text", text: "" }]) },
        "messages[1].content[0].text",
        "messages[1].content[0].text must be non-empty"
      ],
      [
        { messages: asst([{ type: "thinking", thinking: 3 }]) },
        "messages[1].content[0].thinking",
        "messages[1].content[0].thinking must be a string"
      ],
      [
        { messages: asst([{ type: "tool_use", id: "", name: "f", input: {} }]) },
        "messages[1].content[0].id",
        "messages[1].content[0].id must be a non-empty string"
      ],
      [
        { messages: asst([{ type: "tool_use", id: "t", name: "", input: {} }]) },
        "messages[1].content[0].name",
        "messages[1].content[0].name must be a non-empty string"
      ],
      [
        { messages: asst([{ type: "tool_use", id: "t", name: "f", input: "{}" }]) },
        "messages[1].content[0].input",
        "messages[1].content[0].input must be a JSON object"
      ],
      [
        { messages: usr([{ type: "text", text: "" }]) },
        "messages[0].content[0].text",
        "messages[0].content[0].text must be non-empty"
      ],
      [
        { messages: usr([{ type: "image", source: { type: "file", file_id: "f" } }]) },
        "messages[0].content[0].source.type",
        "messages[0].content[0].source.type is not supported"
      ],
      [
        { messages: usr([{ type: "image", source: { type: "base64", media_type: "text/plain", data: "AA" } }]) },
        "messages[0].content[0].source.media_type",
        "messages[0].content[0].source.media_type must be an image media type (image/...)"
      ],
      [
        { messages: usr([{ type: "image", source: { type: "base64", media_type: "image/png", data: "" } }]) },
        "messages[0].content[0].source.data",
        "messages[0].content[0].source.data must be a non-empty string"
      ],
      [
        { messages: usr([{ type: "image", source: { type: "url", url: "" } }]) },
        "messages[0].content[0].source.url",
        "messages[0].content[0].source.url must be a non-empty string"
      ],
      [
        { messages: usr([{ type: "image" }]) },
        "messages[0].content[0].source",
        "messages[0].content[0].source must be an object"
      ],
      [
        { messages: usr([{ type: "tool_result", tool_use_id: "" }]) },
        "messages[0].content[0].tool_use_id",
        "messages[0].content[0].tool_use_id must be a non-empty string"
      ],
      [
        { messages: usr([{ type: "tool_result", tool_use_id: "t", content: [{ type: "image" }] }]) },
        "messages[0].content[0].content",
        "messages[0].content[0].content must be a string or text block list"
      ],
      [
        { messages: usr([{ type: "document" }]) },
        "messages[0].content",
        "messages[0].content projected to no supported content"
      ],
      [{ messages: usr([]) }, "messages[0].content", "messages[0].content projected to no supported content"],
      [{ messages: q, max_tokens: undefined }, "max_tokens", "max_tokens is required"],
      [{ messages: q, max_tokens: 0 }, "max_tokens", "max_tokens must be a positive integer"],
      [{ messages: q, stop_sequences: "END" }, "stop_sequences", "stop_sequences must be a list of strings"],
      [{ messages: q, tools: {} }, "tools", "tools must be a list"],
      [{ messages: q, tools: [{ input_schema: {} }] }, "tools[0].name", "tools.name must be a non-empty string"],
      [{ messages: q, tools: [{ name: "f" }] }, "tools[0].input_schema", "tools.input_schema must be a JSON object"],
      [{ messages: [] }, "messages", "messages projected to zero supported messages"]
    ]
    for (const [body, param, message] of cases) {
      assert.deepStrictEqual(err(Messages.decode({ ...base, ...body })), { param, message })
    }
  })

  it("reports canonicalization errors on messages", () => {
    assert.deepStrictEqual(err(Messages.decode({ ...base, system: "S", messages: [{ role: "user", content: "" }] })), {
      param: "messages",
      message: "messages[1].content must not be empty"
    })
  })
})

const request = (extra: Record<string, unknown> = {}) =>
  ok(Messages.decode({ ...base, messages: [{ role: "user", content: "Q" }], ...extra }))

describe("Messages JSON render", () => {
  it("renders thinking (with a signature), text and tool_use blocks with Anthropic usage", () => {
    const body = Messages.renderJson(completion, request())
    assert.isTrue(Schema.is(Messages.Message)(body))
    assert.deepStrictEqual(body, {
      id: "msg_beef02",
      type: "message",
      role: "assistant",
      model: "qwen",
      content: [
        { type: "thinking", thinking: "Add them.", signature: "sig_beef02" },
        { type: "text", text: "It is 5." },
        { type: "tool_use", id: "toolu_1", name: "calc", input: { e: "2+3", n: { k: [1, 2] } } }
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 24, output_tokens: 11, cache_read_input_tokens: 16, cache_creation_input_tokens: null }
    })
  })

  it("maps finish reasons to end_turn, max_tokens, tool_use and stop_sequence", () => {
    const plain = { ...completion, toolCalls: [] }
    const render = (c: Completion.Completion) => {
      const body = Messages.renderJson(c, request())
      return [body.stop_reason, body.stop_sequence]
    }
    assert.deepStrictEqual(render({ ...plain, finish: "stop" }), ["end_turn", null])
    assert.deepStrictEqual(render({ ...plain, finish: "abort" }), ["end_turn", null])
    assert.deepStrictEqual(render({ ...plain, finish: "length" }), ["max_tokens", null])
    assert.deepStrictEqual(render(completion), ["tool_use", null])
    assert.deepStrictEqual(render({ ...plain, finish: "stop", stopSequence: "</answer>" }), [
      "stop_sequence",
      "</answer>"
    ])
  })

  it("leaves out an empty text block when thinking or tool use carry the turn", () => {
    const body = Messages.renderJson({ ...completion, content: "" }, request())
    assert.deepStrictEqual(body.content.map((b) => b.type), ["thinking", "tool_use"])
  })

  it("replays its own content blocks as history to the same canonical assistant turn", () => {
    const content = Messages.renderJson(completion, request()).content
    const messages = messagesOf({
      messages: [
        { role: "user", content: "Q" },
        { role: "assistant", content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "5" }] }
      ]
    })
    assert.deepStrictEqual(messages[1], {
      role: "assistant",
      content: "It is 5.",
      reasoning_content: "Add them.",
      tool_calls: [
        {
          id: "toolu_1",
          type: "function",
          function: { name: "calc", arguments: "{\"e\":\"2+3\",\"n\":{\"k\":[1,2]}}" }
        }
      ]
    })
  })
})

describe("Messages Buffered SSE", () => {
  it("emits message_start, complete content-block events, message_delta and message_stop", () => {
    const parsed = SseParser.parseSse(Sse.encodeAll(Messages.renderSse(completion, request({ stream: true }))))
    const events = SseParser.payloads(parsed) as ReadonlyArray<Record<string, unknown>>
    assert.deepStrictEqual(parsed.events.map((e) => e.event), events.map((e) => e["type"]))
    assert.deepStrictEqual(events, [
      {
        type: "message_start",
        message: {
          id: "msg_beef02",
          type: "message",
          role: "assistant",
          model: "qwen",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 24, output_tokens: 0, cache_read_input_tokens: 16, cache_creation_input_tokens: null }
        }
      },
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Add them." } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "sig_beef02" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "It is 5." } },
      { type: "content_block_stop", index: 1 },
      {
        type: "content_block_start",
        index: 2,
        content_block: { type: "tool_use", id: "toolu_1", name: "calc", input: {} }
      },
      {
        type: "content_block_delta",
        index: 2,
        delta: { type: "input_json_delta", partial_json: "{\"e\":\"2+3\",\"n\":{\"k\":[1,2]}}" }
      },
      { type: "content_block_stop", index: 2 },
      { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 11 } },
      { type: "message_stop" }
    ])
  })

  it("reports a failure as one event: error with the Anthropic error body", () => {
    const parsed = SseParser.parseSse(
      Sse.encodeAll(Messages.renderSseError(ProtocolError.GatewayError.internal("chat")))
    )
    assert.deepStrictEqual(parsed.events, [{
      event: "error",
      data: JSON.stringify({
        type: "error",
        error: { type: "api_error", message: "Internal error while handling agentic chat request." }
      })
    }])
  })
})

describe("Messages with the @anthropic-ai/sdk", () => {
  const sdk = FakeModelApi.anthropic
  const serve = (c: Completion.Completion) => FakeModelApi.serve(Messages.adapter, c)
  const params = {
    model: "qwen",
    max_tokens: 64,
    messages: [{ role: "user" as const, content: "Q" }],
    tools: [{ name: "calc", input_schema: { type: "object" as const, properties: {} } }]
  }

  it.effect("messages.stream accumulates the buffered events into the same message as the JSON body", () =>
    Effect.gen(function*() {
      const { client } = sdk(serve(completion))
      const result = yield* Effect.promise(async () => {
        const stream = client.messages.stream(params)
        const texts: Array<string> = []
        stream.on("text", (delta) => texts.push(delta))
        return { final: await stream.finalMessage(), texts }
      })
      assert.deepStrictEqual(result.texts, ["It is 5."])
      // The helper adds its own `parsed_output` (structured-output parsing); everything else is the accumulated message.
      const { parsed_output: _parsed, ...final } = result.final as typeof result.final & { parsed_output?: unknown }
      assert.deepStrictEqual(JSON.parse(JSON.stringify(final)), Messages.renderJson(completion, request()))
    }))

  it.effect("the JSON body parses in the SDK and the SDK's request decodes with its options", () =>
    Effect.gen(function*() {
      const { client, requests } = sdk(
        serve({ ...completion, toolCalls: [], finish: "stop", stopSequence: "END" }),
        "application/json"
      )
      const body = yield* Effect.promise(() =>
        client.messages.create({
          ...params,
          system: "Be brief.",
          stop_sequences: ["END"],
          thinking: { type: "enabled", budget_tokens: 32 }
        })
      )
      assert.strictEqual(body.stop_reason, "stop_sequence")
      assert.strictEqual(body.stop_sequence, "END")
      const req = ok(Messages.decode(requests[0]))
      assert.deepStrictEqual(req.stop, ["END"])
      assert.deepStrictEqual(req.state.chat_template_kwargs, { enable_thinking: true })
      assert.deepStrictEqual(req.state.messages, [{ role: "system", content: "Be brief." }, {
        role: "user",
        content: "Q"
      }])
    }))

  it.effect("an error event after the stream opened surfaces as an APIError with the message", () =>
    Effect.gen(function*() {
      const { client } = sdk(() =>
        Sse.encodeAll([
          Sse.connected("messages"),
          ...Messages.renderSseError(ProtocolError.GatewayError.internal("chat"))
        ])
      )
      const error = yield* Effect.promise(() =>
        client.messages.stream(params).finalMessage().then(() => undefined, (e: unknown) => e)
      )
      assert.instanceOf(error, Anthropic.APIError)
      assert.include(String((error as Error).message), "Internal error while handling agentic chat request.")
    }))

  it.effect("ping frames before the terminal sequence are ignored by the SDK", () =>
    Effect.gen(function*() {
      const { client } = sdk((body) =>
        Sse.encodeAll([
          Sse.connected("messages"),
          Sse.heartbeat("messages"),
          ...Messages.renderSse(completion, ok(Messages.decode(body)))
        ])
      )
      const final = yield* Effect.promise(() => client.messages.stream(params).finalMessage())
      assert.strictEqual(final.stop_reason, "tool_use")
      assert.deepStrictEqual(final.content.map((b) => b.type), ["thinking", "text", "tool_use"])
    }))
})
