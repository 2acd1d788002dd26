import { assert, describe, it } from "@effect/vitest"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as Results from "../support/results.ts"

const ok = Results.success
const err = Results.rejection
const messagesError = (raw: unknown) => err(Canonical.canonicalizeMessages(raw))

describe("canonicalizeMessages: validation errors (docs/requests.md, canonical messages)", () => {
  const cases: ReadonlyArray<readonly [string, unknown, string, string]> = [
    ["a non-list", { role: "user" }, "messages must be a list, got <class 'dict'>", "messages"],
    ["a string", "hi", "messages must be a list, got <class 'str'>", "messages"],
    ["a non-dict message", ["hi"], "messages[0] must be a dict, got <class 'str'>", "messages[0]"],
    ["a list message", [[1]], "messages[0] must be a dict, got <class 'list'>", "messages[0]"],
    ["a missing role", [{ content: "x" }], "messages[0] must include role", "messages[0].role"],
    [
      "a null role",
      [{ role: null, content: "x" }],
      "messages[0].role must be a string, got <class 'NoneType'>",
      "messages[0].role"
    ],
    [
      "a numeric role",
      [{ role: 1, content: "x" }],
      "messages[0].role must be a string, got <class 'int'>",
      "messages[0].role"
    ],
    [
      "an unknown role",
      [{ role: "developer", content: "x" }],
      "messages[0].role must be one of: assistant, system, tool, user",
      "messages[0].role"
    ],
    [
      "non-list tool_calls",
      [{ role: "assistant", content: "x", tool_calls: {} }],
      "messages[0].tool_calls must be a list, got <class 'dict'>",
      "messages[0].tool_calls"
    ],
    [
      "a non-dict tool call",
      [{ role: "assistant", content: "x", tool_calls: ["f"] }],
      "messages[0].tool_calls[0] must be a dict, got <class 'str'>",
      "messages[0].tool_calls[0]"
    ],
    [
      "an empty tool-call id",
      [{ role: "assistant", tool_calls: [{ id: "", function: { name: "f", arguments: "{}" } }] }],
      "messages[0].tool_calls[0].id must be a non-empty string",
      "messages[0].tool_calls[0].id"
    ],
    [
      "a numeric tool-call id",
      [{ role: "assistant", tool_calls: [{ id: 7, function: { name: "f", arguments: "{}" } }] }],
      "messages[0].tool_calls[0].id must be a non-empty string",
      "messages[0].tool_calls[0].id"
    ],
    [
      "a missing function",
      [{ role: "assistant", tool_calls: [{ id: "c" }] }],
      "messages[0].tool_calls[0].function must be a dict, got <class 'NoneType'>",
      "messages[0].tool_calls[0].function"
    ],
    [
      "a numeric function name",
      [{ role: "assistant", tool_calls: [{ function: { name: 3, arguments: "{}" } }] }],
      "messages[0].tool_calls[0].function.name must be a string, got <class 'int'>",
      "messages[0].tool_calls[0].function.name"
    ],
    [
      "a float reasoning_content",
      [{ role: "assistant", content: "x", reasoning_content: 1.5 }],
      "messages[0].reasoning_content must be a string, got <class 'float'>",
      "messages[0].reasoning_content"
    ],
    [
      "an empty tool_call_id",
      [{ role: "tool", content: "r", tool_call_id: "" }],
      "messages[0].tool_call_id must be a non-empty string",
      "messages[0].tool_call_id"
    ],
    [
      "a null tool_call_id",
      [{ role: "tool", content: "r", tool_call_id: null }],
      "messages[0].tool_call_id must be a non-empty string",
      "messages[0].tool_call_id"
    ],
    ["missing content", [{ role: "user" }], "messages[0] must include content", "messages[0].content"],
    ["null content", [{ role: "user", content: null }], "messages[0].content must not be empty", "messages[0].content"],
    [
      "empty user content",
      [{ role: "user", content: "" }],
      "messages[0].content must not be empty",
      "messages[0].content"
    ],
    [
      "an empty plain assistant",
      [{ role: "assistant", content: "" }],
      "messages[0].content must not be empty",
      "messages[0].content"
    ],
    [
      "an empty part list",
      [{ role: "user", content: [] }],
      "messages[0].content must not be empty",
      "messages[0].content"
    ],
    [
      "a non-dict part",
      [{ role: "user", content: ["x"] }],
      "messages[0].content[0] must be a dict, got <class 'str'>",
      "messages[0].content[0]"
    ],
    [
      "an empty text part",
      [{ role: "user", content: [{ type: "text", text: "ok" }, { type: "text", text: "" }] }],
      "messages[0].content[1].text must not be empty",
      "messages[0].content[1].text"
    ],
    [
      "numeric content",
      [{ role: "user", content: 5 }],
      "messages[0].content must be a list, string, or None, got <class 'int'>",
      "messages[0].content"
    ],
    [
      "dict content",
      [{ role: "user", content: { text: "x" } }],
      "messages[0].content must be a list, string, or None, got <class 'dict'>",
      "messages[0].content"
    ]
  ]
  for (const [name, raw, message, param] of cases) {
    it(`rejects ${name}`, () => {
      assert.deepStrictEqual(messagesError(raw), { message, param })
    })
  }

  it("reports the index of the offending message", () => {
    assert.deepStrictEqual(
      messagesError([{ role: "user", content: "a" }, { role: "user", content: "b" }, { role: "user" }]),
      {
        message: "messages[2] must include content",
        param: "messages[2].content"
      }
    )
  })
})

describe("canonicalizeMessages: canonical form", () => {
  it("treats null and absent as no messages", () => {
    assert.deepStrictEqual(ok(Canonical.canonicalizeMessages(null)), [])
    assert.deepStrictEqual(ok(Canonical.canonicalizeMessages(undefined)), [])
  })

  it("drops unknown keys and keeps role, content, reasoning_content, tool_calls, tool_call_id", () => {
    const out = ok(Canonical.canonicalizeMessages([
      { role: "user", content: "hi", name: "bob", extra: 1 },
      { role: "assistant", content: "a", reasoning_content: "r", refusal: null },
      { role: "tool", content: "res", tool_call_id: "c1", name: "f" }
    ]))
    assert.deepStrictEqual(out, [
      { role: "user", content: "hi" },
      { role: "assistant", content: "a", reasoning_content: "r" },
      { role: "tool", content: "res", tool_call_id: "c1" }
    ])
  })

  it("merges every system message into one leading system message joined by a blank line", () => {
    const out = ok(Canonical.canonicalizeMessages([
      { role: "user", content: "u1" },
      { role: "system", content: "first" },
      { role: "assistant", content: "a1" },
      {
        role: "system",
        content: [{ type: "text", text: "second" }, {
          type: "image_url",
          image_url: { url: "data:image/png;base64,AAAA" }
        }]
      }
    ]))
    assert.deepStrictEqual(out, [
      { role: "system", content: "first\n\nsecond" },
      { role: "user", content: "u1" },
      { role: "assistant", content: "a1" }
    ])
  })

  it("drops empty reasoning_content and keeps non-empty reasoning on any role", () => {
    const out = ok(Canonical.canonicalizeMessages([
      { role: "user", content: "q", reasoning_content: "odd but kept" },
      { role: "assistant", content: "a", reasoning_content: "" },
      { role: "assistant", content: "b", reasoning_content: null }
    ]))
    assert.deepStrictEqual(out, [
      { role: "user", content: "q", reasoning_content: "odd but kept" },
      { role: "assistant", content: "a" },
      { role: "assistant", content: "b" }
    ])
  })

  it("lets an assistant with tool calls or reasoning omit content (becomes \"\")", () => {
    const out = ok(Canonical.canonicalizeMessages([
      { role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] },
      { role: "assistant", content: null, reasoning_content: "thinking" },
      { role: "assistant", content: "", reasoning_content: "thinking" }
    ]))
    assert.deepStrictEqual(out.map((m) => m.content), ["", "", ""])
  })

  it("allows empty content on tool messages only", () => {
    assert.deepStrictEqual(ok(Canonical.canonicalizeMessages([{ role: "tool", content: "" }])), [{
      role: "tool",
      content: ""
    }])
  })

  it("copies part lists verbatim, dataset image parts included", () => {
    const parts = [{ type: "image", image: "file://a.png" }, { type: "text", text: "what?" }, {
      type: "image_url",
      image_url: { url: "data:x" }
    }]
    assert.deepStrictEqual(ok(Canonical.canonicalizeMessages([{ role: "user", content: parts }])), [{
      role: "user",
      content: parts
    }])
  })

  it("ignores tool_calls on non-assistant roles and tool_call_id on non-tool roles", () => {
    const out = ok(Canonical.canonicalizeMessages([
      { role: "user", content: "u", tool_calls: "garbage", tool_call_id: "x" }
    ]))
    assert.deepStrictEqual(out, [{ role: "user", content: "u" }])
  })

  it("canonicalizes tool-call arguments and keeps other tool-call keys", () => {
    const out = ok(Canonical.canonicalizeMessages([
      {
        role: "assistant",
        content: "",
        tool_calls: [
          {
            id: "c1",
            type: "function",
            index: 0,
            function: { name: "f", arguments: "{ \"b\": 1.0, \"a\": [2, 3.5] }" }
          },
          { type: "function", function: { name: "g", arguments: { z: "é", y: { x: 1 } } } }
        ]
      }
    ]))
    assert.deepStrictEqual(out[0]?.tool_calls, [
      { id: "c1", type: "function", index: 0, function: { name: "f", arguments: "{\"a\":[2,3.5],\"b\":1}" } },
      { type: "function", function: { name: "g", arguments: "{\"y\":{\"x\":1},\"z\":\"é\"}" } }
    ])
  })

  it("drops the SDKs' client-side function.parsed_arguments, so an SDK-returned tool call matches its committed form", () => {
    const call = { id: "c1", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }
    const echoed = { ...call, function: { ...call.function, parsed_arguments: { a: 1 } } }
    const [committed, echo] = [call, echoed].map((c) =>
      ok(Canonical.canonicalizeMessages([{ role: "assistant", content: null, tool_calls: [c] }]))
    )
    assert.deepStrictEqual(echo, committed)
    assert.deepStrictEqual(echo?.[0]?.tool_calls, [call])
  })

  it("names the argument field in argument errors", () => {
    assert.deepStrictEqual(
      messagesError([{ role: "assistant", tool_calls: [{ function: { name: "f", arguments: "{\"a\":1,\"a\":2}" } }] }]),
      {
        message: "messages[0].tool_calls[0].function.arguments contains duplicate key: a",
        param: "messages[0].tool_calls[0].function.arguments"
      }
    )
    assert.deepStrictEqual(
      messagesError([{ role: "assistant", tool_calls: [{ function: { name: "f" } }] }]),
      {
        message:
          "messages[0].tool_calls[0].function.arguments must be a JSON object or a JSON string encoding an object, got <class 'NoneType'>",
        param: "messages[0].tool_calls[0].function.arguments"
      }
    )
  })
})

describe("canonicalArguments", () => {
  const args = (raw: unknown) => Canonical.canonicalArguments(raw, "f")

  it("re-serializes as compact key-sorted JSON with non-ASCII kept", () => {
    assert.strictEqual(
      ok(args("{\"b\": \"ü\\u00fc\", \"a\": {\"d\": [1, {\"y\": 2, \"x\": 1}], \"c\": null}}")),
      "{\"a\":{\"c\":null,\"d\":[1,{\"x\":1,\"y\":2}]},\"b\":\"üü\"}"
    )
  })

  it("turns integral floats into ints and prints other numbers as Python does", () => {
    assert.strictEqual(
      ok(
        args(
          "{\"a\":1.0,\"b\":-0.0,\"c\":1e20,\"d\":1.5e-7,\"e\":12345678901234567890,\"f\":9007199254740991.0,\"g\":0.1}"
        )
      ),
      "{\"a\":1,\"b\":0,\"c\":1e+20,\"d\":1.5e-07,\"e\":12345678901234567890,\"f\":9007199254740991,\"g\":0.1}"
    )
  })

  it("accepts an object given directly", () => {
    assert.strictEqual(ok(args({ b: [true, null], a: 2.5 })), "{\"a\":2.5,\"b\":[true,null]}")
  })

  it("rejects duplicate keys, at any depth", () => {
    assert.strictEqual(err(args("{\"o\":{\"k\":1,\"k\":2}}")).message, "f contains duplicate key: k")
  })

  it("rejects NaN and Infinity literals", () => {
    assert.strictEqual(err(args("{\"a\":NaN}")).message, "f contains non-finite number: NaN")
    assert.strictEqual(err(args("{\"a\":Infinity}")).message, "f contains non-finite number: Infinity")
    assert.strictEqual(err(args("{\"a\":[-Infinity]}")).message, "f contains non-finite number: -Infinity")
  })

  it("rejects numbers that overflow to infinity", () => {
    assert.deepStrictEqual(err(args("{\"a\":1e400}")), { message: "f numbers must be finite", param: "f" })
  })

  it("rejects invalid JSON text", () => {
    for (
      const text of [
        "",
        "{",
        "{\"a\":1} trailing",
        "{'a':1}",
        "{\"a\":01}",
        "{\"a\":\"\u0001\"}",
        "\ufeff{}",
        "{\"a\":1,}"
      ]
    ) {
      assert.strictEqual(err(args(text)).message, "f must be valid JSON", JSON.stringify(text))
    }
  })

  it("rejects JSON that is not an object", () => {
    assert.strictEqual(
      err(args("[1]")).message,
      "f must be a JSON object or a JSON string encoding an object, got <class 'list'>"
    )
    assert.strictEqual(
      err(args("\"s\"")).message,
      "f must be a JSON object or a JSON string encoding an object, got <class 'str'>"
    )
    assert.strictEqual(
      err(args("3.5")).message,
      "f must be a JSON object or a JSON string encoding an object, got <class 'float'>"
    )
    assert.strictEqual(
      err(args(7)).message,
      "f must be a JSON object or a JSON string encoding an object, got <class 'int'>"
    )
    assert.strictEqual(
      err(args([1])).message,
      "f must be a JSON object or a JSON string encoding an object, got <class 'list'>"
    )
  })

  it("rejects non-JSON values in a given object", () => {
    assert.strictEqual(err(args({ a: Number.NaN })).message, "f numbers must be finite")
    assert.strictEqual(
      err(args({ a: () => 1 })).message,
      "f must contain JSON-compatible values, got <class 'function'>"
    )
  })

  it("rejects lone surrogates as invalid UTF-8", () => {
    assert.strictEqual(err(args("{\"a\":\"\\ud800\"}")).message, "f must be valid UTF-8")
    assert.strictEqual(ok(args("{\"a\":\"\\ud83d\\ude00\"}")), "{\"a\":\"😀\"}")
  })
})

describe("normalizeTools", () => {
  it("projects function tools onto {type, function:{name, parameters, description?}}", () => {
    const out = ok(Canonical.normalizeTools([
      {
        type: "function",
        function: { name: "f", parameters: { type: "object" }, description: "d", strict: true },
        extra: 1
      },
      { type: "function", function: { name: "g", description: null } },
      { type: "web_search" },
      { type: "function", function: "not a dict" }
    ]))
    assert.deepStrictEqual(out, [
      { type: "function", function: { name: "f", parameters: { type: "object" }, description: "d" } },
      { type: "function", function: { name: "g", parameters: null } }
    ])
  })

  it("treats null as no tools and rejects other shapes", () => {
    assert.deepStrictEqual(ok(Canonical.normalizeTools(null)), [])
    assert.deepStrictEqual(err(Canonical.normalizeTools({})), {
      message: "tools must be a list, got <class 'dict'>",
      param: "tools"
    })
    assert.deepStrictEqual(err(Canonical.normalizeTools([1])), {
      message: "tools[0] must be a dict, got <class 'int'>",
      param: "tools[0]"
    })
  })
})

describe("normalizeTemplateKwargs", () => {
  it("sorts keys recursively", () => {
    const out = ok(Canonical.normalizeTemplateKwargs({ b: 1, a: { d: [{ z: 1, y: 2 }], c: 2 } }))
    assert.deepStrictEqual(Object.keys(out), ["a", "b"])
    assert.deepStrictEqual(JSON.stringify(out), "{\"a\":{\"c\":2,\"d\":[{\"y\":2,\"z\":1}]},\"b\":1}")
  })

  it("treats null as {} and rejects non-dicts", () => {
    assert.deepStrictEqual(ok(Canonical.normalizeTemplateKwargs(null)), {})
    assert.deepStrictEqual(err(Canonical.normalizeTemplateKwargs([1])), {
      message: "chat_template_kwargs must be a dict, got <class 'list'>",
      param: "chat_template_kwargs"
    })
  })
})

describe("canonicalize", () => {
  it("canonicalizes messages, tools and kwargs together", () => {
    const state = ok(Canonical.canonicalize({
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "f", parameters: {} } }],
      chat_template_kwargs: { enable_thinking: false }
    }))
    assert.deepStrictEqual(state, {
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "f", parameters: {} } }],
      chat_template_kwargs: { enable_thinking: false }
    })
  })

  it("reports the first invalid part", () => {
    assert.strictEqual(
      err(Canonical.canonicalize({ messages: [], tools: "x", chat_template_kwargs: 1 })).param,
      "tools"
    )
    assert.strictEqual(
      err(Canonical.canonicalize({ messages: [], chat_template_kwargs: 1 })).param,
      "chat_template_kwargs"
    )
  })
})
