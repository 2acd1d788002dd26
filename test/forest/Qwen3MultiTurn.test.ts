import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as ContextLimit from "../../src/forest/ContextLimit.ts"
import * as Export from "../../src/forest/Export.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"

const tools: ReadonlyArray<Canonical.Tool> = [{
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    description: "Current weather for a city"
  }
}]
const kwargs: Canonical.TemplateKwargs = {}

const canonical = (raw: ReadonlyArray<unknown>): ReadonlyArray<Canonical.Message> => {
  const r = Canonical.canonicalizeMessages(raw)
  if (Result.isFailure(r)) throw new Error(r.failure.message)
  return r.success
}

const system = { role: "system", content: "You are a weather assistant." }
const user1 = { role: "user", content: "What's the weather in Paris and Rome?" }
const assistant1 = {
  role: "assistant",
  content: "",
  reasoning_content: "The user asks for two cities; call the tool twice in parallel.",
  tool_calls: [
    { id: "call_paris", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } },
    { id: "call_rome", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Rome\"}" } }
  ]
}
const tool1 = { role: "tool", content: "Paris: 22C, sunny", tool_call_id: "call_paris" }
const tool2 = { role: "tool", content: "Rome: 18C, rain", tool_call_id: "call_rome" }
const assistant2 = {
  role: "assistant",
  content: "Paris is sunny at 22C; Rome is rainy at 18C.",
  reasoning_content: "Both results are in; summarize them."
}
const user2 = { role: "user", content: "Thanks! Which one is better for a walk?" }
const assistant3 = {
  role: "assistant",
  content: "Paris, since it is dry.",
  reasoning_content: "Rain in Rome, sun in Paris."
}

/** The text a model would have generated for `reply`: what the template renders for it after the prompt. */
const generatedText = (
  tok: Tokenizer.TokenizerShape,
  history: ReadonlyArray<Canonical.Message>,
  reply: Canonical.Message
): string => {
  const prompt = Result.getOrThrow(
    tok.renderSync({ messages: history, tools, chatTemplateKwargs: kwargs, addGenerationPrompt: true })
  )
  const full = Result.getOrThrow(
    tok.renderSync({ messages: [...history, reply], tools, chatTemplateKwargs: kwargs, addGenerationPrompt: false })
  )
  assert.isTrue(full.startsWith(prompt), "the rendered reply extends the prompt")
  return full.slice(prompt.length).replace(/<\|im_end\|>\n$/, "")
}

interface Committed {
  readonly observation: ReadonlyArray<number>
  readonly generated: ReadonlyArray<number>
  readonly logprobs: ReadonlyArray<number>
  readonly parent: string
  readonly response: string
}

/** One model request as the generation core runs it: match, tokenize the delta, commit, "generate", commit. */
const request = (
  tok: Tokenizer.TokenizerShape,
  forest: Forest.Forest,
  rawHistory: ReadonlyArray<unknown>,
  rawReply: unknown,
  turn: number
): Committed => {
  const history = canonical(rawHistory)
  const reply = canonical([rawReply])[0]
  if (reply === undefined) throw new Error("no reply")
  const matched = Matching.match(forest, { messages: history, tools, chat_template_kwargs: kwargs }, { strict: false })
  const observation = Result.getOrThrow(
    Forest.isRoot(forest, matched.parent)
      ? ObservationDelta.rootTokens(tok, matched.suffix, tools, kwargs)
      : ObservationDelta.deltaTokens(tok, matched.suffix, tools, kwargs)
  )
  assert.isTrue(Result.isSuccess(ContextLimit.checkObservation(forest, matched.parent, observation.length, 32768)))
  const parent = ForestCommit.commitObservation(forest, {
    parent: matched.parent,
    messages: matched.suffix,
    tokens: observation,
    tools,
    chatTemplateKwargs: kwargs,
    rolloutId: 1
  })
  const generated = [...tok.encode(generatedText(tok, history, reply)), tok.eosTokenId]
  const logprobs = generated.map((_, i) => -((turn + 1) * 1000 + i) / 10000)
  const response = ForestCommit.commitResponse(forest, {
    parent,
    message: reply,
    tokens: generated,
    logprobs,
    weightVersions: [`w${turn}`],
    status: "completed",
    rolloutId: 1,
    requestId: `req-${turn}`,
    abortCount: 0,
    wallElapsedS: 1,
    generationElapsedS: 0.5
  })
  return { observation, generated, logprobs, parent, response }
}

const withoutReasoning = (messages: ReadonlyArray<Record<string, unknown>>) =>
  messages.map((m) => {
    if (m["role"] !== "assistant") return m
    const { reasoning_content: _dropped, ...rest } = m
    return rest
  })

describe("a multi-turn Qwen3 tool conversation, built turn by turn", () => {
  it.layer(Tokenizer.Tokenizer.layer)((it) => {
    it.effect("yields a token-exact sample and re-matches the history with and without reasoning", () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer.Tokenizer
        const forest = Forest.make({ sessionId: "qwen3", groupIndex: 0, index: 0, label: null, metadata: {} })

        const t1 = request(tok, forest, [system, user1], assistant1, 0)
        const t2 = request(tok, forest, [system, user1, assistant1, tool1, tool2], assistant2, 1)
        const t3 = request(tok, forest, [system, user1, assistant1, tool1, tool2, assistant2, user2], assistant3, 2)
        const turns = [t1, t2, t3]

        // Each request continued from the previous response: one lineage, one leaf.
        assert.strictEqual(
          t2.parent,
          ForestCommit.commitObservation(forest, {
            parent: t1.response,
            messages: canonical([tool1, tool2]),
            tokens: t2.observation,
            tools,
            chatTemplateKwargs: kwargs,
            rolloutId: 1
          })
        )
        assert.deepStrictEqual(Forest.leaves(forest), [t3.response])
        assert.strictEqual(forest.toleratedMatches, 0)

        // Observation deltas begin right after the previous turn's <|im_end|> with its "\n".
        assert.strictEqual(tok.decode(t2.observation).slice(0, 38), "\n<|im_start|>user\n<tool_response>\nPari")
        assert.strictEqual(t1.generated[t1.generated.length - 1], tok.eosTokenId)
        // The two parallel tool calls were generated in the assistant turn.
        assert.strictEqual(tok.decode(t1.generated).split("<tool_call>").length - 1, 2)

        // Before the second user query the joined tokens decode to exactly the template's rendering.
        const twoTurns = [...t1.observation, ...t1.generated, ...t2.observation, ...t2.generated]
        assert.strictEqual(
          tok.decode(twoTurns) + "\n",
          Result.getOrThrow(tok.renderSync({
            messages: canonical([system, user1, assistant1, tool1, tool2, assistant2]),
            tools,
            chatTemplateKwargs: kwargs,
            addGenerationPrompt: false
          }))
        )

        const [context] = Result.getOrThrow(Export.exportImplicit(forest, { reward: 1 }))
        assert.strictEqual(context?.hash, t3.response)
        const sample = Sample.build(forest, t3.response, (ids) => tok.decode(ids), {
          rolloutId: 1,
          exportName: null,
          reward: 1,
          metadata: {}
        })

        // tokens == concat of every committed observation delta and generated ids
        assert.deepStrictEqual(sample.tokens, turns.flatMap((t) => [...t.observation, ...t.generated]))
        // the prompt is the first observation; the continuation is everything after it
        assert.strictEqual(sample.response_length, sample.tokens.length - t1.observation.length)
        assert.strictEqual(sample.prompt, tok.decode(t1.observation))
        assert.strictEqual(sample.prompt + sample.response, tok.decode(sample.tokens))
        // loss mask 1 exactly on generated ids, logprobs aligned 1:1 (0.0 on observations)
        const expectedMask = [
          ...t1.generated.map(() => 1),
          ...t2.observation.map(() => 0),
          ...t2.generated.map(() => 1),
          ...t3.observation.map(() => 0),
          ...t3.generated.map(() => 1)
        ]
        assert.deepStrictEqual(sample.loss_mask, expectedMask)
        assert.deepStrictEqual(sample.rollout_log_probs, [
          ...t1.logprobs,
          ...t2.observation.map(() => 0),
          ...t2.logprobs,
          ...t3.observation.map(() => 0),
          ...t3.logprobs
        ])
        assert.strictEqual(sample.rollout_log_probs.length, sample.response_length)
        const continuation = sample.tokens.slice(t1.observation.length)
        sample.turn_spans.forEach(([start, end], i) =>
          assert.deepStrictEqual(continuation.slice(start, end), turns[i]?.generated)
        )
        assert.deepStrictEqual(sample.weight_versions, ["w0", "w1", "w2"])
        assert.strictEqual(sample.status, "completed")

        // Re-sending the history reproduces the same parent state.
        const full = [system, user1, assistant1, tool1, tool2, assistant2, user2, assistant3]
        const resend = Matching.match(forest, { messages: canonical(full), tools, chat_template_kwargs: kwargs }, {
          strict: false
        })
        assert.deepStrictEqual([resend.parent, resend.suffix.length, resend.tolerated], [t3.response, 0, false])
        const next = Matching.match(
          forest,
          { messages: canonical([...full, { role: "user", content: "Bye" }]), tools, chat_template_kwargs: kwargs },
          { strict: false }
        )
        assert.strictEqual(next.parent, t3.response)

        // Without reasoning_content (what many clients send back) it still does, and it is counted.
        const dropped = canonical(withoutReasoning(full))
        const tolerant = Matching.match(forest, { messages: dropped, tools, chat_template_kwargs: kwargs }, {
          strict: false
        })
        assert.deepStrictEqual([tolerant.parent, tolerant.suffix.length, tolerant.tolerated, tolerant.toleratedTurns], [
          t3.response,
          0,
          true,
          3
        ])
        assert.strictEqual(forest.toleratedMatches, 3)

        // With strict matching it does not: the exact prefix stops before the first assistant message.
        const strict = Matching.match(forest, { messages: dropped, tools, chat_template_kwargs: kwargs }, {
          strict: true
        })
        assert.notStrictEqual(strict.parent, t3.response)
        assert.strictEqual(strict.suffix.length, full.length - 2)
        assert.isFalse(strict.tolerated)
      }))
  })
})
