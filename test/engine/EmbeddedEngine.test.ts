import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Layer, Metric } from "effect"
import { TestClock } from "effect/testing"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Instruments from "../../layers/observability/Instruments.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as BigramModel from "../../src/engine/BigramModel.ts"
import * as SeededRandom from "../support/SeededRandom.ts"
import * as Sessions from "../support/sessions.ts"

const engineLayer = (options: EmbeddedEngine.EmbeddedEngineOptions) =>
  EmbeddedEngine.EmbeddedEngine.layer({ ...EmbeddedEngine.EmbeddedEngine.instant, ...options }).pipe(
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )

const sampling = (overrides: Partial<Engine.SamplingParams> = {}): Engine.SamplingParams =>
  Sessions.sampling({ seed: 7, ...overrides })

let ridCounter = 0
const request = (
  inputIds: ReadonlyArray<number>,
  overrides: Partial<Engine.SamplingParams> = {},
  extra: Partial<Engine.GenerateRequest> = {}
): Engine.GenerateRequest => ({
  inputIds,
  sampling: sampling(overrides),
  rid: `rid-${String(ridCounter++).padStart(8, "0")}`,
  returnLogprob: true,
  ...extra
})

const prompt = [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]

/** Independent recomputation of q(id | prev) ∝ p^(1/T) over the model's sparse distribution. */
const scaledLogprob = (model: BigramModel.Model, prev: number, id: number, temperature: number): number => {
  const d = model.distribution(prev)
  const z = d.probs.reduce((a, p) => a + Math.pow(p, 1 / temperature), 0) +
    d.floorCount * Math.pow(d.floor, 1 / temperature)
  return Math.log(Math.pow(BigramModel.probability(d, id), 1 / temperature) / z)
}

const conversation = (text: string, turn = 1): Engine.PolicyRequest => ({
  sessionId: "s1",
  turn,
  messages: [{ role: "user", content: text }],
  tools: [],
  chatTemplateKwargs: {},
  promptText: `<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`
})

describe("EmbeddedEngine sampling", () => {
  it.effect("is deterministic for a seed and differs across seeds", () =>
    Effect.gen(function*() {
      const run = (seed: number) =>
        Effect.gen(function*() {
          const engine = yield* Engine.Engine
          return yield* engine.generate(request(prompt, { seed }))
        }).pipe(Effect.provide(engineLayer({ seed: 11 })))
      const a = yield* run(5)
      const b = yield* run(5)
      const c = yield* run(6)
      assert.isAbove(a.outputIds.length, 0)
      assert.deepStrictEqual(b.outputIds, a.outputIds)
      assert.deepStrictEqual(b.logprobs, a.logprobs)
      assert.notDeepEqual(c.outputIds, a.outputIds)
    }))

  it.effect("returns the model's true log-probabilities (temperature 1 and scaled)", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const tokenizer = yield* Tokenizer.Tokenizer
      const model = EmbeddedEngine.EmbeddedEngine.modelFor(tokenizer, { seed: 11 })
      for (const temperature of [1, 0.6]) {
        const result = yield* engine.generate(request(prompt, { temperature, maxNewTokens: 40 }))
        assert.strictEqual(result.logprobs.length, result.outputIds.length)
        let prev = prompt[prompt.length - 1]!
        result.outputIds.forEach((id, i) => {
          const expected = temperature === 1
            ? Math.log(BigramModel.probability(model.distribution(prev), id))
            : scaledLogprob(model, prev, id, temperature)
          assert.closeTo(result.logprobs[i]!, expected, 1e-9)
          prev = id
        })
      }
    }).pipe(Effect.provide(engineLayer({ seed: 11 }))))

  it.effect("ends with the eos id when the model stops, like SGLang with no_stop_trim", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const tokenizer = yield* Tokenizer.Tokenizer
      const result = yield* engine.generate(request(prompt, { maxNewTokens: 1000 }))
      assert.strictEqual(result.outputIds[result.outputIds.length - 1], tokenizer.eosTokenId)
      assert.deepStrictEqual(result.finishReason, { type: "stop", matched: tokenizer.eosTokenId })
      assert.strictEqual(result.promptTokens, prompt.length)
      assert.strictEqual(result.weightVersion, "0")
    }).pipe(Effect.provide(engineLayer({ seed: 1, model: { eosProbability: 0.2 } }))))

  it.effect("stops at max_new_tokens with finish reason length", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const result = yield* engine.generate(request(prompt, { maxNewTokens: 5 }))
      assert.strictEqual(result.outputIds.length, 5)
      assert.deepStrictEqual(result.finishReason, { type: "length", length: 5 })
      const none = yield* engine.generate(request(prompt, { maxNewTokens: 0 }))
      assert.deepStrictEqual(none.outputIds, [])
      assert.deepStrictEqual(none.finishReason, { type: "length", length: 0 })
    }).pipe(Effect.provide(engineLayer({ model: { eosProbability: 0 } }))))

  it.effect("stops on a stop token id and on a stop string, keeping the matching token", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const tokenizer = yield* Tokenizer.Tokenizer
      const full = yield* engine.generate(request(prompt, { maxNewTokens: 30 }))
      const stopId = full.outputIds[6]!
      const firstAt = full.outputIds.indexOf(stopId)
      const byId = yield* engine.generate(request(prompt, { maxNewTokens: 30, stopTokenIds: [stopId] }))
      assert.deepStrictEqual(byId.outputIds, full.outputIds.slice(0, firstAt + 1))
      assert.deepStrictEqual(byId.finishReason, { type: "stop", matched: stopId })

      const word = tokenizer.decode([full.outputIds[10]!]).trim()
      const stop = word.slice(0, Math.max(2, word.length - 1))
      let expectedLength = 0
      while (!tokenizer.decode(full.outputIds.slice(0, expectedLength)).includes(stop)) expectedLength++
      const byString = yield* engine.generate(request(prompt, { maxNewTokens: 30, stop: [stop] }))
      assert.deepStrictEqual(byString.outputIds, full.outputIds.slice(0, expectedLength))
      assert.deepStrictEqual(byString.finishReason, { type: "stop", matched: stop })
      assert.deepStrictEqual(byString.logprobs, full.logprobs.slice(0, expectedLength))
    }).pipe(Effect.provide(engineLayer({ model: { eosProbability: 0 } }))))

  it.effect("is greedy at temperature 0", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const tokenizer = yield* Tokenizer.Tokenizer
      const model = EmbeddedEngine.EmbeddedEngine.modelFor(tokenizer, {})
      const result = yield* engine.generate(request(prompt, { temperature: 0, maxNewTokens: 8, seed: 1 }))
      const other = yield* engine.generate(request(prompt, { temperature: 0, maxNewTokens: 8, seed: 2 }))
      assert.deepStrictEqual(other.outputIds, result.outputIds)
      let prev = prompt[prompt.length - 1]!
      for (const id of result.outputIds) {
        assert.strictEqual(id, model.distribution(prev).ids[0])
        prev = id
      }
    }).pipe(Effect.provide(engineLayer({}))))

  it.effect("rejects prompt + max_new_tokens reaching the context window with SGLang's wording", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const error = yield* engine.generate(request(prompt, { maxNewTokens: 11 })).pipe(Effect.flip)
      assert.strictEqual(error._tag, "ContextLengthError")
      assert.include(error.message, "Requested token count exceeds the model's maximum context length of 20 tokens")
      assert.include(
        error.message,
        "You requested a total of 20 tokens: 9 tokens from the input messages and 11 tokens"
      )
      const ok = yield* engine.generate(request(prompt, { maxNewTokens: 10 }))
      assert.isAtMost(ok.outputIds.length, 10)
      const invalid = yield* engine.generate(request([], {})).pipe(Effect.flip)
      assert.strictEqual(invalid.message, "input_ids cannot be empty")
    }).pipe(Effect.provide(engineLayer({ maxContextLength: 20 }))))

  it.effect("advances the weight version on updateWeights and reports it per generation", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      assert.strictEqual(yield* engine.weightVersion, "0")
      assert.strictEqual(yield* engine.updateWeights(), "1")
      assert.strictEqual((yield* engine.generate(request(prompt, { maxNewTokens: 2 }))).weightVersion, "1")
      assert.strictEqual(yield* engine.updateWeights("step-9"), "step-9")
      assert.strictEqual(yield* engine.weightVersion, "step-9")
    }).pipe(Effect.provide(engineLayer({}))))

  it.effect("holds a request while paused; aborted while held, it ends with no tokens on the paused version", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      yield* engine.pauseGeneration("abort")
      const held = request(prompt, { maxNewTokens: 4 })
      const fiber = yield* engine.generate(held).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      yield* engine.abort(held.rid)
      assert.deepStrictEqual(yield* Fiber.join(fiber), {
        outputIds: [],
        logprobs: [],
        finishReason: { type: "abort", message: "Aborted while generation was paused" },
        promptTokens: prompt.length,
        cachedTokens: 0,
        weightVersion: "0"
      })
    }).pipe(Effect.provide(engineLayer({}))))

  it.effect("a request held while paused runs once resumed, as one sent after the resume; a rid still running is refused", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const heldNow = Effect.map(Metric.value(Instruments.generationsHeld), (state) => state.value)
      const before = yield* heldNow
      yield* engine.pauseGeneration("abort")
      const held = request(prompt, { maxNewTokens: 4, seed: 7 })
      const fiber = yield* engine.generate(held).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      assert.isUndefined(fiber.pollUnsafe())
      // Held, it is counted (relax_agentic_generations_held) until the resume lets it run.
      assert.strictEqual((yield* heldNow) - before, 1)
      assert.strictEqual(yield* engine.resumeGeneration("v1"), "v1")
      yield* Effect.yieldNow
      assert.strictEqual(yield* heldNow, before)
      // Decoding takes time on the clock here.
      const finish = <A, E>(fiber: Fiber.Fiber<A, E>) =>
        Effect.andThen(TestClock.adjust("10 seconds"), Fiber.join(fiber))
      const resumed = yield* finish(fiber)
      const after = yield* finish(
        yield* engine.generate({ ...request(prompt, { maxNewTokens: 4, seed: 7 }), rid: held.rid }).pipe(
          Effect.forkChild
        )
      )
      // The same tokens on the same version (the second one finds the first's sequence cached: no Session here).
      const { cachedTokens: _first, ...resumedOutput } = resumed
      const { cachedTokens: _second, ...afterOutput } = after
      assert.deepStrictEqual(resumedOutput, afterOutput)
      assert.strictEqual(resumed.weightVersion, "v1")
      assert.strictEqual(resumed.outputIds.length, 4)
      // A rid is refused while a generation of it runs (its decoding waits on the clock here), and free again after.
      const slow = request(prompt, { maxNewTokens: 2 })
      const running = yield* engine.generate(slow).pipe(Effect.forkChild)
      yield* Effect.yieldNow
      const refused = yield* Effect.flip(engine.generate({ ...request(prompt), rid: slow.rid }))
      assert.strictEqual(refused.message, `rid ${slow.rid} is already running; rids must be unique`)
      yield* finish(running)
      const again = yield* engine.generate({ ...request(prompt, { maxNewTokens: 1 }), rid: slow.rid }).pipe(
        Effect.forkChild
      )
      assert.strictEqual((yield* finish(again)).outputIds.length, 1)
    }).pipe(Effect.provide(engineLayer({ decodeTokensPerSecond: 100 }))))

  it.effect("reports the shared prefix with the session's previous sequence as cached tokens", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const first = yield* engine.generate(request(prompt, { maxNewTokens: 4 }, { sessionId: "a" }))
      assert.strictEqual(first.cachedTokens, 0)
      const next = [...prompt, ...first.outputIds, 151645, 198]
      const second = yield* engine.generate(request(next, { maxNewTokens: 4 }, { sessionId: "a" }))
      assert.strictEqual(second.cachedTokens, prompt.length + first.outputIds.length)
    }).pipe(Effect.provide(engineLayer({ model: { eosProbability: 0 } }))))

  it.effect("forgets a closed session's sequence, also one its running generation would leave", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      // Prefill takes simulated time: a generation runs until the TestClock moves.
      const generate = (ids: ReadonlyArray<number>, sessionId: string, closeMeanwhile = false) =>
        Effect.gen(function*() {
          const fiber = yield* engine.generate(request(ids, { maxNewTokens: 4 }, { sessionId })).pipe(Effect.forkChild)
          yield* Effect.yieldNow
          if (closeMeanwhile) yield* engine.closeSession(sessionId)
          yield* TestClock.adjust("10 seconds")
          return yield* Fiber.join(fiber)
        })
      const first = yield* generate(prompt, "a")
      const next = [...prompt, ...first.outputIds, 151645, 198]
      assert.strictEqual((yield* generate(next, "a")).cachedTokens, next.length - 2)
      yield* engine.closeSession("a")
      assert.strictEqual((yield* generate(next, "a")).cachedTokens, 0)
      // Closed while its generation runs: it leaves no sequence behind.
      yield* engine.closeSession("a")
      yield* generate(prompt, "a", true)
      assert.strictEqual((yield* generate(next, "a")).cachedTokens, 0)
      // Other sessions keep theirs.
      const b = yield* generate(prompt, "b")
      yield* engine.closeSession("a")
      const bNext = [...prompt, ...b.outputIds, 151645, 198]
      assert.strictEqual((yield* generate(bNext, "b")).cachedTokens, prompt.length + b.outputIds.length)
    }).pipe(Effect.provide(engineLayer({ prefillTokensPerSecond: 100, model: { eosProbability: 0 } }))))

  it.effect("counts cached tokens against the whole previous sequence over next turns, retries, edits and rewinds", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const random = SeededRandom.ints(99)
      const shared = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => {
        let i = 0
        while (i < a.length && i < b.length && a[i] === b[i]) i++
        return i
      }
      // The reference: the previous request's prompt ++ output, compared id by id.
      let previous: ReadonlyArray<number> = []
      for (let turn = 0; turn < 60; turn++) {
        const delta = Array.from({ length: 1 + random(5) }, () => 200 + random(50))
        const kind = random(4)
        const prompt = turn === 0 || previous.length < 2
          ? delta
          : kind === 0
          ? previous.slice(0, 1 + random(previous.length - 1)).concat(delta) // a rewind, then new ids
          : kind === 1
          ? previous.map((id, i) => (i === random(previous.length) ? id + 1 : id)) // an edit inside
          : kind === 2
          ? previous.slice(0, previous.length - 1) // a shorter prompt
          : [...previous, ...delta] // the usual next turn
        const result = yield* engine.generate(request(prompt, { maxNewTokens: random(4) }, { sessionId: "s" }))
        assert.strictEqual(result.cachedTokens, Math.min(shared(prompt, previous), prompt.length - 1), `turn ${turn}`)
        previous = [...prompt, ...result.outputIds]
      }
    }).pipe(Effect.provide(engineLayer({}))))
})

describe("EmbeddedEngine latency and abort (TestClock)", () => {
  const timed = { prefillTokensPerSecond: 900, decodeTokensPerSecond: 10, model: { eosProbability: 0 } }

  it.effect("abort mid-generation returns exactly the tokens produced so far", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const instantEngine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
        ...timed,
        ...EmbeddedEngine.EmbeddedEngine.instant
      })
      const reference = yield* instantEngine.generate(request(prompt, { maxNewTokens: 20 }))
      const rid = "abort-me-0000001"
      const fiber = yield* engine.generate(request(prompt, { maxNewTokens: 20 }, { rid })).pipe(Effect.forkChild)
      // prefill 9 / 900 s = 10 ms, then one token per 100 ms: 3 tokens by 310 ms, the 4th due at 410 ms.
      yield* TestClock.adjust("310 millis")
      yield* engine.abort(rid)
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(result.outputIds, reference.outputIds.slice(0, 3))
      assert.deepStrictEqual(result.logprobs, reference.logprobs.slice(0, 3))
      assert.strictEqual(result.finishReason.type, "abort")
    }).pipe(Effect.provide(engineLayer(timed))))

  it.effect("abort during prefill returns an empty output; abort of an unknown rid is a no-op", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      yield* engine.abort("nobody-000000000")
      const fiber = yield* engine.generate(request(prompt, {}, { rid: "prefill-00000001" })).pipe(Effect.forkChild)
      yield* TestClock.adjust("5 millis")
      yield* engine.abort("prefill-00000001")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(result.outputIds, [])
      assert.deepStrictEqual(result.finishReason, { type: "abort", message: "Aborted" })
    }).pipe(Effect.provide(engineLayer(timed))))

  it.effect("takes prefill plus one decode interval per token on the clock", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const fiber = yield* engine.generate(request(prompt, { maxNewTokens: 5 })).pipe(Effect.forkChild)
      yield* TestClock.adjust("509 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.outputIds.length, 5)
    }).pipe(Effect.provide(engineLayer(timed))))

  it.effect("interrupting the caller stops the generation and frees its rid", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const rid = "interrupted-0001"
      const fiber = yield* engine.generate(request(prompt, {}, { rid })).pipe(Effect.forkChild)
      yield* TestClock.adjust("150 millis")
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
      const again = yield* engine.generate(request(prompt, { maxNewTokens: 1 }, { rid })).pipe(Effect.forkChild)
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(again)).outputIds.length, 1)
    }).pipe(Effect.provide(engineLayer(timed))))
})

describe("EmbeddedEngine partial rollout: abort and resume (TestClock)", () => {
  const timed = { prefillTokensPerSecond: 900, decodeTokensPerSecond: 10, model: { eosProbability: 0.05 } }

  /** Generate `maxNewTokens` with aborts after the given elapsed times, resuming from prompt ++ partial each time. */
  const interrupted = (
    maxNewTokens: number,
    abortAfterMillis: ReadonlyArray<number>,
    extra: Partial<Engine.GenerateRequest> = {},
    stop: ReadonlyArray<string> = []
  ) =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const ids: Array<number> = []
      const logprobs: Array<number> = []
      const finishes: Array<string> = []
      for (let attempt = 0;; attempt++) {
        const rid = `resume-${String(attempt).padStart(9, "0")}`
        const fiber = yield* engine.generate(
          request([...prompt, ...ids], { maxNewTokens: maxNewTokens - ids.length, stop }, {
            rid,
            resumedTokens: ids.length,
            ...extra
          })
        ).pipe(Effect.forkChild)
        // Small clock steps, so a policy's promise settles between them.
        const after = abortAfterMillis[attempt]
        if (after !== undefined) {
          for (let t = 0; t < after; t += 10) yield* TestClock.adjust("10 millis")
          yield* engine.abort(rid)
        } else {
          while (fiber.pollUnsafe() === undefined) yield* TestClock.adjust("1 second")
        }
        const result = yield* Fiber.join(fiber)
        ids.push(...result.outputIds)
        logprobs.push(...result.logprobs)
        finishes.push(result.finishReason.type)
        if (result.finishReason.type !== "abort") return { ids, logprobs, finishes, last: result.finishReason }
      }
    })

  const interruptedWithStop = (
    maxNewTokens: number,
    abortAfterMillis: ReadonlyArray<number>,
    stop: ReadonlyArray<string>,
    say: () => Engine.PolicyRequest
  ) => interrupted(maxNewTokens, abortAfterMillis, { conversation: say }, stop)

  it.effect("a generation aborted twice and resumed from prompt ++ partial yields exactly the uninterrupted tokens", () =>
    Effect.gen(function*() {
      const whole = yield* interrupted(40, [])
      const resumed = yield* interrupted(40, [310, 520])
      assert.deepStrictEqual(resumed.finishes.slice(0, 2), ["abort", "abort"])
      assert.isAbove(whole.ids.length, 8)
      assert.deepStrictEqual(resumed.ids, whole.ids)
      assert.deepStrictEqual(resumed.logprobs, whole.logprobs)
      assert.deepStrictEqual(resumed.last, whole.last)
    }).pipe(Effect.provide(engineLayer(timed))))

  it.effect("a resumed scripted policy continues its text, and a stop string spanning the boundary still stops it", () =>
    Effect.gen(function*() {
      const tokenizer = yield* Tokenizer.Tokenizer
      const say = { conversation: () => conversation("hi") }
      const whole = yield* interrupted(64, [], say)
      const resumed = yield* interrupted(64, [410], say)
      assert.deepStrictEqual(resumed.finishes[0], "abort")
      assert.deepStrictEqual(resumed.ids, whole.ids)
      assert.deepStrictEqual(resumed.logprobs, whole.logprobs)
      assert.strictEqual(tokenizer.decode(whole.ids), "Echo: hi there, friend<|im_end|>")
      // The abort lands after a few tokens, inside "there, fri": the stop string spans the two attempts.
      const stopped = yield* interruptedWithStop(64, [], ["re, fri"], say.conversation)
      const stoppedResumed = yield* interruptedWithStop(64, [510], ["re, fri"], say.conversation)
      assert.strictEqual(stoppedResumed.finishes[0], "abort")
      assert.include(tokenizer.decode(stopped.ids), "re, fri")
      assert.deepStrictEqual(stopped.last, { type: "stop", matched: "re, fri" })
      assert.deepStrictEqual(stoppedResumed.ids, stopped.ids)
      assert.deepStrictEqual(stoppedResumed.last, stopped.last)
    }).pipe(
      Effect.provide(engineLayer({ ...timed, policy: (r) => `Echo: ${String(r.messages[0]?.content)} there, friend` }))
    ))

  it.effect("a weight update aborts running generations; each attempt reports the version it ran on", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const fiber = yield* engine.generate(request(prompt, { maxNewTokens: 30 }, { rid: "update-000000001" })).pipe(
        Effect.forkChild
      )
      yield* TestClock.adjust("310 millis")
      assert.strictEqual(yield* engine.updateWeights(), "1")
      const partial = yield* Fiber.join(fiber)
      assert.strictEqual(partial.finishReason.type, "abort")
      assert.strictEqual(partial.outputIds.length, 3)
      assert.strictEqual(partial.weightVersion, "0")
      const rest = yield* engine.generate(
        request([...prompt, ...partial.outputIds], { maxNewTokens: 27 }, { rid: "update-000000002", resumedTokens: 3 })
      ).pipe(Effect.forkChild)
      yield* TestClock.adjust("1 hour")
      assert.strictEqual((yield* Fiber.join(rest)).weightVersion, "1")
      assert.strictEqual(yield* engine.updateWeights("step-7"), "step-7")
      assert.strictEqual(yield* engine.weightVersion, "step-7")
    }).pipe(Effect.provide(engineLayer({ ...timed, model: { eosProbability: 0 } }))))

  it.effect("a caller that resumes at once when an update aborts its generation is not aborted by that update", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const whole = yield* engine.generate(request(prompt, { maxNewTokens: 12 }, { rid: "whole-0000000001" })).pipe(
        Effect.forkChild
      )
      yield* TestClock.adjust("1 hour")
      const uninterrupted = yield* Fiber.join(whole)
      // The caller starts its next attempt as soon as the aborted one returns, which can be while the update is still
      // aborting: that attempt must run to its end.
      const resuming = Effect.gen(function*() {
        const ids: Array<number> = []
        const finishes: Array<string> = []
        const versions: Array<string> = []
        for (let attempt = 0; attempt < 5; attempt++) {
          const result = yield* engine.generate(
            request([...prompt, ...ids], { maxNewTokens: 12 - ids.length }, {
              rid: `resuming-${String(attempt).padStart(7, "0")}`,
              resumedTokens: ids.length
            })
          )
          ids.push(...result.outputIds)
          finishes.push(result.finishReason.type)
          versions.push(result.weightVersion)
          if (result.finishReason.type !== "abort") break
        }
        return { ids, finishes, versions }
      })
      const fiber = yield* Effect.forkChild(resuming)
      yield* TestClock.adjust("310 millis")
      yield* engine.updateWeights()
      yield* TestClock.adjust("1 hour")
      const resumed = yield* Fiber.join(fiber)
      assert.deepStrictEqual(resumed.finishes, ["abort", "length"])
      assert.deepStrictEqual(resumed.ids, uninterrupted.outputIds)
      // The aborted attempt ran on the old weights; the one that resumed inside the update runs on the new ones.
      assert.deepStrictEqual(resumed.versions, ["0", "1"])
    }).pipe(Effect.provide(engineLayer({ ...timed, model: { eosProbability: 0 } }))))
})

describe("EmbeddedEngine policy (--embedded-policy)", () => {
  const policy = (request: Engine.PolicyRequest) =>
    `Echo: ${String(request.messages[0]?.content)} <tool_call>\n{"name": "x"}\n</tool_call>`

  it.effect("emits the policy text as tokens plus eos, round-tripping through the tokenizer, scored by the model", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const tokenizer = yield* Tokenizer.Tokenizer
      const model = EmbeddedEngine.EmbeddedEngine.modelFor(tokenizer, { seed: 4 })
      const result = yield* engine.generate(request(prompt, {}, { conversation: () => conversation("héllo 世界") }))
      const text = `Echo: héllo 世界 <tool_call>\n{"name": "x"}\n</tool_call>`
      assert.deepStrictEqual(result.outputIds, [...tokenizer.encode(text), tokenizer.eosTokenId])
      assert.strictEqual(tokenizer.decode(result.outputIds), `${text}<|im_end|>`)
      assert.deepStrictEqual(result.finishReason, { type: "stop", matched: tokenizer.eosTokenId })
      let prev = prompt[prompt.length - 1]!
      result.outputIds.forEach((id, i) => {
        assert.closeTo(result.logprobs[i]!, Math.log(BigramModel.probability(model.distribution(prev), id)), 1e-9)
        prev = id
      })
    }).pipe(Effect.provide(engineLayer({ seed: 4, policy }))))

  it.effect("truncates the policy text by max_new_tokens, stop strings and stop ids", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const tokenizer = yield* Tokenizer.Tokenizer
      const full = [...tokenizer.encode(`Echo: hi <tool_call>\n{"name": "x"}\n</tool_call>`), tokenizer.eosTokenId]
      const byLength = yield* engine.generate(
        request(prompt, { maxNewTokens: 3 }, { conversation: () => conversation("hi") })
      )
      assert.deepStrictEqual(byLength.outputIds, full.slice(0, 3))
      assert.deepStrictEqual(byLength.finishReason, { type: "length", length: 3 })
      const byString = yield* engine.generate(
        request(prompt, { stop: ["<tool_call>"] }, { conversation: () => conversation("hi") })
      )
      assert.strictEqual(tokenizer.decode(byString.outputIds), "Echo: hi <tool_call>")
      assert.deepStrictEqual(byString.finishReason, { type: "stop", matched: "<tool_call>" })
      const toolCallId = tokenizer.tokenToId("<tool_call>")!
      const byId = yield* engine.generate(
        request(prompt, { stopTokenIds: [toolCallId] }, { conversation: () => conversation("hi") })
      )
      assert.strictEqual(byId.outputIds[byId.outputIds.length - 1], toolCallId)
      assert.deepStrictEqual(byId.finishReason, { type: "stop", matched: toolCallId })
    }).pipe(Effect.provide(engineLayer({ policy }))))

  it.effect("samples from the model when the request carries no conversation", () =>
    Effect.gen(function*() {
      const engine = yield* Engine.Engine
      const result = yield* engine.generate(request(prompt, { maxNewTokens: 4 }))
      assert.strictEqual(result.outputIds.length, 4)
    }).pipe(Effect.provide(engineLayer({ policy, model: { eosProbability: 0 } }))))

  it.effect("loads a policy from a .ts hook module and uses it", () =>
    Effect.gen(function*() {
      const loaded = yield* EmbeddedEngine.EmbeddedEngine.loadPolicy(
        "fixtures/echoPolicy.ts#reply",
        import.meta.dirname
      )
      const tokenizer = yield* Tokenizer.Tokenizer
      const engine = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
        ...EmbeddedEngine.EmbeddedEngine.instant,
        policy: loaded
      })
      const first = yield* engine.generate(request(prompt, {}, { conversation: () => conversation("ping", 0) }))
      assert.strictEqual(
        tokenizer.decode(first.outputIds),
        `<tool_call>\n{"name": "echo", "arguments": {"text": "ping"}}\n</tool_call><|im_end|>`
      )
      const second = yield* engine.generate(request(prompt, {}, { conversation: () => conversation("pong", 1) }))
      assert.strictEqual(tokenizer.decode(second.outputIds), "You said: pong<|im_end|>")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))

  it.effect("reports a policy that returns no string, and a hook export that is not a function", () =>
    Effect.gen(function*() {
      const bad = yield* EmbeddedEngine.EmbeddedEngine.loadPolicy(
        "fixtures/echoPolicy.ts#notAString",
        import.meta.dirname
      )
      const tokenizer = yield* Tokenizer.Tokenizer
      const engine = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
        ...EmbeddedEngine.EmbeddedEngine.instant,
        policy: bad
      })
      const error = yield* engine.generate(request(prompt, {}, { conversation: () => conversation("x") })).pipe(
        Effect.flip
      )
      assert.strictEqual(error._tag, "EngineError")
      assert.include(error.message, "--embedded-policy failed for session s1 turn 1")
      assert.include(error.message, "returned number, expected the assistant text as a string")
      const loadError = yield* EmbeddedEngine.EmbeddedEngine.loadPolicy(
        "fixtures/echoPolicy.ts#notAFunction",
        import.meta.dirname
      )
        .pipe(Effect.flip)
      assert.strictEqual(loadError._tag, "HookLoadError")
      assert.include(loadError.message, "--embedded-policy")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})

describe("EmbeddedEngine timeline: one wait a generation against one a token (TestClock)", () => {
  interface Attempt {
    readonly key: string
    readonly result: Engine.GenerateResult
  }

  /**
   * 12 Sessions take 6 turns each (sampled and scripted output, stop strings, resumed attempts after every abort),
   * with 2.25 ms of thought between turns, while a trainer updates the weights every 37.3217 ms: an update aborts
   * every running generation. Due times are the attempts' starts plus multiples of 0.25 ms (prefill) and 10 ms
   * (decode), and no update lands on one, so both timelines see the same tokens appear before each abort.
   */
  const scenario = (perTokenWaits: boolean) =>
    Effect.gen(function*() {
      const engine = yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
        seed: 3,
        prefillTokensPerSecond: 4000,
        decodeTokensPerSecond: 100,
        model: { eosProbability: 0.04 },
        policy: (r) => `Turn ${r.turn} of ${String(r.messages[0]?.content)}: some words, then more words here.`,
        perTokenWaits
      })
      const attempts: Array<Attempt> = []
      const session = (s: number) =>
        Effect.gen(function*() {
          const history = [...prompt, 1000 + s]
          for (let turn = 0; turn < 6; turn++) {
            const pending: Array<number> = []
            const scripted = (s + turn) % 2 === 0
            for (let attempt = 0;; attempt++) {
              const key = `s${s}-t${turn}-a${attempt}`
              const result = yield* engine.generate({
                inputIds: [...history, ...pending],
                sampling: sampling({
                  seed: s * 100 + turn,
                  maxNewTokens: 24 - pending.length,
                  stop: s % 4 === 1 ? ["er"] : []
                }),
                rid: `timeline-${key}`,
                returnLogprob: true,
                resumedTokens: pending.length,
                sessionId: `s${s}`,
                conversation: scripted ? () => conversation(`session ${s}`, turn) : undefined
              })
              attempts.push({ key, result })
              pending.push(...result.outputIds)
              if (result.finishReason.type !== "abort") break
            }
            history.push(...pending, 151645, 198, 151644, 872, 198, 2000 + turn)
            yield* Effect.sleep(Duration.micros(2250n))
          }
        })
      const sessions = yield* Effect.forEach(
        Array.from({ length: 12 }, (_, s) => s),
        (s) => Effect.forkChild(session(s))
      )
      const trainer = yield* Effect.forkChild(
        Effect.forever(Effect.andThen(Effect.sleep(Duration.nanos(37_321_700n)), engine.updateWeights()))
      )
      while (sessions.some((fiber) => fiber.pollUnsafe() === undefined)) yield* TestClock.adjust("10 millis")
      yield* Fiber.interrupt(trainer)
      return new Map(attempts.map((a) => [a.key, a.result]))
    })

  it.effect("aborted and finished attempts are the same, token for token, on both timelines", () =>
    Effect.gen(function*() {
      const once = yield* scenario(false)
      const perToken = yield* scenario(true)
      const aborted = [...once.values()].filter((r) => r.finishReason.type === "abort")
      assert.isAbove(aborted.length, 20)
      assert.isAbove(aborted.filter((r) => r.outputIds.length > 0).length, 10)
      assert.deepStrictEqual([...once.keys()].sort(), [...perToken.keys()].sort())
      for (const [key, result] of once) assert.deepStrictEqual(result, perToken.get(key), key)
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)))
})
