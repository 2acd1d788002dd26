import { assert, describe, it } from "@effect/vitest"
import * as Chat from "../../src/protocol/Chat.ts"
import * as ErrorAnswer from "../../src/protocol/ErrorAnswer.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Responses from "../../src/protocol/Responses.ts"

describe("OpenAI error bodies", () => {
  it("renders a validation error as 400 invalid_request_error naming the field", () => {
    const r = ProtocolError.renderOpenAi(ProtocolError.invalid("stop", "stop must be a string or list of strings"))
    assert.strictEqual(r.status, 400)
    assert.deepStrictEqual(r.body, {
      error: {
        message: "stop must be a string or list of strings",
        type: "invalid_request_error",
        param: "stop",
        code: "invalid_request_error"
      }
    })
    assert.deepStrictEqual(r.headers, {})
  })

  it("renders missing and malformed Authorization as 401 authentication_error", () => {
    const missing = ProtocolError.renderOpenAi(ProtocolError.GatewayError.missingAuthorization())
    assert.strictEqual(missing.status, 401)
    assert.deepStrictEqual(missing.body, {
      error: {
        message: "Missing Authorization header",
        type: "authentication_error",
        param: null,
        code: "authentication_error"
      }
    })
    const malformed = ProtocolError.renderOpenAi(ProtocolError.GatewayError.malformedAuthorization())
    assert.strictEqual(malformed.status, 401)
    assert.strictEqual(
      ProtocolError.openAiBody(ProtocolError.GatewayError.malformedAuthorization()).error.message,
      "Authorization header must be 'Bearer <token>'"
    )
  })

  it("renders an unknown session as 404 session_discarded, quoted like Python's repr, and not retryable", () => {
    const r = ProtocolError.renderOpenAi(ProtocolError.GatewayError.sessionClosed("abc123"))
    assert.strictEqual(r.status, 404)
    assert.deepStrictEqual(r.body, {
      error: {
        message: "Unknown or discarded agentic session 'abc123'.",
        type: "not_found_error",
        param: "session_id",
        code: "session_discarded"
      }
    })
    assert.deepStrictEqual(r.headers, { "x-should-retry": "false" })
    assert.strictEqual(
      ProtocolError.GatewayError.sessionClosed("it's").message,
      "Unknown or discarded agentic session \"it's\"."
    )
  })

  it("renders internal errors as 500 internal_error, not retryable", () => {
    const r = ProtocolError.renderOpenAi(ProtocolError.GatewayError.internal("chat"))
    assert.strictEqual(r.status, 500)
    assert.deepStrictEqual(r.body, {
      error: {
        message: "Internal error while handling agentic chat request.",
        type: "internal_error",
        param: null,
        code: "internal_error"
      }
    })
    assert.deepStrictEqual(r.headers, { "x-should-retry": "false" })
    assert.strictEqual(
      ProtocolError.GatewayError.internal("request").message,
      "Internal error while handling agentic request."
    )
    assert.strictEqual(
      ProtocolError.GatewayError.internal("render").message,
      "Internal error while rendering agentic response."
    )
  })

  it("renders client disconnects as 499 client_disconnect", () => {
    const body = ProtocolError.renderOpenAi(ProtocolError.GatewayError.clientDisconnect("body"))
    assert.strictEqual(body.status, 499)
    assert.deepStrictEqual(body.body, {
      error: {
        message: "client disconnected before agentic request body was read",
        type: "client_disconnect",
        param: null,
        code: "client_disconnect"
      }
    })
    assert.strictEqual(
      ProtocolError.GatewayError.clientDisconnect("completion").message,
      "client disconnected before agentic completion was produced"
    )
  })

  it("renders body errors on param body: invalid JSON, non-object, too large", () => {
    const json = ProtocolError.renderOpenAi(
      ProtocolError.GatewayError.invalidJson("Unexpected token } in JSON at position 3")
    )
    assert.strictEqual(json.status, 400)
    assert.deepStrictEqual(json.body, {
      error: {
        message: "Invalid request body: Unexpected token } in JSON at position 3",
        type: "invalid_request_error",
        param: "body",
        code: "invalid_request_error"
      }
    })
    assert.strictEqual(ProtocolError.GatewayError.bodyNotObject().message, "request body must be a JSON object")
    const large = ProtocolError.renderOpenAi(ProtocolError.GatewayError.bodyTooLarge(1024))
    assert.strictEqual(large.status, 413)
    assert.strictEqual(ProtocolError.openAiBody(ProtocolError.GatewayError.bodyTooLarge(1024)).error.param, "body")
    assert.include(ProtocolError.GatewayError.bodyTooLarge(1024).message, "1024 bytes")
  })
})

describe("context length errors", () => {
  it("says what was exceeded with every level of detail known", () => {
    const cases: ReadonlyArray<readonly [Parameters<typeof ProtocolError.GatewayError.contextLength>[0], string]> = [
      [{}, "This model's maximum context length was exceeded. Please reduce the length of the messages."],
      [
        { limit: 4096 },
        "This model's maximum context length is 4096 tokens. Please reduce the length of the messages."
      ],
      [
        { limit: 4096, promptTokens: 5000 },
        "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens. " +
        "Please reduce the length of the messages."
      ],
      [
        { limit: 4096, promptTokens: 4000, completionTokens: 200 },
        "This model's maximum context length is 4096 tokens. However, your messages resulted in 4000 tokens and " +
        "requested 200 completion tokens (4200 tokens total). Please reduce the length of the messages or " +
        "max_completion_tokens."
      ]
    ]
    for (const [limits, message] of cases) {
      const r = ProtocolError.renderOpenAi(ProtocolError.GatewayError.contextLength(limits))
      assert.strictEqual(r.status, 400)
      assert.deepStrictEqual(r.body, {
        error: { message, type: "invalid_request_error", param: "messages", code: "context_length_exceeded" }
      })
      assert.include(message, "maximum context length")
    }
  })
})

describe("Anthropic error bodies", () => {
  it("maps the status to the Anthropic error type", () => {
    const cases: ReadonlyArray<readonly [ProtocolError.AnyError, number, string]> = [
      [ProtocolError.invalid("max_tokens", "max_tokens is required"), 400, "invalid_request_error"],
      [ProtocolError.GatewayError.missingAuthorization(), 401, "authentication_error"],
      [ProtocolError.GatewayError.sessionClosed("s"), 404, "not_found_error"],
      [ProtocolError.GatewayError.bodyTooLarge(10), 413, "request_too_large"],
      [ProtocolError.GatewayError.clientDisconnect("body"), 499, "invalid_request_error"],
      [ProtocolError.GatewayError.internal("chat"), 500, "api_error"],
      [ProtocolError.GatewayError.contextLength({ limit: 8 }), 400, "invalid_request_error"]
    ]
    for (const [error, status, type] of cases) {
      const r = ProtocolError.renderAnthropic(error)
      assert.strictEqual(r.status, status)
      assert.deepStrictEqual(r.body, { type: "error", error: { type, message: error.message } })
    }
  })

  it("marks 404 and server errors as not retryable, and nothing else", () => {
    assert.deepStrictEqual(ProtocolError.renderAnthropic(ProtocolError.GatewayError.sessionClosed("s")).headers, {
      "x-should-retry": "false"
    })
    assert.deepStrictEqual(ProtocolError.renderAnthropic(ProtocolError.GatewayError.internal("render")).headers, {
      "x-should-retry": "false"
    })
    assert.deepStrictEqual(ProtocolError.renderAnthropic(ProtocolError.GatewayError.missingAuthorization()).headers, {})
    assert.deepStrictEqual(
      ProtocolError.renderAnthropic(ProtocolError.invalid("system", "system must not be empty")).headers,
      {}
    )
  })
})

describe("runner_unavailable (cluster mode)", () => {
  it("is a 503 every protocol says to retry after a second", () => {
    const error = ProtocolError.GatewayError.runnerUnavailable("its connection was lost while it answered")
    for (const adapter of [Chat.adapter, Responses.adapter, Messages.adapter]) {
      const answer = ErrorAnswer.render(adapter, error)
      assert.strictEqual(answer.status, 503)
      assert.strictEqual(answer.headers["retry-after"], "1")
      assert.isUndefined(answer.headers["x-should-retry"], adapter.protocol)
      assert.include(answer.body, "cannot be reached now (its connection was lost while it answered); retry")
    }
    assert.include(ErrorAnswer.render(Chat.adapter, error).body, `"code":"runner_unavailable"`)
    assert.include(ErrorAnswer.render(Messages.adapter, error).body, `"type":"api_error"`)
  })
})
