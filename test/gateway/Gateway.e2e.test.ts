/**
 * The real gateway on a loopback port with the embedded engine (scripted policy: think, call `calc`, answer), driven
 * by the official `openai` and `@anthropic-ai/sdk` clients with the base URL set to `Gateway.baseUrl` unchanged.
 */
import Anthropic from "@anthropic-ai/sdk"
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as Sessions from "../support/sessions.ts"

const stack = GatewayStack.gatewayStack()

/** A fresh registered Session with its forest; returns its id (the API key). */
const newSession = Sessions.registeredSession({
  sampling: Sessions.sampling({ maxNewTokens: 256 }),
  maxContextLen: 4096
})

const leaves = (sessionId: string) =>
  Effect.gen(function*() {
    const forest = yield* (yield* Forests.Forests).get(sessionId)
    return Forest.leaves(forest)
  })

const openai = (baseURL: string, apiKey: string) => new OpenAI({ baseURL, apiKey, maxRetries: 0 })
const anthropic = (baseURL: string, apiKey: string) => new Anthropic({ baseURL, apiKey, maxRetries: 0 })

const question = [{ role: "user" as const, content: "Please compute 2+2?" }]

describe("Gateway with the embedded engine", () => {
  it.layer(stack, { timeout: 60_000 })((it) => {
    it.effect("Chat Completions: a tool loop across turns, committed as ONE leaf", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const sessionId = yield* newSession
        const client = openai(baseUrl, sessionId)
        const first = yield* Effect.promise(() =>
          client.chat.completions.create({ model: "policy", messages: question, tools: [Policy.calcTool] })
        )
        const choice = first.choices[0]
        assert(choice !== undefined)
        expect(choice.finish_reason).toBe("tool_calls")
        expect(first.model).toBe("policy")
        const call = choice.message.tool_calls?.[0]
        assert(call !== undefined && call.type === "function")
        expect(call.id).toMatch(/^call_[0-9a-f]{24}$/)
        expect(call.function).toEqual({ name: "calc", arguments: "{\"expression\":\"2+2\"}" })
        expect(choice.message).toMatchObject({ reasoning_content: "I should use the calculator." })
        expect(first.usage?.completion_tokens).toBeGreaterThan(0)

        const second = yield* Effect.promise(() =>
          client.chat.completions.create({
            model: "policy",
            tools: [Policy.calcTool],
            messages: [...question, choice.message, { role: "tool", tool_call_id: call.id, content: "4" }]
          })
        )
        expect(second.choices[0]?.message.content).toBe("The answer is 4.")
        expect(second.choices[0]?.finish_reason).toBe("stop")
        expect(yield* leaves(sessionId)).toHaveLength(1)
      }))

    it.effect("Chat Completions streams: the raw stream and the SDK's chat.completions.stream helper", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const client = openai(baseUrl, yield* newSession)
        const chunks = yield* Effect.promise(async () => {
          const stream = await client.chat.completions.create({
            model: "policy",
            messages: question,
            tools: [Policy.calcTool],
            stream: true
          })
          const all = []
          for await (const chunk of stream) all.push(chunk)
          return all
        })
        expect(chunks).toHaveLength(1)
        expect(chunks[0]?.object).toBe("chat.completion.chunk")
        expect(chunks[0]?.choices[0]?.finish_reason).toBe("tool_calls")
        expect(chunks[0]?.usage?.total_tokens).toBeGreaterThan(0)

        const helped = yield* Effect.promise(() =>
          client.chat.completions.stream({ model: "policy", messages: [{ role: "user", content: "hello" }] })
            .finalChatCompletion()
        )
        expect(helped.choices[0]?.message.content).toBe("Hi there.")
        expect(helped.choices[0]?.finish_reason).toBe("stop")
      }))

    it.effect("Chat: the chat.completions.stream helper's final message, echoed as the SDK returns it, stays ONE leaf", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        // `strict` tools make the helper add `function.parsed_arguments` to every tool call it returns.
        for (
          const tool of [Policy.calcTool, {
            ...Policy.calcTool,
            function: { ...Policy.calcTool.function, strict: true }
          }]
        ) {
          const sessionId = yield* newSession
          const client = openai(baseUrl, sessionId)
          const tools = [tool]
          const first = yield* Effect.promise(() =>
            client.chat.completions.stream({ model: "policy", messages: question, tools }).finalMessage()
          )
          expect(first.content).toBeNull()
          const call = first.tool_calls?.[0]
          assert(call !== undefined && call.type === "function")
          const second = yield* Effect.promise(() =>
            client.chat.completions.stream({
              model: "policy",
              tools,
              messages: [...question, first, { role: "tool", tool_call_id: call.id, content: "4" }]
            }).finalMessage()
          )
          expect(second.content).toBe("The answer is 4.")
          const forest = yield* (yield* Forests.Forests).get(sessionId)
          expect(Forest.leaves(forest).map((h) => Forest.lineage(forest, h).map((n) => n.kind))).toEqual([
            ["obs", "obs", "resp", "obs", "resp"]
          ])
        }
      }))

    it.effect("Responses: function_call then function_call_output across turns, JSON and responses.stream", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const sessionId = yield* newSession
        const client = openai(baseUrl, sessionId)
        const tools = [{
          type: "function" as const,
          name: "calc",
          description: Policy.calcTool.function.description,
          parameters: Policy.calcTool.function.parameters,
          strict: false
        }]
        const first = yield* Effect.promise(() =>
          client.responses.create({ model: "policy", input: "Please compute 2+2?", tools })
        )
        expect(first.status).toBe("completed")
        const call = first.output.find((item) => item.type === "function_call")
        assert(call !== undefined && call.type === "function_call")
        expect(call.name).toBe("calc")
        expect(JSON.parse(call.arguments)).toEqual({ expression: "2+2" })

        const input: Array<OpenAI.Responses.ResponseInputItem> = [{ role: "user", content: "Please compute 2+2?" }]
        for (const item of first.output) {
          if (item.type === "reasoning" || item.type === "function_call" || item.type === "message") input.push(item)
        }
        input.push({ type: "function_call_output", call_id: call.call_id, output: "4" })
        const final = yield* Effect.promise(() =>
          client.responses.stream({ model: "policy", input, tools }).finalResponse()
        )
        expect(final.status).toBe("completed")
        expect(final.output_text).toBe("The answer is 4.")
        expect(yield* leaves(sessionId)).toHaveLength(1)
      }))

    it.effect("Anthropic Messages: thinking + tool_use, then tool_result, JSON and messages.stream", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const sessionId = yield* newSession
        const client = anthropic(baseUrl, sessionId)
        const tools: Array<Anthropic.Tool> = [{
          name: "calc",
          description: Policy.calcTool.function.description,
          input_schema: Policy.calcParameters
        }]
        const first = yield* Effect.promise(() =>
          client.messages.create({ model: "policy", max_tokens: 256, messages: question, tools })
        )
        expect(first.stop_reason).toBe("tool_use")
        const thinking = first.content.find((block) => block.type === "thinking")
        assert(thinking !== undefined && thinking.type === "thinking")
        expect(thinking.thinking).toBe("I should use the calculator.")
        const use = first.content.find((block) => block.type === "tool_use")
        assert(use !== undefined && use.type === "tool_use")
        expect(use.id).toMatch(/^toolu_[0-9a-f]{24}$/)
        expect(use.input).toEqual({ expression: "2+2" })

        const final = yield* Effect.promise(() =>
          client.messages.stream({
            model: "policy",
            max_tokens: 256,
            tools,
            messages: [
              ...question,
              { role: "assistant", content: first.content },
              { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "4" }] }
            ]
          }).finalMessage()
        )
        expect(final.stop_reason).toBe("end_turn")
        expect(final.content.find((block) => block.type === "text")).toMatchObject({ text: "The answer is 4." })
        expect(yield* leaves(sessionId)).toHaveLength(1)
      }))

    it.effect("the same conversation through all three protocols commits the same state hashes", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway.Gateway
        const [chat, responses, messages] = [yield* newSession, yield* newSession, yield* newSession]
        const system = "You are terse."
        yield* Effect.promise(() =>
          openai(baseUrl, chat).chat.completions.create({
            model: "m",
            messages: [{ role: "system", content: system }, { role: "user", content: "hello" }]
          })
        )
        yield* Effect.promise(() =>
          openai(baseUrl, responses).responses.create({ model: "m", instructions: system, input: "hello" })
        )
        yield* Effect.promise(() =>
          anthropic(baseUrl, messages).messages.create({
            model: "m",
            max_tokens: 256,
            system,
            messages: [{ role: "user", content: "hello" }]
          })
        )
        const hashes = [yield* leaves(chat), yield* leaves(responses), yield* leaves(messages)]
        expect(hashes[0]).toHaveLength(1)
        expect(hashes[1]).toEqual(hashes[0])
        expect(hashes[2]).toEqual(hashes[0])
      }))
  })
})
