import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import * as Sse from "../../src/protocol/Sse.ts"
import * as SseParser from "./sseParser.ts"

describe("SSE frames", () => {
  it("writes an unnamed data frame as compact JSON followed by a blank line", () => {
    assert.strictEqual(Sse.encode(Sse.data({ a: 1, b: ["x"] })), "data: {\"a\":1,\"b\":[\"x\"]}\n\n")
  })

  it("writes a named event with its event line before the data", () => {
    assert.strictEqual(Sse.encode(Sse.event("ping", { type: "ping" })), "event: ping\ndata: {\"type\":\"ping\"}\n\n")
  })

  it("keeps non-ASCII characters unescaped (ensure_ascii=False)", () => {
    assert.strictEqual(Sse.encode(Sse.data({ t: "héllo 世界" })), "data: {\"t\":\"héllo 世界\"}\n\n")
  })

  it("writes comment frames and the [DONE] sentinel", () => {
    assert.strictEqual(Sse.encode(Sse.comment("connected")), ": connected\n\n")
    assert.strictEqual(Sse.encode(Sse.done), "data: [DONE]\n\n")
  })

  it("splits a payload with line breaks over several data lines, which a client joins back", () => {
    const frame: Sse.SseFrame = { _tag: "Message", event: "x", data: "line1\nline2\r\nline3" }
    const text = Sse.encode(frame)
    assert.strictEqual(text, "event: x\ndata: line1\ndata: line2\ndata: line3\n\n")
    assert.deepStrictEqual(SseParser.parseSse(text).events, [{ event: "x", data: "line1\nline2\nline3" }])
  })

  it("concatenates a sequence so a client reads back every frame in order", () => {
    const text = Sse.encodeAll([Sse.comment("connected"), Sse.data({ n: 1 }), Sse.event("e", { n: 2 }), Sse.done])
    const parsed = SseParser.parseSse(text)
    assert.deepStrictEqual(parsed.comments, ["connected"])
    assert.deepStrictEqual(parsed.events, [
      { event: undefined, data: "{\"n\":1}" },
      { event: "e", data: "{\"n\":2}" },
      { event: undefined, data: "[DONE]" }
    ])
  })

  it("uses comment frames to connect and keep alive Chat and Responses streams", () => {
    for (const protocol of ["chat", "responses"] as const) {
      assert.strictEqual(Sse.encode(Sse.connected(protocol)), ": connected\n\n")
      assert.strictEqual(Sse.encode(Sse.heartbeat(protocol)), ": heartbeat\n\n")
    }
  })

  it("uses event: ping to connect and keep alive Messages streams", () => {
    const ping = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
    assert.strictEqual(Sse.encode(Sse.connected("messages")), ping)
    assert.strictEqual(Sse.encode(Sse.heartbeat("messages")), ping)
  })

  it("sends heartbeats every 15 seconds with the Buffered SSE headers", () => {
    assert.isTrue(Duration.equals(Sse.heartbeatInterval, Duration.seconds(15)))
    assert.deepStrictEqual(Sse.headers, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "x-accel-buffering": "no"
    })
  })
})
