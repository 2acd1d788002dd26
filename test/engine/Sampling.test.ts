import { assert, describe, it } from "@effect/vitest"
import { Option, Result } from "effect"
import * as BigramModel from "../../src/engine/BigramModel.ts"
import * as CounterHash from "../../src/engine/CounterHash.ts"
import * as Decoder from "../../src/engine/Decoder.ts"
import * as Sampling from "../../src/engine/Sampling.ts"

const vocabSize = 40
const model = BigramModel.make({ seed: 3, vocabSize, eosTokenId: 39, favouredCount: 6, floorProbability: 0.2 })

/** The whole distribution as a dense array, straight from the model (no Sampling code). */
const dense = (prev: number): Array<number> =>
  Array.from({ length: vocabSize }, (_, id) => BigramModel.probability(model.distribution(prev), id))

/** Brute force: temperature, sort (prob desc, id asc), top-k, top-p, inverse CDF. */
const bruteSample = (prev: number, temperature: number, topK: number, topP: number, u: number) => {
  const p = dense(prev)
  const powered = p.map((x) => Math.pow(x, 1 / temperature))
  const z = powered.reduce((a, b) => a + b, 0)
  const q = powered.map((x) => x / z)
  const order = q.map((x, id) => ({ id, x })).sort((a, b) => b.x - a.x || a.id - b.id)
  const k = topK <= 0 ? vocabSize : topK
  let kept = order.slice(0, k)
  if (topP < 1) {
    const mass = kept.reduce((a, b) => a + b.x, 0)
    let cumulative = 0
    const out = []
    for (const e of kept) {
      out.push(e)
      cumulative += e.x
      if (cumulative >= topP * mass - 1e-12) break
    }
    kept = out
  }
  const mass = kept.reduce((a, b) => a + b.x, 0)
  let cumulative = 0
  for (const e of kept) {
    cumulative += e.x
    if (u * mass < cumulative) return { id: e.id, logprob: Math.log(q[e.id] ?? 0), kept: kept.length }
  }
  const last = kept[kept.length - 1]!
  return { id: last.id, logprob: Math.log(q[last.id] ?? 0), kept: kept.length }
}

describe("Model", () => {
  it("is a probability distribution over the whole vocabulary with eos and a floor", () => {
    for (const prev of [0, 7, 39]) {
      const p = dense(prev)
      assert.closeTo(p.reduce((a, b) => a + b, 0), 1, 1e-12)
      assert.isTrue(p.every((x) => x > 0))
      assert.isTrue((p[39] ?? 0) > 0.03)
    }
  })

  it("is a pure function of the seed and the previous token", () => {
    const again = BigramModel.make({ seed: 3, vocabSize, eosTokenId: 39, favouredCount: 6, floorProbability: 0.2 })
    const other = BigramModel.make({ seed: 4, vocabSize, eosTokenId: 39, favouredCount: 6, floorProbability: 0.2 })
    assert.deepStrictEqual(again.distribution(5), model.distribution(5))
    assert.notDeepEqual(other.distribution(5).ids, model.distribution(5).ids)
  })
})

describe("Sampling", () => {
  const grid = Array.from({ length: 97 }, (_, i) => (i + 0.5) / 97)
  const settings: ReadonlyArray<readonly [number, number, number]> = [
    [1, -1, 1],
    [0.7, -1, 1],
    [1.3, 5, 1],
    [1, -1, 0.5],
    [0.8, 12, 0.9],
    [1, 30, 0.95],
    [2, -1, 0.99]
  ]
  it("matches a brute-force temperature → top-k → top-p inverse CDF over the dense vocabulary", () => {
    for (const [temperature, topK, topP] of settings) {
      for (const prev of [1, 2, 3]) {
        const scaled = Sampling.scale(model.distribution(prev), temperature)
        for (const u of grid) {
          const expected = bruteSample(prev, temperature, topK, topP, u)
          const id = Sampling.sample(scaled, { temperature, topK, topP }, u)
          assert.strictEqual(id, expected.id, `T=${temperature} k=${topK} p=${topP} prev=${prev} u=${u}`)
          assert.closeTo(Sampling.logprob(scaled, id), expected.logprob, 1e-9)
        }
      }
    }
  })

  it("memoizes the scaled distribution per distribution and temperature without changing it", () => {
    // Alternating temperatures: the memo keeps one temperature per distribution and must rescale on a change.
    const small = BigramModel.make({ seed: 5, vocabSize, eosTokenId: 39, favouredCount: 6, floorProbability: 0.2 })
    const temperatures = [1, 0.7, 1, 1e-7, 2, 0.7, 0.7]
    for (let round = 0; round < 3; round++) {
      for (const temperature of temperatures) {
        for (let prev = 0; prev < vocabSize; prev++) {
          const fresh = Sampling.scale(small.distribution(prev), temperature)
          const memo = Decoder.scaledAfter(small, prev, temperature)
          assert.deepStrictEqual(memo, fresh, `prev=${prev} T=${temperature}`)
        }
      }
    }
    // Sampling and scoring through the memo give what scaling each step afresh gives.
    for (const [temperature, topK, topP] of settings) {
      const params = { temperature, topK, topP }
      const ids: Array<number> = []
      let prev = 3
      for (let position = 0; position < 40; position++) {
        const step = Decoder.next(model, params, 11, prev, position)
        const scaled = Sampling.scale(model.distribution(prev), Sampling.effective(params).temperature)
        const u = CounterHash.uniform(11, position)
        assert.strictEqual(step.id, Sampling.sample(scaled, params, u))
        assert.strictEqual(step.logprob, Sampling.logprob(scaled, step.id))
        ids.push(step.id)
        prev = step.id
      }
      const scores = Decoder.score(model, params, 3, ids)
      let previous = 3
      ids.forEach((id, i) => {
        const scaled = Sampling.scale(model.distribution(previous), Sampling.effective(params).temperature)
        assert.strictEqual(scores[i], Sampling.logprob(scaled, id))
        previous = id
      })
    }
  })

  it("is greedy below temperature 1e-6 and reports the temperature-1 logprob", () => {
    const step = Decoder.next(model, { temperature: 0, topK: -1, topP: 1 }, 1, 9, 0)
    const p = dense(9)
    const best = p.indexOf(Math.max(...p))
    assert.strictEqual(step.id, best)
    assert.closeTo(step.logprob, Math.log(p[best] ?? 0), 1e-12)
  })

  it("verifies sampling params with SGLang's messages", () => {
    const problem = (params: Parameters<typeof Sampling.verify>[0]) =>
      Option.getOrUndefined(Result.getFailure(Sampling.verify(params)))
    assert.strictEqual(
      problem({ maxNewTokens: 1, temperature: 1, topP: 0, topK: -1 }),
      "top_p must be in (0, 1], got 0."
    )
    assert.strictEqual(
      problem({ maxNewTokens: 1, temperature: 1, topP: 1, topK: -2 }),
      "top_k must be -1 (disable), or at least 1, got -2."
    )
    assert.strictEqual(
      problem({ maxNewTokens: 1, temperature: -1, topP: 1, topK: 1 }),
      "temperature must be non-negative, got -1."
    )
    assert.strictEqual(
      problem({ maxNewTokens: -1, temperature: 1, topP: 1, topK: 1 }),
      "max_new_tokens must be at least 0, got -1."
    )
    assert.isTrue(Result.isSuccess(Sampling.verify({ maxNewTokens: 0, temperature: 0, topP: 1, topK: -1 })))
  })
})
