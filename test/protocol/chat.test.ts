import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import OpenAI from "openai"
import * as Chat from "../../src/protocol/Chat.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as FakeModelApi from "../support/fakeModelApi.ts"
import * as Results from "../support/results.ts"
import * as SseParser from "./sseParser.ts"

const ok = Results.success
const err = Results.rejection

const user = { role: "user", content: "What is 2+3?" }
const tool = {
  type: "function" as const,
  function: {
    name: "calc",
    description: "Evaluate.",
    parameters: { type: "object", properties: { e: { type: "string" } } }
  }
}

const completion: Completion.Completion = {
  id: "0123abcd",
  created: 1_700_000_000,
  reasoning: "Add them.",
  content: "It is 5.",
  toolCalls: [],
  finish: "stop",
  usage: { promptTokens: 20, completionTokens: 7, cachedTokens: 4 },
  logprobs: [{ token: "It", logprob: -0.5 }, { token: " é", logprob: -1.25, bytes: [32, 195, 169] }]
}
const { reasoning: _reasoning, ...withoutReasoning } = completion
const toolsOnly: Completion.Completion = {
  ...withoutReasoning,
  content: "",
  toolCalls: [
    { id: "call_a", name: "calc", arguments: "{\"e\":\"2+3\"}" },
    { id: "call_b", name: "calc", arguments: "{\"e\":\"4*4\"}" }
  ],
  finish: "tool_calls"
}

describe("Chat Completions decode", () => {
  it("passes messages, tools and chat_template_kwargs to the canonical state", () => {
    const req = ok(Chat.decode({
      model: "m",
      messages: [{ role: "system", content: "Be brief." }, user],
      tools: [tool],
      chat_template_kwargs: { enable_thinking: false, b: { z: 1, a: 2 } }
    }))
    assert.deepStrictEqual(req.state, {
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "What is 2+3?" }],
      tools: [tool],
      chat_template_kwargs: { b: { a: 2, z: 1 }, enable_thinking: false }
    })
    assert.deepStrictEqual(Object.keys(req.state.chat_template_kwargs), ["b", "enable_thinking"])
  })

  it("lets max_completion_tokens win over the legacy max_tokens", () => {
    assert.strictEqual(ok(Chat.decode({ messages: [user], max_completion_tokens: 64, max_tokens: 8 })).maxTokens, 64)
    assert.strictEqual(ok(Chat.decode({ messages: [user], max_tokens: 8 })).maxTokens, 8)
    assert.isUndefined(ok(Chat.decode({ messages: [user] })).maxTokens)
    assert.isUndefined(ok(Chat.decode({ messages: [user], max_tokens: null })).maxTokens)
  })

  it("takes stop as a string or a list, and seed and logprobs as given", () => {
    assert.deepStrictEqual(ok(Chat.decode({ messages: [user], stop: "END" })).stop, ["END"])
    assert.deepStrictEqual(ok(Chat.decode({ messages: [user], stop: ["a", "b"] })).stop, ["a", "b"])
    assert.deepStrictEqual(ok(Chat.decode({ messages: [user] })).stop, [])
    const req = ok(Chat.decode({ messages: [user], seed: 7, logprobs: true, top_logprobs: 3 }))
    assert.strictEqual(req.seed, 7)
    assert.isTrue(req.logprobs)
    assert.strictEqual(req.topLogprobs, 3)
    assert.isFalse(ok(Chat.decode({ messages: [user], logprobs: null })).logprobs)
  })

  it("echoes model, reads stream, and ignores temperature and top_p", () => {
    const plain = ok(Chat.decode({ model: "qwen", messages: [user] }))
    const sampled = ok(
      Chat.decode({ model: "qwen", messages: [user], temperature: 0.1, top_p: 0.2, n: 3, stream: true })
    )
    assert.strictEqual(sampled.model, "qwen")
    assert.isFalse(plain.stream)
    assert.isTrue(sampled.stream)
    assert.deepStrictEqual(sampled.state, plain.state)
    assert.strictEqual(ok(Chat.decode({ messages: [user] })).model, "")
  })

  it("rejects reserved chat_template_kwargs keys, sorted and comma separated", () => {
    assert.deepStrictEqual(
      err(Chat.decode({ messages: [user], chat_template_kwargs: { tools: [], add_generation_prompt: true } })),
      {
        param: "chat_template_kwargs",
        message: "chat_template_kwargs cannot set reserved keys: add_generation_prompt, tools"
      }
    )
    assert.deepStrictEqual(err(Chat.decode({ messages: [user], chat_template_kwargs: { tokenize: false } })), {
      param: "chat_template_kwargs",
      message: "chat_template_kwargs cannot set reserved keys: tokenize"
    })
  })

  it("rejects malformed turn options with the field as param", () => {
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string, string]> = [
      [{ logprobs: "yes" }, "logprobs", "logprobs must be a boolean"],
      [{ max_completion_tokens: 0 }, "max_completion_tokens", "max_completion_tokens must be a positive integer"],
      [{ max_completion_tokens: 1.5 }, "max_completion_tokens", "max_completion_tokens must be a positive integer"],
      [{ max_completion_tokens: true }, "max_completion_tokens", "max_completion_tokens must be a positive integer"],
      [{ max_tokens: "5" }, "max_tokens", "max_tokens must be a positive integer"],
      [{ max_tokens: -3 }, "max_tokens", "max_tokens must be a positive integer"],
      [{ stop: 5 }, "stop", "stop must be a string or list of strings"],
      [{ stop: ["a", 1] }, "stop", "stop must be a string or list of strings"],
      [{ seed: "x" }, "seed", "seed must be an integer"],
      [{ stream: "yes" }, "stream", "stream must be a boolean"]
    ]
    for (const [extra, param, message] of cases) {
      assert.deepStrictEqual(err(Chat.decode({ messages: [user], ...extra })), { param, message })
    }
  })

  it("rejects a body that is not an object, and a history that projects to nothing", () => {
    assert.deepStrictEqual(err(Chat.decode([1])), { param: "body", message: "request body must be a JSON object" })
    assert.deepStrictEqual(err(Chat.decode({ messages: [] })), {
      param: "messages",
      message: "messages projected to zero supported messages"
    })
    assert.deepStrictEqual(err(Chat.decode({})), {
      param: "messages",
      message: "messages projected to zero supported messages"
    })
  })

  it("reports canonicalization errors with their text and field path", () => {
    const developer = err(Chat.decode({ messages: [{ role: "developer", content: "x" }] }))
    assert.strictEqual(developer.message, "messages[0].role must be one of: assistant, system, tool, user")
    assert.strictEqual(developer.param, "messages[0].role")
    const empty = err(Chat.decode({ messages: [user, { role: "user", content: "" }] }))
    assert.deepStrictEqual(empty, { param: "messages[1].content", message: "messages[1].content must not be empty" })
    const kwargs = err(Chat.decode({ messages: [user], chat_template_kwargs: [1] }))
    assert.include(kwargs.message, "chat_template_kwargs must be a dict")
    assert.strictEqual(kwargs.param, "chat_template_kwargs")
  })

  it("accepts back the assistant message it rendered as the same canonical assistant turn", () => {
    const history = (c: Completion.Completion) =>
      ok(Chat.decode({ messages: [user, Chat.message(c)] })).state.messages[1]
    assert.deepStrictEqual(history(completion), {
      role: "assistant",
      content: "It is 5.",
      reasoning_content: "Add them."
    })
    assert.deepStrictEqual(history(toolsOnly), {
      role: "assistant",
      content: "",
      tool_calls: [
        { id: "call_a", type: "function", function: { name: "calc", arguments: "{\"e\":\"2+3\"}" } },
        { id: "call_b", type: "function", function: { name: "calc", arguments: "{\"e\":\"4*4\"}" } }
      ]
    })
  })
})

const request = (extra: Record<string, unknown> = {}) => ok(Chat.decode({ model: "qwen", messages: [user], ...extra }))

describe("Chat Completions JSON render", () => {
  it("renders a chat.completion with content, reasoning_content, usage and the echoed model", () => {
    const body = Chat.renderJson(completion, request())
    assert.isTrue(Schema.is(Chat.ChatCompletion)(body))
    assert.deepStrictEqual(body, {
      id: "chatcmpl_0123abcd",
      object: "chat.completion",
      created: 1_700_000_000,
      model: "qwen",
      choices: [{
        index: 0,
        message: { role: "assistant", content: "It is 5.", reasoning_content: "Add them." },
        logprobs: null,
        finish_reason: "stop"
      }],
      usage: { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27, prompt_tokens_details: { cached_tokens: 4 } }
    })
  })

  it("renders tool calls with finish_reason tool_calls", () => {
    const body = Chat.renderJson(toolsOnly, request())
    assert.strictEqual(body.choices[0]?.finish_reason, "tool_calls")
    assert.deepStrictEqual(body.choices[0]?.message, {
      role: "assistant",
      content: "",
      tool_calls: [
        { id: "call_a", type: "function", function: { name: "calc", arguments: "{\"e\":\"2+3\"}" } },
        { id: "call_b", type: "function", function: { name: "calc", arguments: "{\"e\":\"4*4\"}" } }
      ]
    })
  })

  it("renders length as length, and an aborted turn as stop (or tool_calls when it called tools)", () => {
    assert.strictEqual(
      Chat.renderJson({ ...completion, finish: "length" }, request()).choices[0]?.finish_reason,
      "length"
    )
    assert.strictEqual(Chat.renderJson({ ...completion, finish: "abort" }, request()).choices[0]?.finish_reason, "stop")
    assert.strictEqual(
      Chat.renderJson({ ...toolsOnly, finish: "abort" }, request()).choices[0]?.finish_reason,
      "tool_calls"
    )
  })

  it("renders choices[].logprobs.content only when logprobs were requested", () => {
    const body = Chat.renderJson(completion, request({ logprobs: true }))
    assert.deepStrictEqual(body.choices[0]?.logprobs, {
      content: [
        { token: "It", logprob: -0.5, bytes: [73, 116], top_logprobs: [] },
        { token: " é", logprob: -1.25, bytes: [32, 195, 169], top_logprobs: [] }
      ]
    })
    assert.isNull(Chat.renderJson(completion, request({ logprobs: false })).choices[0]?.logprobs)
  })
})

describe("Chat Completions Buffered SSE", () => {
  it("emits one complete chat.completion.chunk with usage, then [DONE]", () => {
    const parsed = SseParser.parseSse(
      Sse.encodeAll(Chat.renderSse(toolsOnly, request({ stream: true, logprobs: true })))
    )
    const [chunk, done] = SseParser.payloads(parsed)
    assert.strictEqual(parsed.events.length, 2)
    assert.strictEqual(done, "[DONE]")
    assert.isTrue(Schema.is(Chat.ChatCompletionChunk)(chunk))
    assert.deepStrictEqual(chunk, {
      id: "chatcmpl_0123abcd",
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model: "qwen",
      choices: [{
        index: 0,
        delta: {
          role: "assistant",
          content: "",
          tool_calls: [
            { index: 0, id: "call_a", type: "function", function: { name: "calc", arguments: "{\"e\":\"2+3\"}" } },
            { index: 1, id: "call_b", type: "function", function: { name: "calc", arguments: "{\"e\":\"4*4\"}" } }
          ]
        },
        logprobs: {
          content: [
            { token: "It", logprob: -0.5, bytes: [73, 116], top_logprobs: [] },
            { token: " é", logprob: -1.25, bytes: [32, 195, 169], top_logprobs: [] }
          ]
        },
        finish_reason: "tool_calls"
      }],
      usage: { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27, prompt_tokens_details: { cached_tokens: 4 } }
    })
  })

  it("reports a failure as OpenAI error data, then [DONE]", () => {
    const parsed = SseParser.parseSse(Sse.encodeAll(Chat.renderSseError(ProtocolError.GatewayError.internal("chat"))))
    assert.deepStrictEqual(SseParser.payloads(parsed), [
      {
        error: {
          message: "Internal error while handling agentic chat request.",
          type: "internal_error",
          param: null,
          code: "internal_error"
        }
      },
      "[DONE]"
    ])
  })
})

describe("Chat Completions with the openai SDK", () => {
  const sdk = FakeModelApi.openAi
  const serve = (c: Completion.Completion) => FakeModelApi.serve(Chat.adapter, c)

  it.effect("chat.completions.stream accumulates the buffered chunk into the final completion", () =>
    Effect.gen(function*() {
      const { client } = sdk(serve({ ...completion, toolCalls: toolsOnly.toolCalls, finish: "tool_calls" }))
      const final = yield* Effect.promise(() =>
        client.chat.completions.stream({ model: "qwen", messages: [{ role: "user", content: "What is 2+3?" }] })
          .finalChatCompletion()
      )
      const choice = final.choices[0]
      assert.strictEqual(choice?.finish_reason, "tool_calls")
      assert.strictEqual(choice?.message.content, "It is 5.")
      assert.strictEqual((choice!.message as unknown as { reasoning_content: string }).reasoning_content, "Add them.")
      assert.deepStrictEqual(
        choice?.message.tool_calls?.map((t) =>
          t.type === "function" ? [t.id, t.function.name, t.function.arguments] : []
        ),
        [
          ["call_a", "calc", "{\"e\":\"2+3\"}"],
          ["call_b", "calc", "{\"e\":\"4*4\"}"]
        ]
      )
      assert.deepStrictEqual(final.usage, {
        prompt_tokens: 20,
        completion_tokens: 7,
        total_tokens: 27,
        prompt_tokens_details: { cached_tokens: 4 }
      })
    }))

  it.effect("a raw stream yields exactly the one chunk; the SDK's request decodes with its options", () =>
    Effect.gen(function*() {
      const { client, requests } = sdk(serve(completion))
      const stream = yield* Effect.promise(() =>
        client.chat.completions.create({
          model: "qwen",
          messages: [{ role: "user", content: "What is 2+3?" }],
          stream: true,
          max_completion_tokens: 32,
          stop: ["\n\n"],
          seed: 3
        })
      )
      const chunks = yield* Effect.promise(async () => {
        const out = []
        for await (const chunk of stream) out.push(chunk)
        return out
      })
      assert.strictEqual(chunks.length, 1)
      assert.strictEqual(chunks[0]?.choices[0]?.delta.content, "It is 5.")
      const req = ok(Chat.decode(requests[0]))
      assert.strictEqual(req.maxTokens, 32)
      assert.deepStrictEqual(req.stop, ["\n\n"])
      assert.strictEqual(req.seed, 3)
    }))

  it.effect("a failure after the stream opened surfaces as an APIError with the message", () =>
    Effect.gen(function*() {
      const { client } = sdk(() => Sse.encodeAll(Chat.renderSseError(ProtocolError.GatewayError.internal("chat"))))
      const error = yield* Effect.promise(() =>
        client.chat.completions.stream({ model: "qwen", messages: [{ role: "user", content: "hi" }] })
          .finalChatCompletion()
          .then(() => undefined, (e: unknown) => e)
      )
      assert.instanceOf(error, OpenAI.APIError)
      assert.include(String((error as Error).message), "Internal error while handling agentic chat request.")
    }))

  it.effect("the JSON body parses as a ChatCompletion in the SDK", () =>
    Effect.gen(function*() {
      const { client } = sdk(serve(completion), "application/json")
      const body = yield* Effect.promise(() =>
        client.chat.completions.create({ model: "qwen", messages: [{ role: "user", content: "hi" }], logprobs: true })
      )
      assert.strictEqual(body.choices[0]?.message.content, "It is 5.")
      assert.deepStrictEqual(body.choices[0]?.logprobs?.content?.map((l) => l.token), ["It", " é"])
    }))
})
