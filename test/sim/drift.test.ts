/**
 * `rollout/drift/<cause>`: a step counts the model requests whose echoed history diverged from a committed response,
 * by cause. The real Rollout, GroupPool, Generation (qwen25 tool calls, qwen3 reasoning, `--agentic-strict-match`) and
 * Credit under the TestClock, with in-process agents: each commits one tool-calling turn, then echoes it back edited
 * in one way (or faithfully) with the tool result, and exports the branch it continued.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Result } from "effect"
import { TestClock } from "effect/testing"
import { join, resolve } from "node:path"
import { Credit } from "../../layers/credit/Credit.ts"
import { EmbeddedEngine } from "../../layers/engine/EmbeddedEngine.ts"
import type { Engine, PolicyRequest } from "../../layers/engine/Engine.ts"
import { Forests } from "../../layers/generation/Forests.ts"
import { Generation } from "../../layers/generation/Generation.ts"
import { Rollout } from "../../layers/rollout/Rollout.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as Telemetry from "../../layers/runtime/Telemetry.ts"
import { GroupPool } from "../../layers/schedule/GroupPool.ts"
import { Sessions } from "../../layers/schedule/Sessions.ts"
import { type InProcessAgent, Supervisor } from "../../layers/session/Supervisor.ts"
import { Tokenizer } from "../../layers/tokenizer/Tokenizer.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as Forest from "../../src/forest/Forest.ts"
import { creditOptions } from "../../src/index.ts"
import type * as Canonical from "../../src/protocol/canonical.ts"
import { calcTool } from "../fixtures/gateway/policy.ts"
import * as Requests from "../support/requests.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")

/** Think and call `calc`; after the tool result, answer. */
const policy = (request: PolicyRequest): string =>
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

let services: Layer.Layer<Sessions | Generation | Forests | Tokenizer | Engine>

const agent = (started: { count: number }): InProcessAgent => (input) =>
  Effect.gen(function*() {
    const edit = edits[kinds[started.count++ % kinds.length]!]!
    const entry = yield* (yield* Sessions).lookup(input.sessionId)
    const generation = yield* Generation
    const forests = yield* Forests
    const ask = (messages: ReadonlyArray<unknown>) =>
      generation.generate(entry, Requests.canonicalRequest({ messages, tools: [calcTool] }))
    yield* ask([...(input.input.messages ?? [])])
    const forest = yield* forests.get(input.sessionId)
    const committed = Forest.fullMessages(forest, Forest.leaves(forest)[0]!)
    const r = committed.at(-1)!
    const toolResult = { role: "tool", tool_call_id: r.tool_calls?.[0]?.id ?? "", content: "4" }
    yield* ask([...edit(committed.slice(0, -1), r), toolResult])
    // The branch the second turn continued: its newest node, the answer.
    const answer = [...forest.nodes.values()].at(-1)!
    return [{ name: "main", messages: Forest.fullMessages(forest, answer.hash), tools: [calcTool], reward: 1 }]
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
      const generationOptions = Generation.optionsOf(settings)
      if (Result.isFailure(generationOptions)) return yield* Effect.die(generationOptions.failure)
      const sink = Telemetry.memorySink()
      const core = Layer.mergeAll(Sessions.layer, Forests.layer, Tokenizer.layer.pipe(Layer.orDie))
      const generation = Generation.layer(generationOptions.success).pipe(
        Layer.provideMerge(EmbeddedEngine.layer({ ...EmbeddedEngine.instant, policy })),
        Layer.provideMerge(core)
      )
      services = Layer.succeedContext(yield* Layer.build(generation))
      const started = { count: 0 }
      const rollout = Rollout.layer.pipe(
        Layer.provide(Layer.mergeAll(
          RolloutConfig.RolloutConfig.layerSettings(settings),
          Supervisor.layerInProcess(agent(started), { timeoutSeconds: settings.agentTimeout }),
          Credit.layer(creditOptions(settings)).pipe(Layer.orDie),
          GroupPool.layer.pipe(Layer.provide(Telemetry.Telemetry.layerSink(sink))),
          Telemetry.Telemetry.layerSink(sink),
          services
        )),
        Layer.orDie
      )
      const fiber = yield* Effect.gen(function*() {
        return yield* (yield* Rollout).runStep(0)
      }).pipe(Effect.provide(rollout), Effect.forkChild)
      for (let second = 0; second < 600 && fiber.pollUnsafe() === undefined; second++) {
        yield* TestClock.adjust("1 second")
      }
      const step = yield* Fiber.join(fiber)
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
