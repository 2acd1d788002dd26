/**
 * A model turn whose tool call the parser drops (an unknown tool name) and that leaves nothing else: committed with
 * its raw generated text as content and answered, counted as a parser failure; with `failUnparsedTurns` the reference
 * behaviour (the request fails, nothing is committed). Embedded engine, real Qwen3 tokenizer, the glm45 and qwen25
 * parsers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as Requests from "../support/requests.ts"
import * as Results from "../support/results.ts"
import * as Sessions from "../support/sessions.ts"

/** What each parser's model writes when it calls a tool the request does not define. */
const unknownCall: Record<string, string> = {
  qwen25: "<tool_call>\n{\"name\": \"launch_rockets\", \"arguments\": {\"count\": 3}}\n</tool_call>",
  glm45: "<tool_call>launch_rockets\n<arg_key>count</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
}

const stack = (parser: string, failUnparsedTurns: boolean) =>
  Generation.Generation.layer({
    toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get(parser)),
    failUnparsedTurns
  }).pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(
      EmbeddedEngine.EmbeddedEngine.layer({
        ...EmbeddedEngine.EmbeddedEngine.instant,
        policy: () => unknownCall[parser]!
      })
    ),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )

const request = Requests.canonicalRequest({
  messages: [{ role: "user", content: "Please compute 2+2?" }],
  tools: [Policy.calcTool]
})

describe("a turn whose tool call the parser drops", () => {
  for (const parser of ["qwen25", "glm45"]) {
    it.layer(stack(parser, false))((it) => {
      it.effect(`${parser}: committed with the raw text as content, answered, counted`, () =>
        Effect.gen(function*() {
          const entry = yield* Sessions.sessionWithForest({ sampling: Sessions.sampling({ maxNewTokens: 256 }) })
          const completion = yield* (yield* Generation.Generation).generate(entry, request)
          assert.strictEqual(completion.content, unknownCall[parser])
          assert.deepStrictEqual(completion.toolCalls, [])
          assert.strictEqual(completion.finish, "stop")
          assert.strictEqual(entry.counters.droppedToolCalls + entry.counters.parserFailures, 1)
          const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
          const [leaf] = Forest.leaves(forest)
          assert(leaf !== undefined)
          const node = Forest.node(forest, leaf)
          assert(node.kind === "resp")
          assert.strictEqual(node.message.content, unknownCall[parser])
          assert.strictEqual(Forest.tokenLength(node), completion.usage.completionTokens)
          // The echo of the committed message continues the same lineage (a client that sends it back matches).
          const next = yield* (yield* Generation.Generation).generate(entry, {
            ...request,
            state: Results.success(Canonical.canonicalize({
              messages: [
                { role: "user", content: "Please compute 2+2?" },
                { role: "assistant", content: completion.content },
                { role: "user", content: "Use the calc tool." }
              ],
              tools: [Policy.calcTool]
            }))
          })
          assert.strictEqual(next.content, unknownCall[parser])
          assert.strictEqual(Forest.leaves(forest).length, 1)
        }))
    })

    it.layer(stack(parser, true))((it) => {
      it.effect(`${parser}: with failUnparsedTurns the request fails as in the reference (500) and nothing is committed`, () =>
        Effect.gen(function*() {
          const entry = yield* Sessions.sessionWithForest({ sampling: Sessions.sampling({ maxNewTokens: 256 }) })
          const error = yield* (yield* Generation.Generation).generate(entry, request).pipe(Effect.flip)
          assert.strictEqual(error._tag, "UnusableResponseError")
          assert.strictEqual(ProtocolError.GatewayError.fromGeneration(error).status, 500)
          const forest = yield* (yield* Forests.Forests).get(entry.sessionId)
          assert.isFalse(Forest.leaves(forest).some((leaf) => Forest.node(forest, leaf).kind === "resp"))
        }))
    })
  }
})
