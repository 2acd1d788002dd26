import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as SessionOutput from "../../src/session/SessionOutput.ts"
import * as Results from "../support/results.ts"

const ok = (text: string | undefined) => Results.success(SessionOutput.parse(text))

const error = (text: string) => {
  const parsed = SessionOutput.parse(text)
  if (Result.isSuccess(parsed)) throw new Error(`expected an error for ${text}`)
  return parsed.failure
}

const message = { role: "user", content: "hi" }
const line = (record: Record<string, unknown>) => JSON.stringify(record)

describe("implicit export", () => {
  it("treats a missing, empty or blank output as an implicit export with no reward", () => {
    for (const text of [undefined, "", "  \n\t\n"]) {
      assert.deepStrictEqual(ok(text), { output: { kind: "implicit" }, warnings: [] })
    }
  })

  it("reads metadata and reward from a JSON object without messages", () => {
    assert.deepStrictEqual(ok("{\"metadata\": {\"task_success\": 1.0}, \"reward\": 1.0}"), {
      output: { kind: "implicit", metadata: { task_success: 1 }, reward: 1 },
      warnings: []
    })
    assert.deepStrictEqual(ok("{\"reward\": null}").output, { kind: "implicit", reward: null })
    assert.deepStrictEqual(ok("{\"reward\": {\"score\": 0.5, \"len\": 3}}").output, {
      kind: "implicit",
      reward: { score: 0.5, len: 3 }
    })
  })

  it("accepts a pretty-printed object over several lines", () => {
    assert.deepStrictEqual(ok("{\n  \"reward\": 2\n}\n").output, { kind: "implicit", reward: 2 })
  })

  it("warns about unknown top-level keys instead of failing", () => {
    assert.deepStrictEqual(ok("{\"reward\": 1, \"zeta\": 1, \"alpha\": 2}").warnings, [
      "SessionOutput ignoring unknown top-level keys: ['alpha', 'zeta']. " +
      "Only 'metadata' and 'reward' are consumed by Relax."
    ])
  })

  it("rejects metadata that is not an object", () => {
    const e = error("{\"metadata\": [1]}")
    assert.strictEqual(e.field, "metadata")
    assert.strictEqual(e.message, "line 1, field 'metadata': SessionOutput 'metadata' must be a JSON object, got list")
  })

  it("rejects a reward that is not null, a number or an object", () => {
    assert.strictEqual(
      error("{\"reward\": \"1.0\"}").message,
      "line 1, field 'reward': SessionOutput 'reward' must be null, number, or JSON object, got string"
    )
  })
})

describe("explicit export", () => {
  it("reads a JSON object with messages as one explicit record", () => {
    const parsed = ok(line({ name: "main", messages: [message], reward: 1 }))
    assert.deepStrictEqual(parsed.output, {
      kind: "explicit",
      records: [{ name: "main", messages: [message], reward: 1 }]
    })
  })

  it("reads JSONL records in order with every known field", () => {
    const tools = [{ type: "function", function: { name: "search", parameters: {} } }]
    const text = [
      line({
        name: "main",
        messages: [message],
        tools,
        chat_template_kwargs: { enable_thinking: false },
        metadata: { role: "main" },
        reward: 1
      }),
      "",
      line({ name: "searcher_0", messages: [message], metadata: { role: "searcher" } }),
      ""
    ].join("\n")
    assert.deepStrictEqual(ok(text).output, {
      kind: "explicit",
      records: [
        {
          name: "main",
          messages: [message],
          tools,
          chat_template_kwargs: { enable_thinking: false },
          metadata: { role: "main" },
          reward: 1
        },
        { name: "searcher_0", messages: [message], metadata: { role: "searcher" } }
      ]
    })
  })

  it("warns about unknown record keys with the line number", () => {
    const text = [line({ name: "a", messages: [message] }), line({ name: "b", messages: [message], extra: 1, note: 2 })]
      .join("\n")
    assert.deepStrictEqual(ok(text).warnings, [
      "line 2: Session output record ignoring unknown keys: ['extra', 'note']. Only 'name', 'messages', 'tools', " +
      "'chat_template_kwargs', 'metadata', and 'reward' are consumed by Relax."
    ])
  })

  const cases: ReadonlyArray<readonly [string, string, string | undefined, string]> = [
    ["a JSON array", "[]", undefined, "Session output explicit records must be written as JSONL, not a JSON array"],
    ["a JSON scalar", "42", undefined, "Managed command output must be a JSON object or JSONL records, got number"],
    ["a line that is not JSON", `${line({ name: "a", messages: [message] })}\n{oops`, undefined, "not valid JSON"],
    [
      "a record that is not an object",
      `${line({ name: "a", messages: [message] })}\n[1]`,
      undefined,
      "Session output record must be a JSON object, got list"
    ],
    [
      "a record without messages",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "b" })}`,
      "messages",
      "Session output record must include 'messages'"
    ],
    [
      "a record without a name",
      `${line({ name: "a", messages: [message] })}\n${line({ messages: [message] })}`,
      "name",
      "Session output record must include non-empty string 'name'"
    ],
    [
      "an empty name",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "", messages: [message] })}`,
      "name",
      "Session output record must include non-empty string 'name'"
    ],
    [
      "a duplicate name",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "a", messages: [message] })}`,
      "name",
      "Session output record name must be unique within one explicit export: 'a'"
    ],
    [
      "messages that are not a list",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "b", messages: "hi" })}`,
      "messages",
      "Session output record 'messages' must be a list, got string"
    ],
    [
      "an empty message list",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "b", messages: [] })}`,
      "messages",
      "Session output record 'messages' must not be empty"
    ],
    [
      "a message without a role",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "b", messages: [message, { content: "x" }] })}`,
      "messages[1].role",
      "Session output record messages need a string 'role'"
    ],
    [
      "tools that are not objects",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "b", messages: [message], tools: ["search"] })}`,
      "tools[0]",
      "Session output record 'tools' items must be JSON objects"
    ],
    [
      "template kwargs that are not an object",
      `${line({ name: "a", messages: [message] })}\n${
        line({ name: "b", messages: [message], chat_template_kwargs: [] })
      }`,
      "chat_template_kwargs",
      "Session output record 'chat_template_kwargs' must be a JSON object, got list"
    ],
    [
      "record metadata that is not an object",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "b", messages: [message], metadata: 1 })}`,
      "metadata",
      "Session output record 'metadata' must be a JSON object, got number"
    ],
    [
      "a record reward of the wrong type",
      `${line({ name: "a", messages: [message] })}\n${line({ name: "b", messages: [message], reward: true })}`,
      "reward",
      "Session output record 'reward' must be null, number, or JSON object, got boolean"
    ]
  ]

  for (const [what, text, field, reason] of cases) {
    it(`rejects ${what}, naming the line and field`, () => {
      const e = error(text)
      const expectedLine = text.includes("\n") ? 2 : 1
      assert.strictEqual(e.line, expectedLine)
      assert.strictEqual(e.field, field)
      assert.include(e.detail, reason)
      assert.isTrue(e.message.startsWith(`line ${expectedLine}`))
    })
  }
})

describe("fromValue (in-process agents)", () => {
  it("reads an array as explicit records and an object like the file", () => {
    const records = SessionOutput.fromValue([{ name: "main", messages: [message] }])
    assert.isTrue(Result.isSuccess(records) && records.success.output.kind === "explicit")
    const implicit = SessionOutput.fromValue({ reward: 1 })
    assert.deepStrictEqual(Result.getOrThrow(implicit).output, { kind: "implicit", reward: 1 })
    assert.deepStrictEqual(Result.getOrThrow(SessionOutput.fromValue(undefined)).output, { kind: "implicit" })
    assert.isTrue(Result.isFailure(SessionOutput.fromValue(3)))
  })
})
