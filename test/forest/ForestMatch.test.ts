/**
 * Property tests of `Matching.match` against the reference rule (docs/sessionforest.md "Matching a request") on random
 * forests and requests.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as StateHash from "../../src/forest/StateHash.ts"
import * as PythonJson from "../../src/json/PythonJson.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as SeededRandom from "../support/SeededRandom.ts"

const seeded = SeededRandom.make
type Random = ReturnType<typeof seeded>

const toolF: Canonical.Tool = { type: "function", function: { name: "f", parameters: { type: "object" } } }
const toolG: Canonical.Tool = { type: "function", function: { name: "g", parameters: { type: "object" } } }
const toolSets: ReadonlyArray<ReadonlyArray<Canonical.Tool>> = [[], [toolF], [toolF, toolG]]
const kwargSets: ReadonlyArray<Canonical.TemplateKwargs> = [{}, { enable_thinking: false }]

/** Every object's keys in reverse order: the same Python JSON, so the same state. */
const reordered = <A>(value: A): A => {
  const go = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(go)
      : v !== null && typeof v === "object"
      ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, go(x)]))
      : v
  return go(value) as A
}

// A small alphabet, so that equal messages, shared first messages and near misses are common.
const observationPool: ReadonlyArray<Canonical.Message> = [
  { role: "system", content: "s" },
  { role: "user", content: "u0" },
  { role: "user", content: "u1" },
  { role: "user", content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "data:x" } }] },
  { role: "tool", content: "t0", tool_call_id: "c0" },
  { role: "tool", content: "t1", tool_call_id: "c0" }
]

const assistantMessage = (random: Random): Canonical.Message => {
  const content = random.pick(["a0", "a1", ""])
  const calls = random.chance(0.3)
    ? { tool_calls: [{ id: "c0", type: "function", function: { name: "f", arguments: "{\"x\":1}" } }] }
    : {}
  const reasoning = random.pick(["none", "r0", "r1"])
  return reasoning === "none"
    ? { role: "assistant", content, ...calls }
    : { role: "assistant", content, reasoning_content: reasoning, ...calls }
}

const anyMessage = (random: Random): Canonical.Message => {
  const message = random.chance(0.25) ? assistantMessage(random) : random.pick(observationPool)
  return random.chance(0.2) ? reordered(message) : message
}

const messagesOf = (random: Random, min: number, max: number): Array<Canonical.Message> =>
  Array.from({ length: min + random.int(max - min + 1) }, () => anyMessage(random))

interface Context {
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly kwargs: Canonical.TemplateKwargs
}

const contextOf = (forest: Forest.Forest, hash: string): Context => ({
  tools: Forest.subtreeTools(forest, hash),
  kwargs: Forest.subtreeKwargs(forest, hash)
})

const stateOf = (messages: ReadonlyArray<Canonical.Message>, context: Context): Canonical.State => ({
  messages,
  tools: context.tools,
  chat_template_kwargs: context.kwargs
})

let requestIds = 0
const respond = (forest: Forest.Forest, parent: string, message: Canonical.Message): string =>
  ForestCommit.commitResponse(forest, {
    parent,
    message,
    tokens: [1, 2],
    logprobs: [-0.5, -0.25],
    weightVersions: ["v"],
    status: "completed",
    rolloutId: 0,
    requestId: `rid-${requestIds++}`,
    abortCount: 0,
    wallElapsedS: 0,
    generationElapsedS: 0
  })

const observe = (forest: Forest.Forest, parent: string, messages: ReadonlyArray<Canonical.Message>, context: Context) =>
  ForestCommit.commitObservation(forest, {
    parent,
    messages,
    tokens: [3],
    tools: context.tools,
    chatTemplateKwargs: context.kwargs,
    rolloutId: 0
  })

/**
 * A random forest: several subtrees (tools/kwargs contexts), branches, multi-message observations, observations
 * that share first messages with a sibling ([m1] next to [m1, m2]), responses with and without reasoning (also
 * equal but for reasoning), and assistant messages inside observations.
 */
const randomForest = (random: Random): Forest.Forest => {
  const forest = Forest.make({
    sessionId: "prop",
    groupIndex: 0,
    index: 0,
    label: null,
    metadata: {},
    chatTemplateKwargs: random.pick(kwargSets)
  })
  const steps = 10 + random.int(40)
  for (let step = 0; step < steps; step++) {
    const at = random.pick([...forest.nodes.values()])
    const atRoot = at.parent === null
    const context: Context = atRoot
      ? { tools: random.pick(toolSets), kwargs: random.chance(0.5) ? forest.baseKwargs : random.pick(kwargSets) }
      : contextOf(forest, at.hash)
    const history = Forest.fullMessages(forest, at.hash)
    if (random.chance(atRoot ? 0.15 : 0.45)) {
      const message = assistantMessage(random)
      // Committing a state that already exists as an observation is an invariant break, not a test case.
      const hash = StateHash.ofState(stateOf([...history, message], contextOf(forest, at.hash)))
      if (!forest.nodes.has(hash)) respond(forest, at.hash, message)
      continue
    }
    const sibling = [...forest.nodes.values()].find((n) => n.parent === at.hash && n.kind === "obs")
    const messages = sibling !== undefined && random.chance(0.4)
      ? [...sibling.messages.slice(0, 1 + random.int(sibling.messages.length)), ...messagesOf(random, 0, 2)]
      : messagesOf(random, 1, 3)
    if (messages.length === 0) continue
    const hash = StateHash.ofState(stateOf([...history, ...messages], context))
    if (!forest.nodes.has(hash)) observe(forest, at.hash, messages, context)
  }
  return forest
}

/** A random request around a committed state: itself, a prefix, an extension, a divergence, a changed context… */
const randomRequest = (random: Random, forest: Forest.Forest): Canonical.State => {
  const target = random.pick([...forest.nodes.keys()])
  const context = contextOf(forest, target)
  const history = [...Forest.fullMessages(forest, target)]
  switch (random.int(8)) {
    case 0:
      return stateOf(history, context)
    case 1:
      return stateOf(history.slice(0, random.int(history.length + 1)), context)
    case 2:
      return stateOf([...history, ...messagesOf(random, 1, 3)], context)
    case 3: {
      const at = random.int(history.length + 1)
      return stateOf([...history.slice(0, at), anyMessage(random), ...history.slice(at + 1)], context)
    }
    case 4:
      return stateOf(history, { tools: random.pick(toolSets), kwargs: random.pick(kwargSets) })
    case 5:
      return stateOf([...history.map(Canonical.withoutReasoning), ...messagesOf(random, 0, 2)], context)
    case 6:
      return stateOf(history.map((m) => (random.chance(0.5) ? Canonical.withoutReasoning(m) : reordered(m))), context)
    default:
      return stateOf(messagesOf(random, 1, 6), context)
  }
}

interface Found {
  readonly parent: string
  readonly suffixLength: number
  readonly toleratedTurns: number
}

/** The rule of docs/sessionforest.md "Matching a request": for k = n..1, is hash(messages[:k]) a committed state? */
const referenceMatch = (forest: Forest.Forest, state: Canonical.State): Found => {
  for (let k = state.messages.length; k >= 1; k--) {
    const hash = StateHash.ofState({ ...state, messages: state.messages.slice(0, k) })
    if (forest.nodes.has(hash)) return { parent: hash, suffixLength: state.messages.length - k, toleratedTurns: 0 }
  }
  return { parent: forest.root, suffixLength: state.messages.length, toleratedTurns: 0 }
}

const samePythonJson = (a: unknown, b: unknown): boolean => PythonJson.dumpsJs(a) === PythonJson.dumpsJs(b)

/**
 * The tolerant rule spelled out with reference hashes only: the longest exact prefix; then, while the next message
 * is an assistant message without reasoning, the latest committed response child of the matched state that equals
 * it but for its reasoning (and is a state of the request's tools/kwargs), followed again by the longest exact
 * continuation of that response's committed history.
 */
const tolerantOracle = (forest: Forest.Forest, state: Canonical.State): Found => {
  const messages = state.messages
  const hashOf = (history: ReadonlyArray<Canonical.Message>) => StateHash.ofState({ ...state, messages: history })
  let parent = forest.root
  let position = 0
  let toleratedTurns = 0
  for (;;) {
    const committed = Forest.fullMessages(forest, parent)
    for (let k = messages.length; k > position; k--) {
      const hash = hashOf([...committed, ...messages.slice(position, k)])
      if (forest.nodes.has(hash)) {
        parent = hash
        position = k
        break
      }
    }
    const next = messages[position]
    if (next === undefined || next.role !== "assistant" || next.reasoning_content !== undefined) break
    let tolerated: string | undefined
    for (const n of forest.nodes.values()) {
      if (n.kind !== "resp" || n.parent !== parent || n.message.reasoning_content === undefined) continue
      if (!samePythonJson(Canonical.withoutReasoning(n.message), next)) continue
      if (hashOf(Forest.fullMessages(forest, n.hash)) === n.hash) tolerated = n.hash
    }
    if (tolerated === undefined) break
    toleratedTurns++
    parent = tolerated
    position++
  }
  return { parent, suffixLength: messages.length - position, toleratedTurns }
}

const matched = (forest: Forest.Forest, state: Canonical.State, strict: boolean): Found => {
  const before = forest.toleratedMatches
  const m = Matching.match(forest, state, { strict })
  assert.strictEqual(forest.toleratedMatches - before, m.toleratedTurns, "every tolerated turn is counted")
  assert.strictEqual(m.tolerated, m.toleratedTurns > 0)
  assert.isTrue(samePythonJson(m.suffix, state.messages.slice(state.messages.length - m.suffix.length)))
  return { parent: m.parent, suffixLength: m.suffix.length, toleratedTurns: m.toleratedTurns }
}

const describeCase = (seed: number, state: Canonical.State): string => `seed ${seed}: ${PythonJson.dumpsJs(state)}`

describe("prefix matching on random forests", () => {
  it("with strict matching, finds exactly the reference's longest committed prefix", () => {
    let deeper = 0
    for (let seed = 1; seed <= 150; seed++) {
      const random = seeded(seed)
      const forest = randomForest(random)
      for (let i = 0; i < 25; i++) {
        const state = randomRequest(random, forest)
        const want = referenceMatch(forest, state)
        if (want.parent !== forest.root) deeper++
        assert.deepStrictEqual(matched(forest, state, true), want, describeCase(seed, state))
      }
    }
    // The cases are not dominated by "nothing matches".
    assert.isAbove(deeper, 1500)
  })

  it("with the tolerance, follows the exact rule and tolerates only reasoning-less echoes of committed responses", () => {
    let tolerated = 0
    for (let seed = 1; seed <= 150; seed++) {
      const random = seeded(seed)
      const forest = randomForest(random)
      for (let i = 0; i < 25; i++) {
        const state = randomRequest(random, forest)
        const want = tolerantOracle(forest, state)
        if (want.toleratedTurns > 0) tolerated++
        assert.deepStrictEqual(matched(forest, state, false), want, describeCase(seed, state))
      }
    }
    assert.isAbove(tolerated, 200)
  })
})

describe("prefix matching of agents that drop reasoning_content", () => {
  /**
   * Agents running episodes through the generation core's match-and-commit loop: each request resends a
   * history (with or without reasoning), branches from earlier snapshots, and gets a fresh response that
   * usually carries reasoning.
   */
  const agentForest = (random: Random) => {
    const forest = Forest.make({ sessionId: "agent", groupIndex: 0, index: 0, label: null, metadata: {} })
    const context: Context = { tools: [toolF], kwargs: {} }
    const snapshots: Array<ReadonlyArray<Canonical.Message>> = [[{ role: "system", content: "s" }]]
    let reply = 0
    for (let request = 0; request < 30; request++) {
      const base = random.pick(snapshots)
      const history = [...base, ...Array.from({ length: 1 + random.int(2) }, () => random.pick(observationPool))]
      const sent = random.chance(0.5) ? history.map(Canonical.withoutReasoning) : history
      const m = Matching.match(forest, stateOf(sent, context), { strict: false })
      const parent = m.suffix.length > 0 ? observe(forest, m.parent, m.suffix, context) : m.parent
      const message: Canonical.Message = random.chance(0.8)
        ? { role: "assistant", content: `reply ${reply}`, reasoning_content: `thinking ${reply}` }
        : { role: "assistant", content: `reply ${reply}` }
      reply++
      respond(forest, parent, message)
      snapshots.push([...history, message])
    }
    return { forest, context }
  }

  it("lands a history stripped of reasoning on the same state as the full history, counting each stripped turn", () => {
    for (let seed = 1; seed <= 60; seed++) {
      const random = seeded(seed)
      const { forest, context } = agentForest(random)
      for (const [hash, n] of forest.nodes) {
        if (n.parent === null) continue
        const history = Forest.fullMessages(forest, hash)
        const reasoned = history.filter((m) => m.reasoning_content !== undefined).length
        const stripped = history.map(Canonical.withoutReasoning)
        const extra: Canonical.Message = { role: "user", content: "next" }
        const full = Matching.match(forest, stateOf(history, context), { strict: false })
        assert.deepStrictEqual([full.parent, full.suffix.length, full.toleratedTurns], [hash, 0, 0])
        const echoed = Matching.match(forest, stateOf([...stripped, extra], context), { strict: false })
        assert.deepStrictEqual([echoed.parent, echoed.suffix, echoed.toleratedTurns], [hash, [extra], reasoned])
        const strict = Matching.match(forest, stateOf(stripped, context), { strict: true })
        assert.strictEqual(
          strict.parent === hash,
          reasoned === 0,
          `seed ${seed}: strict matching ignores the tolerance`
        )
      }
    }
  })

  it("finds the right response among many sampled alternatives at one state, the latest when only reasoning differs", () => {
    const forest = Forest.make({ sessionId: "many", groupIndex: 0, index: 0, label: null, metadata: {} })
    const context: Context = { tools: [], kwargs: {} }
    const prompt: ReadonlyArray<Canonical.Message> = [{ role: "user", content: "q" }]
    const obs = observe(forest, forest.root, prompt, context)
    const sampled = Array.from({ length: 24 }, (_, i): Canonical.Message => ({
      role: "assistant",
      content: `answer ${i % 12}`,
      reasoning_content: `thought ${i}`
    }))
    const responses = sampled.map((message) => respond(forest, obs, message))
    const plain = respond(forest, obs, { role: "assistant", content: "plain" })
    for (const [i, message] of sampled.entries()) {
      const exact = Matching.match(forest, stateOf([...prompt, message], context), { strict: true })
      assert.strictEqual(exact.parent, responses[i])
      // Samples i and i + 12 differ only in reasoning: the echo without it continues from the later one.
      const echoed = Matching.match(forest, stateOf([...prompt, Canonical.withoutReasoning(message)], context), {
        strict: false
      })
      assert.deepStrictEqual([echoed.parent, echoed.toleratedTurns], [responses[(i % 12) + 12], 1])
    }
    const none = Matching.match(forest, stateOf([...prompt, { role: "assistant", content: "plain" }], context), {
      strict: false
    })
    assert.deepStrictEqual([none.parent, none.toleratedTurns], [plain, 0])
  })
})
