import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Responses from "../../src/protocol/Responses.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as FakeModelApi from "../support/fakeModelApi.ts"
import * as Results from "../support/results.ts"
import * as SseParser from "./sseParser.ts"

const ok = Results.success
const err = Results.rejection
const messagesOf = (body: unknown) => ok(Responses.decode(body)).state.messages

const completion: Completion.Completion = {
  id: "feed01",
  created: 1_700_000_100,
  reasoning: "Add them.",
  content: "It is 5.",
  toolCalls: [{ id: "call_a", name: "calc", arguments: "{\"e\":\"2+3\"}" }],
  finish: "tool_calls",
  usage: { promptTokens: 30, completionTokens: 9, cachedTokens: 12 }
}

describe("Responses decode: the projection table", () => {
  it("projects top-level instructions to a system message before the input", () => {
    assert.deepStrictEqual(messagesOf({ instructions: "Be brief.", input: "Hi" }), [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi" }
    ])
  })

  it("projects message items of every role, developer becoming system", () => {
    assert.deepStrictEqual(
      messagesOf({
        input: [
          { role: "developer", content: "Rules." },
          { type: "message", role: "user", content: "Q1" },
          { type: "message", role: "assistant", content: "A1" },
          { role: "system", content: "More rules." },
          { role: "user", content: "Q2" }
        ]
      }),
      [
        { role: "system", content: "Rules.\n\nMore rules." },
        { role: "user", content: "Q1" },
        { role: "assistant", content: "A1" },
        { role: "user", content: "Q2" }
      ]
    )
  })

  it("projects input_text and output_text parts to message text, dropping other parts", () => {
    assert.deepStrictEqual(
      messagesOf({
        input: [
          { role: "user", content: [{ type: "input_text", text: "Hello " }, { type: "input_text", text: "there" }] },
          {
            role: "assistant",
            content: [{ type: "output_text", text: "Hi", annotations: [] }, { type: "refusal", refusal: "no" }]
          },
          { role: "user", content: [{ type: "input_text", text: "Q" }, { type: "input_file", file_id: "f" }] }
        ]
      }),
      [
        { role: "user", content: "Hello there" },
        { role: "assistant", content: "Hi" },
        { role: "user", content: "Q" }
      ]
    )
  })

  it("projects a user input_image with an image_url string to image_url content", () => {
    assert.deepStrictEqual(
      messagesOf({
        input: [{
          role: "user",
          content: [
            { type: "input_text", text: "What is this?" },
            { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "auto" }
          ]
        }]
      }),
      [{
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }
        ]
      }]
    )
  })

  it("projects reasoning items (summary, else content) to assistant reasoning_content", () => {
    const fromSummary = messagesOf({
      input: [
        { role: "user", content: "Q" },
        {
          type: "reasoning",
          summary: [{ type: "summary_text", text: "S1" }, { type: "summary_text", text: "S2" }],
          content: [{ type: "reasoning_text", text: "ignored" }]
        },
        { role: "assistant", content: "A" }
      ]
    })
    assert.deepStrictEqual(fromSummary[1], { role: "assistant", content: "A", reasoning_content: "S1\n\nS2" })
    const fromContent = messagesOf({
      input: [
        { role: "user", content: "Q" },
        { type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "R" }] },
        { role: "assistant", content: [{ type: "output_text", text: "A" }] }
      ]
    })
    assert.deepStrictEqual(fromContent[1], { role: "assistant", content: "A", reasoning_content: "R" })
  })

  it("projects function_call and function_call_output with the same call_id", () => {
    assert.deepStrictEqual(
      messagesOf({
        input: [
          { role: "user", content: "Q" },
          { type: "function_call", call_id: "call_1", name: "calc", arguments: "{\"e\": \"2+3\", \"a\": 1}" },
          { type: "function_call", call_id: "call_2", name: "calc", arguments: "{}" },
          { type: "function_call_output", call_id: "call_1", output: "5" },
          {
            type: "function_call_output",
            call_id: "call_2",
            output: [{ type: "input_text", text: "1" }, { type: "input_text", text: "6" }]
          },
          { type: "function_call_output", call_id: "call_3", output: "" }
        ]
      }),
      [
        { role: "user", content: "Q" },
        {
          role: "assistant",
          content: "",
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "calc", arguments: "{\"a\":1,\"e\":\"2+3\"}" } },
            { id: "call_2", type: "function", function: { name: "calc", arguments: "{}" } }
          ]
        },
        { role: "tool", content: "5", tool_call_id: "call_1" },
        { role: "tool", content: "16", tool_call_id: "call_2" },
        { role: "tool", content: "", tool_call_id: "call_3" }
      ]
    )
  })

  it("merges consecutive assistant messages, reasoning and calls into one assistant turn", () => {
    const messages = messagesOf({
      input: [
        { role: "user", content: "Q" },
        { type: "reasoning", summary: [{ type: "summary_text", text: "R1" }] },
        { role: "assistant", content: "A" },
        { type: "item_reference", id: "x" },
        { type: "reasoning", summary: [{ type: "summary_text", text: "R2" }] },
        { role: "assistant", content: "B" },
        { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
        { role: "user", content: "next" }
      ]
    })
    assert.deepStrictEqual(messages, [
      { role: "user", content: "Q" },
      {
        role: "assistant",
        content: "AB",
        reasoning_content: "R1\n\nR2",
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }]
      },
      { role: "user", content: "next" }
    ])
  })

  it("skips unknown items, unknown roles and non-object items", () => {
    assert.deepStrictEqual(
      messagesOf({
        input: [7, { type: "web_search_call", id: "w" }, { role: "critic", content: "x" }, {
          role: "user",
          content: "Q"
        }]
      }),
      [{ role: "user", content: "Q" }]
    )
  })

  it("projects flat function tools, max_output_tokens and reasoning.effort", () => {
    const req = ok(Responses.decode({
      model: "qwen",
      input: "Hi",
      tools: [
        { type: "function", name: "calc", description: "Evaluate.", parameters: { type: "object" }, strict: true },
        { type: "web_search" }
      ],
      max_output_tokens: 100,
      reasoning: { effort: "none" },
      temperature: 0.3,
      stream: true
    }))
    assert.deepStrictEqual(req.state.tools, [
      { type: "function", function: { name: "calc", parameters: { type: "object" }, description: "Evaluate." } }
    ])
    assert.deepStrictEqual(req.state.chat_template_kwargs, { enable_thinking: false })
    assert.strictEqual(req.maxTokens, 100)
    assert.strictEqual(req.model, "qwen")
    assert.isTrue(req.stream)
    assert.deepStrictEqual(req.stop, [])
    assert.isFalse(req.logprobs)
    assert.isUndefined(req.seed)
    assert.deepStrictEqual(
      ok(Responses.decode({ input: "Hi", reasoning: { effort: "high" } })).state.chat_template_kwargs,
      {
        enable_thinking: true
      }
    )
    assert.deepStrictEqual(
      ok(Responses.decode({ input: "Hi", reasoning: { effort: "turbo" } })).state.chat_template_kwargs,
      {}
    )
  })
})

describe("Responses decode: errors", () => {
  it("rejects each malformed field with the reference text and its param", () => {
    const fc = (extra: Record<string, unknown>) => ({
      type: "function_call",
      call_id: "c",
      name: "f",
      arguments: "{}",
      ...extra
    })
    const cases: ReadonlyArray<readonly [unknown, string, string]> = [
      [[], "body", "request body must be a JSON object"],
      [{ input: "x", instructions: "" }, "instructions", "instructions must be a non-empty string"],
      [{ input: "x", instructions: 3 }, "instructions", "instructions must be a non-empty string"],
      [{}, "input", "input is required and must be a string or list"],
      [{ input: 5 }, "input", "input is required and must be a string or list"],
      [{ input: [{ role: "user", content: 5 }] }, "input[0].content", "input[0].content must be a string or list"],
      [
        { input: [{ role: "user", content: [{ type: "input_text", text: "" }] }] },
        "input[0].content[0].text",
        "input[0].content[0] text must be non-empty"
      ],
      [
        { input: [{ role: "user", content: [{ type: "input_image", image_url: "" }] }] },
        "input[0].content[0].image_url",
        "input[0].content[0].image_url must be a non-empty string"
      ],
      [{ input: [fc({ call_id: "" })] }, "input[0].call_id", "input[0].call_id must be a non-empty string"],
      [{ input: [fc({ name: 3 })] }, "input[0].name", "input[0].name must be a non-empty string"],
      [{ input: [fc({ arguments: { e: 1 } })] }, "input[0].arguments", "input[0].arguments must be a JSON string"],
      [
        { input: [fc({}), { type: "function_call_output", call_id: "c", output: 5 }] },
        "input[1].output",
        "input[1].output must be a string or text block list"
      ],
      [
        { input: [fc({}), { type: "function_call_output", call_id: "c", output: [{ type: "input_text", text: "" }] }] },
        "input[1].output[0].text",
        "input[1].output[0].text must be non-empty"
      ],
      [
        { input: [{ type: "function_call_output", output: "5" }] },
        "input[0].call_id",
        "input[0].call_id must be a non-empty string"
      ],
      [
        { input: [{ role: "user", content: "Q" }, { role: "assistant", content: "" }] },
        "input[1].content",
        "input[1].content projected to no supported content"
      ],
      [{ input: "x", max_output_tokens: 0 }, "max_output_tokens", "max_output_tokens must be a positive integer"],
      [{ input: "x", tools: {} }, "tools", "tools must be a list"],
      [
        { input: "x", tools: [{ type: "function", parameters: {} }] },
        "tools[0].name",
        "tools.name must be a non-empty string"
      ],
      [
        { input: "x", tools: [{ type: "function", name: "f", parameters: [] }] },
        "tools[0].parameters",
        "tools.parameters must be a JSON object"
      ],
      [{ input: [] }, "input", "input projected to zero supported messages"],
      [{ input: [{ type: "reasoning", summary: [] }] }, "input", "input projected to zero supported messages"]
    ]
    for (const [body, param, message] of cases) assert.deepStrictEqual(err(Responses.decode(body)), { param, message })
  })

  it("reports canonicalization errors on input, since projected indices differ from the request's", () => {
    assert.deepStrictEqual(err(Responses.decode({ instructions: "S", input: "" })), {
      param: "input",
      message: "messages[1].content must not be empty"
    })
  })
})

const request = (extra: Record<string, unknown> = {}) => ok(Responses.decode({ model: "qwen", input: "Q", ...extra }))

const expectedOutput: ReadonlyArray<Responses.OutputItem> = [
  {
    id: "rs_feed01",
    type: "reasoning",
    status: "completed",
    summary: [],
    content: [{ type: "reasoning_text", text: "Add them." }]
  },
  {
    id: "msg_feed01",
    type: "message",
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text: "It is 5.", annotations: [] }]
  },
  {
    id: "fc_feed01_0",
    type: "function_call",
    status: "completed",
    call_id: "call_a",
    name: "calc",
    arguments: "{\"e\":\"2+3\"}"
  }
]

describe("Responses JSON render", () => {
  it("renders reasoning, message and function_call items in order, status completed", () => {
    const body = Responses.renderJson(completion, request())
    assert.isTrue(Schema.is(Responses.Response)(body))
    assert.deepStrictEqual(body, {
      id: "resp_feed01",
      object: "response",
      created_at: 1_700_000_100,
      status: "completed",
      model: "qwen",
      output: expectedOutput,
      usage: { input_tokens: 30, input_tokens_details: { cached_tokens: 12 }, output_tokens: 9, total_tokens: 39 },
      error: null,
      incomplete_details: null
    })
  })

  it("renders a length-limited result as incomplete with reason max_output_tokens", () => {
    const body = Responses.renderJson({ ...completion, toolCalls: [], finish: "length" }, request())
    assert.strictEqual(body.status, "incomplete")
    assert.deepStrictEqual(body.incomplete_details, { reason: "max_output_tokens" })
  })

  it("leaves out empty reasoning and empty text items", () => {
    const { reasoning: _r, ...noReasoning } = completion
    const body = Responses.renderJson({ ...noReasoning, content: "" }, request())
    assert.deepStrictEqual(body.output.map((item) => item.type), ["function_call"])
  })

  it("replays its own output items as input to the same canonical assistant turn", () => {
    const output = Responses.renderJson(completion, request()).output
    const messages = messagesOf({
      input: [{ role: "user", content: "Q" }, ...output, {
        type: "function_call_output",
        call_id: "call_a",
        output: "5"
      }]
    })
    assert.deepStrictEqual(messages[1], {
      role: "assistant",
      content: "It is 5.",
      reasoning_content: "Add them.",
      tool_calls: [{ id: "call_a", type: "function", function: { name: "calc", arguments: "{\"e\":\"2+3\"}" } }]
    })
  })
})

describe("Responses Buffered SSE", () => {
  it("emits response.created, per item added..done, then response.completed, numbered from 0", () => {
    const parsed = SseParser.parseSse(Sse.encodeAll(Responses.renderSse(completion, request({ stream: true }))))
    const events = SseParser.payloads(parsed) as ReadonlyArray<Record<string, unknown>>
    assert.deepStrictEqual(parsed.events.map((e) => e.event), events.map((e) => e["type"]))
    assert.deepStrictEqual(events.map((e) => e["type"]), [
      "response.created",
      "response.output_item.added",
      "response.content_part.added",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed"
    ])
    assert.deepStrictEqual(events.map((e) => e["sequence_number"]), events.map((_, i) => i))
    const created = events[0]?.["response"] as Record<string, unknown>
    assert.strictEqual(created["status"], "in_progress")
    assert.deepStrictEqual(created["output"], [])
    const done = events.filter((e) => e["type"] === "response.output_item.done")
    assert.deepStrictEqual(done.map((e) => e["output_index"]), [0, 1, 2])
    assert.deepStrictEqual(done.map((e) => e["item"]), [...expectedOutput])
    assert.deepStrictEqual(events.at(-1)?.["response"], Responses.renderJson(completion, request()))
  })

  it("ends a length-limited result with response.incomplete", () => {
    const events = SseParser.payloads(
      SseParser.parseSse(Sse.encodeAll(Responses.renderSse({ ...completion, finish: "length" }, request())))
    ) as ReadonlyArray<Record<string, unknown>>
    const last = events.at(-1)
    assert.strictEqual(last?.["type"], "response.incomplete")
    assert.strictEqual((last!["response"] as Record<string, unknown>)["status"], "incomplete")
  })

  it("reports a failure as response.created then response.failed carrying the error", () => {
    const frames = Responses.renderSseError(ProtocolError.GatewayError.contextLength({ limit: 8 }), {
      id: "ab",
      created: 5,
      model: "qwen"
    })
    const events = SseParser.payloads(SseParser.parseSse(Sse.encodeAll(frames)))
    assert.deepStrictEqual(events, [
      {
        type: "response.created",
        sequence_number: 0,
        response: {
          id: "resp_ab",
          object: "response",
          created_at: 5,
          status: "in_progress",
          model: "qwen",
          output: [],
          usage: null,
          error: null,
          incomplete_details: null
        }
      },
      {
        type: "response.failed",
        sequence_number: 1,
        response: {
          id: "resp_ab",
          object: "response",
          created_at: 5,
          status: "failed",
          model: "qwen",
          output: [],
          usage: null,
          error: {
            code: "context_length_exceeded",
            message: "This model's maximum context length is 8 tokens. Please reduce the length of the messages."
          },
          incomplete_details: null
        }
      }
    ])
  })
})

describe("Responses with the openai SDK", () => {
  const sdk = FakeModelApi.openAi
  const serve = (c: Completion.Completion) => FakeModelApi.serve(Responses.adapter, c)

  it.effect("responses.stream accepts the buffered sequence and its final response equals the JSON body", () =>
    Effect.gen(function*() {
      const { client } = sdk(serve(completion))
      const result = yield* Effect.promise(async () => {
        const stream = client.responses.stream({ model: "qwen", input: "Q", instructions: "Be brief." })
        const deltas: Array<string> = []
        stream.on("response.output_text.delta", (e) => deltas.push(e.delta))
        return { final: await stream.finalResponse(), deltas }
      })
      assert.deepStrictEqual(result.deltas, ["It is 5."])
      assert.strictEqual(result.final.status, "completed")
      assert.strictEqual(result.final.output_text, "It is 5.")
      // The helper adds its own `parsed` / `parsed_arguments` fields (structured-output parsing); the rest is ours.
      const withoutParsed = JSON.stringify(
        result.final.output,
        (k, v) => k === "parsed" || k === "parsed_arguments" ? undefined : v
      )
      assert.deepStrictEqual(JSON.parse(withoutParsed), expectedOutput)
    }))

  it.effect("a raw stream yields every event with its type and sequence number", () =>
    Effect.gen(function*() {
      const { client } = sdk(serve({ ...completion, finish: "length" }))
      const types = yield* Effect.promise(async () => {
        const stream = await client.responses.create({ model: "qwen", input: "Q", stream: true, max_output_tokens: 9 })
        const out: Array<string> = []
        for await (const event of stream) out.push(`${event.sequence_number}:${event.type}`)
        return out
      })
      assert.strictEqual(types[0], "0:response.created")
      assert.strictEqual(types.at(-1), `${types.length - 1}:response.incomplete`)
    }))

  it.effect("the JSON body parses in the SDK with output_text, and the SDK's request decodes", () =>
    Effect.gen(function*() {
      const { client, requests } = sdk(serve(completion), "application/json")
      const body = yield* Effect.promise(() =>
        client.responses.create({
          model: "qwen",
          input: [{ role: "user", content: [{ type: "input_text", text: "Q" }] }],
          tools: [{ type: "function", name: "calc", parameters: { type: "object" }, strict: false }],
          max_output_tokens: 50
        })
      )
      assert.strictEqual(body.output_text, "It is 5.")
      const req = ok(Responses.decode(requests[0]))
      assert.strictEqual(req.maxTokens, 50)
      assert.deepStrictEqual(req.state.messages, [{ role: "user", content: "Q" }])
    }))

  it.effect("responses.stream ends with a failed response when the generation failed", () =>
    Effect.gen(function*() {
      const { client } = sdk(() =>
        Sse.encodeAll(
          Responses.renderSseError(ProtocolError.GatewayError.internal("chat"), { id: "ab", created: 5, model: "qwen" })
        )
      )
      const final = yield* Effect.promise(() => client.responses.stream({ model: "qwen", input: "Q" }).finalResponse())
      assert.strictEqual(final.status, "failed")
      assert.strictEqual(final.error?.message, "Internal error while handling agentic chat request.")
    }))
})
