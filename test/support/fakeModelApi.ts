/**
 * The model API answered in process, for testing an SDK (openai, @anthropic-ai/sdk) against a protocol adapter
 * without a server: the SDK's `fetch` is replaced, each request body is decoded by the adapter, and a completion is
 * answered rendered as JSON or Buffered SSE.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as Results from "./results.ts"

/** What the fake answers a request body with: the response text (its content type is given with the client). */
export type Answer = (requestBody: unknown) => string

/** A `fetch` that answers every call with `answer` (and records the request bodies it was sent). */
export const fakeFetch = (
  answer: (requestBody: unknown) => { readonly status?: number; readonly contentType: string; readonly body: string }
) => {
  const requests: Array<unknown> = []
  const fetch = async (_input: unknown, init?: { readonly body?: unknown }): Promise<Response> => {
    const requestBody: unknown = typeof init?.body === "string" ? JSON.parse(init.body) : undefined
    requests.push(requestBody)
    const { body, contentType, status } = answer(requestBody)
    return new Response(body, { status: status ?? 200, headers: { "content-type": contentType } })
  }
  return { fetch, requests }
}

/** The answer of `adapter` to every request: `completion` rendered for the decoded request (JSON or Buffered SSE). */
export const serve = (adapter: Completion.Adapter, completion: Completion.Completion): Answer => (body) => {
  const request = Results.success(adapter.decode(body))
  return request.stream
    ? Sse.encodeAll(adapter.renderSse(completion, request))
    : JSON.stringify(adapter.renderJson(completion, request))
}

/** The base URL the clients are given (never connected to: the fake `fetch` answers). */
const baseURL = "http://127.0.0.1:9/agentic_api"

/** An openai client whose requests `answer` answers, and the request bodies it sent. */
export const openAi = (answer: Answer, contentType = "text/event-stream") => {
  const fake = fakeFetch((body) => ({ contentType, body: answer(body) }))
  return {
    client: new OpenAI({ apiKey: "session", baseURL, fetch: fake.fetch, maxRetries: 0 }),
    requests: fake.requests
  }
}

/** An @anthropic-ai/sdk client whose requests `answer` answers, and the request bodies it sent. */
export const anthropic = (answer: Answer, contentType = "text/event-stream") => {
  const fake = fakeFetch((body) => ({ contentType, body: answer(body) }))
  return {
    client: new Anthropic({ apiKey: "session", baseURL, fetch: fake.fetch, maxRetries: 0 }),
    requests: fake.requests
  }
}
