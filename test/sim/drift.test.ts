/**
 * `rollout/drift/<cause>`: a step counts the model requests whose echoed history diverged from a committed response,
 * by cause. The real Rollout, GroupPool, Generation (qwen25 tool calls, qwen3 reasoning, `--agentic-strict-match`) and
 * Credit under the TestClock, with in-process agents: each commits one tool-calling turn, then echoes it back edited
 * in one way (or faithfully) with the tool result, and exports the branch it continued.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { join, resolve } from "node:path"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import type * as Supervisor from "../../layers/session/Supervisor.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as Forest from "../../src/forest/Forest.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as InProcessRollout from "../support/inProcessRollout.ts"
import * as Requests from "../support/requests.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")

/** Think and call `calc`; after the tool result, answer. */
const policy = (request: Engine.PolicyRequest): string =>
  request.messages.at(-1)?.role === "tool"
    ? "<think>\nThe tool answered.\n</think>\n\nThe answer is 4."
    : "<think>\nUse the calculator.\n</think>\n\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expression\": \"2 + 2\"}}\n</tool_call>"

type Message = Canonical.Message

/** How an agent echoes the committed response `r` (after the messages `before` it). */
const edits: Record<string, (before: ReadonlyArray<Message>, r: Message) => ReadonlyArray<Message>> = {
  faithful: (before, r) => [...before, r],
  "reasoning-dropped": (before, { reasoning_content: _, ...r }) => [...before, r],
  "reasoning-changed": (before, r) => [...before, { ...r, reasoning_content: `${r.reasoning_content ?? ""} Sure.` }],
  "text-changed": (before, r) => [...before, { ...r, content: "Let me use the calculator." }],
  // Spaced and indented: the canonical form absorbs it, so it matches (no drift).
  "tool-arguments-reserialized": (before, r) => [...before, {
    ...r,
    tool_calls: (r.tool_calls ?? []).map((c) => ({
      ...c,
      function: { ...c.function, arguments: JSON.stringify(JSON.parse(c.function.arguments), null, 2) }
    }))
  }],
  "tool-calls-changed": (before, r) => [...before, {
    ...r,
    tool_calls: (r.tool_calls ?? []).map((c) => ({
      ...c,
      function: { ...c.function, arguments: "{\"expression\":\"2 + 3\"}" }
    }))
  }],
  "messages-reordered": (before, r) => [...before, { role: "assistant", content: "Thinking out loud." }, r],
  // A streaming client's `index` on each echoed tool call.
  other: (before, r) => [...before, { ...r, tool_calls: (r.tool_calls ?? []).map((c, index) => ({ ...c, index })) }]
}
const kinds = Object.keys(edits)

const agent =
  (started: { count: number }) =>
  (services: Layer.Layer<InProcessRollout.GenerationServices>): Supervisor.InProcessAgent =>
  (input) =>
    Effect.gen(function*() {
      const edit = edits[kinds[started.count++ % kinds.length]!]!
      const entry = yield* (yield* Sessions.Sessions).lookup(input.sessionId)
      const generation = yield* Generation.Generation
      const forests = yield* Forests.Forests
      const ask = (messages: ReadonlyArray<unknown>) =>
        generation.generate(entry, Requests.canonicalRequest({ messages, tools: [Policy.calcTool] }))
      yield* ask([...(input.input.messages ?? [])])
      const forest = yield* forests.get(input.sessionId)
      const committed = Forest.fullMessages(forest, Forest.leaves(forest)[0]!)
      const r = committed.at(-1)!
      const toolResult = { role: "tool", tool_call_id: r.tool_calls?.[0]?.id ?? "", content: "4" }
      yield* ask([...edit(committed.slice(0, -1), r), toolResult])
      // The branch the second turn continued: its newest node, the answer.
      const answer = [...forest.nodes.values()].at(-1)!
      return [{ name: "main", messages: Forest.fullMessages(forest, answer.hash), tools: [Policy.calcTool], reward: 1 }]
    }).pipe(Effect.provide(services))

describe("rollout/drift", () => {
  it.effect("counts each way an agent edits its history, once per drifted request", () =>
    Effect.gen(function*() {
      const settings = yield* Settings.resolve({
        promptData: join(fixtures, "train.jsonl"),
        rolloutBatchSize: 2,
        nSamplesPerPrompt: 4,
        numRollout: 1,
        agenticConcurrency: 2,
        agenticToolCallParser: "qwen25",
        agenticReasoningParser: "qwen3",
        strictMatch: true,
        rolloutMaxResponseLen: 64
      })
      const started = { count: 0 }
      const { step } = yield* InProcessRollout.runStep(settings, {
        policy: policy,
        agent: agent(started),
        maxSeconds: 600
      })
      assert.strictEqual(started.count, 8)
      assert.strictEqual(step.groups.accepted, 2)
      // Relax's step key and batch size are on the line too (docs/outputs.md, "Rollout statistics").
      assert.strictEqual(step.metrics["rollout/step"], 0)
      assert.strictEqual(step.metrics["rollout/global_batch_size"], 8)
      // Every edit drifted once, under its own cause, but the faithful echo and the re-serialized arguments: the
      // gateway matches canonical messages, whose arguments are compact key-sorted JSON (docs/outputs.md).
      assert.deepStrictEqual(
        Object.fromEntries(Object.entries(step.metrics).filter(([key]) => key.startsWith("rollout/drift"))),
        {
          "rollout/drift": 6,
          "rollout/drift/reasoning_dropped": 1,
          "rollout/drift/reasoning_changed": 1,
          "rollout/drift/tool_arguments_reserialized": 0,
          "rollout/drift/tool_calls_changed": 1,
          "rollout/drift/text_changed": 1,
          "rollout/drift/messages_reordered": 1,
          "rollout/drift/other": 1
        }
      )
    }).pipe(Effect.scoped))
})
