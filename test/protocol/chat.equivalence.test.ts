import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as StateHash from "../../src/forest/StateHash.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import type * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Responses from "../../src/protocol/Responses.ts"
import * as Results from "../support/results.ts"

const state = (r: Result.Result<Completion.CanonicalRequest, ProtocolError.ProtocolError>) => Results.success(r).state

const image = "https://example.com/plot.png"
const schema = { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] }

const chatBody = {
  model: "qwen",
  messages: [
    { role: "system", content: "You are a careful calculator." },
    {
      role: "user",
      content: [{ type: "text", text: "Read the plot, then compute." }, {
        type: "image_url",
        image_url: { url: image }
      }]
    },
    {
      role: "assistant",
      content: "Let me compute.",
      reasoning_content: "The plot shows 2 and 3.",
      tool_calls: [{
        id: "call_1",
        type: "function",
        function: { name: "calc", arguments: "{\"expression\": \"2+3\"}" }
      }]
    },
    { role: "tool", tool_call_id: "call_1", content: "5" },
    { role: "user", content: "And doubled?" }
  ],
  tools: [{ type: "function", function: { name: "calc", description: "Evaluate an expression.", parameters: schema } }],
  chat_template_kwargs: { enable_thinking: true }
}

const responsesBody = {
  model: "qwen",
  instructions: "You are a careful calculator.",
  input: [
    {
      role: "user",
      content: [{ type: "input_text", text: "Read the plot, then compute." }, { type: "input_image", image_url: image }]
    },
    { type: "reasoning", summary: [{ type: "summary_text", text: "The plot shows 2 and 3." }] },
    {
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "Let me compute.", annotations: [] }]
    },
    { type: "function_call", call_id: "call_1", name: "calc", arguments: "{\"expression\":\"2+3\"}" },
    { type: "function_call_output", call_id: "call_1", output: "5" },
    { role: "user", content: "And doubled?" }
  ],
  tools: [{
    type: "function",
    name: "calc",
    description: "Evaluate an expression.",
    parameters: schema,
    strict: false
  }],
  reasoning: { effort: "medium" }
}

const messagesBody = {
  model: "qwen",
  max_tokens: 256,
  system: [{ type: "text", text: "You are a careful calculator." }],
  messages: [
    {
      role: "user",
      content: [{ type: "text", text: "Read the plot, then compute." }, {
        type: "image",
        source: { type: "url", url: image }
      }]
    },
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "The plot shows 2 and 3.", signature: "sig" },
        { type: "text", text: "Let me compute." },
        { type: "tool_use", id: "call_1", name: "calc", input: { expression: "2+3" } }
      ]
    },
    {
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "call_1", content: "5" }, { type: "text", text: "And doubled?" }]
    }
  ],
  tools: [{ name: "calc", description: "Evaluate an expression.", input_schema: schema }],
  thinking: { type: "enabled", budget_tokens: 1024 }
}

describe("one conversation through the three protocols", () => {
  it("decodes to the same canonical state from Chat, Responses and Messages", () => {
    const chat = state(Chat.decode(chatBody))
    assert.deepStrictEqual(state(Responses.decode(responsesBody)), chat)
    assert.deepStrictEqual(state(Messages.decode(messagesBody)), chat)
    assert.strictEqual(StateHash.ofState(state(Messages.decode(messagesBody))), StateHash.ofState(chat))
    assert.strictEqual(StateHash.ofState(state(Responses.decode(responsesBody))), StateHash.ofState(chat))
    assert.strictEqual(chat.messages.length, 5)
    assert.deepStrictEqual(chat.chat_template_kwargs, { enable_thinking: true })
  })

  it("decodes each protocol's rendered answer, replayed as history, to the same canonical state", () => {
    const completion: Completion.Completion = {
      id: "c0ffee",
      created: 1_700_000_300,
      reasoning: "Double 5.",
      content: "Calling the tool.",
      toolCalls: [{ id: "call_2", name: "calc", arguments: "{\"expression\":\"5*2\"}" }],
      finish: "tool_calls",
      usage: { promptTokens: 50, completionTokens: 12, cachedTokens: 0 }
    }
    const chatReq = Chat.decode(chatBody)
    const responsesReq = Responses.decode(responsesBody)
    const messagesReq = Messages.decode(messagesBody)
    if (Result.isFailure(chatReq) || Result.isFailure(responsesReq) || Result.isFailure(messagesReq)) {
      return assert.fail("the conversation must decode")
    }
    const chat = state(Chat.decode({
      ...chatBody,
      messages: [
        ...chatBody.messages,
        Chat.renderJson(completion, chatReq.success).choices[0]?.message,
        { role: "tool", tool_call_id: "call_2", content: "10" }
      ]
    }))
    const responses = state(Responses.decode({
      ...responsesBody,
      input: [
        ...responsesBody.input,
        ...Responses.renderJson(completion, responsesReq.success).output,
        { type: "function_call_output", call_id: "call_2", output: "10" }
      ]
    }))
    const messages = state(Messages.decode({
      ...messagesBody,
      messages: [
        ...messagesBody.messages,
        { role: "assistant", content: Messages.renderJson(completion, messagesReq.success).content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "call_2", content: "10" }] }
      ]
    }))
    assert.deepStrictEqual(responses, chat)
    assert.deepStrictEqual(messages, chat)
    assert.deepStrictEqual(StateHash.prefixHashes(messages), StateHash.prefixHashes(chat))
    assert.deepStrictEqual(StateHash.prefixHashes(responses), StateHash.prefixHashes(chat))
    assert.deepStrictEqual(chat.messages.at(-2), {
      role: "assistant",
      content: "Calling the tool.",
      reasoning_content: "Double 5.",
      tool_calls: [{
        id: "call_2",
        type: "function",
        function: { name: "calc", arguments: "{\"expression\":\"5*2\"}" }
      }]
    })
  })
})
