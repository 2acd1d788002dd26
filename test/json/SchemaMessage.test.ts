import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import * as SchemaMessage from "../../src/json/SchemaMessage.ts"

const Options = Schema.Struct({
  rolloutBatchSize: Schema.Int.check(Schema.isGreaterThan(0)),
  nested: Schema.optionalKey(Schema.Struct({ items: Schema.Array(Schema.String) })),
  mode: Schema.optionalKey(Schema.Union([Schema.Literal("a"), Schema.Literal("b")]))
})

const failure = (input: unknown) => {
  const decoded = Schema.decodeUnknownResult(Options)(input, { errors: "all", onExcessProperty: "error" })
  assert(Result.isFailure(decoded))
  return decoded.failure
}

const inputs: ReadonlyArray<unknown> = [
  { rolloutBatchSize: "8" },
  { rolloutBatchSize: 0 },
  {},
  { rolloutBatchSize: 1, nested: { items: ["x", 2] } },
  { rolloutBatchSize: 1, mode: "c" },
  { rolloutBatchSize: 1, extra: true },
  { rolloutBatchSize: -1.5, nested: null, mode: 3 }
]

describe("SchemaMessage.format", () => {
  it("writes what SchemaError.message writes, from the issue tree", () => {
    for (const input of inputs) {
      const error = failure(input)
      assert.strictEqual(SchemaMessage.format(error.issue), error.message)
    }
  })

  it("spells path keys with the caller's function, leaving the messages as they are", () => {
    const flag = (key: PropertyKey) =>
      typeof key === "string"
        ? `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
        : SchemaMessage.bracketKey(key)
    const error = failure({ rolloutBatchSize: 1, nested: { items: ["x", 2] } })
    assert.strictEqual(SchemaMessage.format(error.issue, flag), "Expected string\n  at --nested--items[1]")
    assert.strictEqual(
      SchemaMessage.format(failure({ rolloutBatchSize: "8" }).issue, flag),
      "Expected number\n  at --rollout-batch-size"
    )
  })
})
