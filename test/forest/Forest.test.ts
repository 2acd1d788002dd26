import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"
import * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as ContextLimit from "../../src/forest/ContextLimit.ts"
import * as Export from "../../src/forest/Export.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as ForestError from "../../src/forest/ForestError.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as Nodes from "../../src/forest/Nodes.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as StateHash from "../../src/forest/StateHash.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ForestCommits from "../support/forestCommits.ts"

const tools: ReadonlyArray<Canonical.Tool> = [{
  type: "function",
  function: { name: "f", parameters: { type: "object" } }
}]
const kwargs: Canonical.TemplateKwargs = {}
const user = (content: string): Canonical.Message => ({ role: "user", content })
const assistant = (content: string, reasoning?: string): Canonical.Message =>
  reasoning === undefined
    ? { role: "assistant", content }
    : { role: "assistant", content, reasoning_content: reasoning }
const state = (messages: ReadonlyArray<Canonical.Message>, t = tools, k = kwargs): Canonical.State => ({
  messages,
  tools: t,
  chat_template_kwargs: k
})

const fresh = () => Forest.make({ sessionId: "s1", groupIndex: 2, index: 5, label: "42", metadata: { task: "t" } })

let rid = 0
/** Commit an observation then a response for a request, the way the generation core does. */
const turn = (
  forest: Forest.Forest,
  history: ReadonlyArray<Canonical.Message>,
  reply: Canonical.Message,
  obsTokens: ReadonlyArray<number>,
  respTokens: ReadonlyArray<number>,
  options: { readonly strict?: boolean; readonly status?: "completed" | "truncated" } = {}
) => {
  const m = Matching.match(forest, state(history), { strict: options.strict ?? false })
  const obs = m.suffix.length > 0
    ? ForestCommit.commitObservation(forest, {
      parent: m.parent,
      messages: m.suffix,
      tokens: obsTokens,
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 3
    })
    : m.parent
  const resp = ForestCommit.commitResponse(forest, {
    parent: obs,
    message: reply,
    tokens: respTokens,
    logprobs: respTokens.map((t) => -t / 100),
    weightVersions: ["v1"],
    status: options.status ?? "completed",
    rolloutId: 3,
    requestId: `r${rid++}`,
    abortCount: 0,
    wallElapsedS: 2,
    generationElapsedS: 1.5
  })
  return { match: m, obs, resp }
}

describe("SessionForest creation", () => {
  it("starts with only the root: no messages, no tokens, no leaves", () => {
    const forest = fresh()
    assert.strictEqual(forest.nodes.size, 1)
    assert.strictEqual(forest.leaves.size, 0)
    assert.strictEqual(forest.root, StateHash.ofState({ messages: [], tools: [], chat_template_kwargs: {} }))
    assert.isTrue(Forest.isRoot(forest, forest.root))
    assert.strictEqual(Forest.trainTokenCount(forest, forest.root), 0)
  })

  it("takes the root's template kwargs from the metadata, normalized", () => {
    const forest = Forest.make({
      sessionId: "s",
      groupIndex: 0,
      index: 0,
      label: null,
      metadata: { chat_template_kwargs: { b: 1, a: 2 } }
    })
    assert.strictEqual(
      forest.root,
      StateHash.ofState({ messages: [], tools: [], chat_template_kwargs: { a: 2, b: 1 } })
    )
    assert.deepStrictEqual(Forest.subtreeKwargs(forest, forest.root), { a: 2, b: 1 })
  })
})

describe("prefix matching (docs/sessionforest.md)", () => {
  it("attaches a first request to the root with the whole history as the delta", () => {
    const forest = fresh()
    const m = Matching.match(forest, state([user("q")]), { strict: true })
    assert.strictEqual(m.parent, forest.root)
    assert.deepStrictEqual(m.suffix, [user("q")])
    assert.isFalse(m.tolerated)
  })

  it("continues from the longest committed prefix and reproduces state hashes", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1, 2, 3], [10, 11])
    assert.strictEqual(t1.obs, StateHash.ofState(state([user("q")])))
    assert.strictEqual(t1.resp, StateHash.ofState(state([user("q"), assistant("a1")])))
    const m = Matching.match(forest, state([user("q"), assistant("a1"), user("q2")]), { strict: true })
    assert.strictEqual(m.parent, t1.resp)
    assert.deepStrictEqual(m.suffix, [user("q2")])
    // an identical resend of a committed state yields an empty delta
    const again = Matching.match(forest, state([user("q"), assistant("a1")]), { strict: true })
    assert.deepStrictEqual([again.parent, again.suffix.length], [t1.resp, 0])
  })

  it("starts a new subtree under the root when tools or kwargs change", () => {
    const forest = fresh()
    turn(forest, [user("q")], assistant("a1"), [1], [2])
    const m = Matching.match(forest, state([user("q"), assistant("a1")], []), { strict: true })
    assert.strictEqual(m.parent, forest.root)
    const k = Matching.match(forest, state([user("q"), assistant("a1")], tools, { enable_thinking: false }), {
      strict: true
    })
    assert.strictEqual(k.parent, forest.root)
  })

  it("branches: a diverging history makes a second leaf", () => {
    const forest = fresh()
    const a = turn(forest, [user("q")], assistant("a1"), [1], [2])
    const b = turn(forest, [user("q"), assistant("other")], assistant("a2"), [3], [4])
    assert.strictEqual(b.match.parent, a.obs)
    assert.deepStrictEqual(new Set(Forest.leaves(forest)), new Set([a.resp, b.resp]))
  })

  it("tolerates an assistant message sent back without its reasoning_content", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1", "thinking 1"), [1], [2])
    const t2 = turn(
      forest,
      [user("q"), assistant("a1", "thinking 1"), user("q2")],
      assistant("a2", "thinking 2"),
      [3],
      [4]
    )
    const dropped = [user("q"), assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    const m = Matching.match(forest, state(dropped), { strict: false })
    assert.strictEqual(m.parent, t2.resp)
    assert.deepStrictEqual(m.suffix, [user("q3")])
    assert.deepStrictEqual([m.tolerated, m.toleratedTurns, forest.toleratedMatches], [true, 2, 2])
    // strict matching stops at the first reasoning-less assistant message
    const strict = Matching.match(forest, state(dropped), { strict: true })
    assert.strictEqual(strict.parent, t1.obs)
    assert.strictEqual(strict.suffix.length, 4)
    assert.isFalse(strict.tolerated)
  })

  it("prefers an exact match over the tolerance", () => {
    const forest = fresh()
    const withReasoning = turn(forest, [user("q")], assistant("a1", "r"), [1], [2])
    const exact = turn(forest, [user("q"), assistant("a1")], assistant("x"), [5], [6], { strict: true })
    const m = Matching.match(forest, state([user("q"), assistant("a1"), assistant("x")]), { strict: false })
    assert.strictEqual(m.parent, exact.resp)
    assert.isFalse(m.tolerated)
    assert.notStrictEqual(exact.obs, withReasoning.resp)
  })

  it("does not tolerate a difference other than reasoning", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1", "r"), [1], [2])
    const m = Matching.match(forest, state([user("q"), assistant("A1"), user("q2")]), { strict: false })
    assert.strictEqual(m.parent, t1.obs)
    assert.isFalse(m.tolerated)
  })
})

describe("commits", () => {
  it("re-registering an existing state is idempotent and leaves the leaf set alone", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    const size = forest.nodes.size
    const again = ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [user("q")],
      tokens: [9, 9],
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 4
    })
    assert.strictEqual(again, t1.obs)
    assert.strictEqual(forest.nodes.size, size)
    assert.deepStrictEqual(Forest.leaves(forest), [t1.resp])
    assert.deepStrictEqual([...Forest.unpackTokens(Forest.node(forest, t1.obs))], [1])
  })

  it("rejects a hash collision across kinds", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    assert.throws(
      () =>
        ForestCommit.commitObservation(forest, {
          parent: t1.obs,
          messages: [assistant("a1")],
          tokens: [2],
          tools,
          chatTemplateKwargs: kwargs,
          rolloutId: 0
        }),
      ForestError.ForestInvariantError,
      "State hash collision with mismatched kinds: resp vs obs"
    )
  })

  it("rejects tools or template kwargs that change inside a subtree", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    const commit = (t: ReadonlyArray<Canonical.Tool>, k: Canonical.TemplateKwargs) => () =>
      ForestCommit.commitObservation(forest, {
        parent: t1.resp,
        messages: [user("x")],
        tokens: [1],
        tools: t,
        chatTemplateKwargs: k,
        rolloutId: 0
      })
    assert.throws(commit([], kwargs), "tools changed inside session subtree: s1")
    assert.throws(commit(tools, { enable_thinking: true }), "chat template changed inside session subtree: s1")
  })

  it("keeps tools/kwargs on the subtree root only and inherits them below", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    const obs = Forest.node(forest, t1.obs)
    assert.strictEqual(obs.kind === "obs" && obs.tools?.length, 1)
    assert.deepStrictEqual(Forest.subtreeTools(forest, t1.resp), tools)
    assert.deepStrictEqual(Forest.fullMessages(forest, t1.resp), [user("q"), assistant("a1")])
  })

  it("stores token deltas as typed arrays and joins them along the lineage", () => {
    const forest = fresh()
    turn(forest, [user("q")], assistant("a1"), [1, 2], [3, 4])
    const t2 = turn(forest, [user("q"), assistant("a1"), user("q2")], assistant("a2"), [5], [6, 7])
    const resp = Forest.node(forest, t2.resp)
    assert.instanceOf(Forest.unpackTokens(resp), Int32Array)
    assert.deepStrictEqual([...InferencePrefix.ids(forest, t2.resp)], [1, 2, 3, 4, 5, 6, 7])
    assert.strictEqual(Forest.trainTokenCount(forest, t2.resp), 7)
    assert.strictEqual(Forest.responseOfRequest(forest, resp.kind === "resp" ? resp.requestId : ""), t2.resp)
  })

  it("packs logprobs of any length through one reused buffer: each string reads back its own values", () => {
    // Lengths around the buffer's first size (4 KiB), its growth and its limit (1 MiB: a buffer of its own past it),
    // in 32-bit and 64-bit floats, short ones after long ones (what a longer packing left must not show).
    const lengths = [3, 600, 5, 1100, 140_000, 7, 300_000, 2]
    const packed = lengths.map((n, k) => {
      const single = k % 2 === 0
      const values = Array.from({ length: n }, (_, i) => single ? Math.fround(-(i + k) / 7) : -(i + k) / 7 - 1e-12)
      return { values, single, text: Nodes.packLogprobs(values) }
    })
    for (const { values, single, text } of packed) {
      assert.strictEqual(text.length, values.length * (single ? 4 : 8))
      const read = Nodes.logprobsOf(text, values.length)
      if (single) assert.instanceOf(read, Float32Array)
      else assert.instanceOf(read, Float64Array)
      assert.deepStrictEqual([...read], values)
    }
  })

  it("reads back every committed id and logprob exactly, in 32-bit floats only when they are exact there", () => {
    const forest = fresh()
    const ids = [0, 1, 151_643, 2 ** 31 - 1, -5, 2 ** 32 + 7, 3.7]
    const cases: ReadonlyArray<{ readonly logprobs: ReadonlyArray<number>; readonly single: boolean }> = [
      {
        logprobs: [-0.125, -0, 0, Math.fround(-1e-30), Math.fround(-3.4e38), Math.fround(-0.1), Number.NaN],
        single: true
      },
      { logprobs: [-0.125, -0, 0, -1e-30, -3.4e38, -0.1, Number.NaN], single: false },
      { logprobs: [-0.5, -1e-300, 0, 0, 0, 0, Number.NEGATIVE_INFINITY], single: false }
    ]
    let parent = forest.root
    for (const [i, c] of cases.entries()) {
      parent = ForestCommit.commitObservation(forest, {
        parent,
        messages: [user(`q${i}`)],
        tokens: [9],
        tools,
        chatTemplateKwargs: kwargs,
        rolloutId: 0
      })
      parent = ForestCommit.commitResponse(forest, {
        parent,
        message: assistant(`a${i}`),
        tokens: ids,
        logprobs: c.logprobs,
        weightVersions: ["v1", `w${i}`],
        status: "completed",
        rolloutId: 0,
        requestId: `lp${i}`,
        abortCount: 0,
        wallElapsedS: 0,
        generationElapsedS: 0
      })
      const resp = Forest.node(forest, parent)
      assert.isTrue(resp.kind === "resp")
      if (resp.kind !== "resp") continue
      // What the earlier layout (an Int32Array and a Float64Array of their own) read back, value for value.
      assert.deepStrictEqual([...Forest.unpackTokens(resp)], [...Int32Array.from(ids)])
      assert.deepStrictEqual(
        [...resp.logprobs].map((x) => Object.is(x, -0) ? "-0" : x),
        c.logprobs.map((x) => Object.is(x, -0) ? "-0" : x)
      )
      if (c.single) assert.instanceOf(resp.logprobs, Float32Array)
      else assert.instanceOf(resp.logprobs, Float64Array)
      assert.deepStrictEqual(resp.weightVersions, ["v1", `w${i}`])
    }
  })

  it("finds the response of a request id, also of a retry that re-committed an existing response", () => {
    const forest = fresh()
    const obs = ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [user("q")],
      tokens: [1],
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 0
    })
    const commit = (requestId: string, content: string) =>
      ForestCommits.completedResponse(forest, obs, content, [2], requestId)
    const first = commit("rid-a", "same")
    assert.strictEqual(commit("rid-b", "same"), first)
    const other = commit("rid-c", "other")
    assert.deepStrictEqual(
      ["rid-a", "rid-b", "rid-c", "rid-none"].map((rid) => Forest.responseOfRequest(forest, rid)),
      [first, first, other, undefined]
    )
  })

  it("hashes every state as the reference does, also children of inner nodes (whose running hash is rebuilt)", () => {
    // Branches, second samples at one state, retries and re-commits, in an order that commits under inner nodes.
    const forest = fresh()
    const history = [user("q"), assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    turn(forest, history.slice(0, 3), assistant("a2"), [3], [4])
    turn(forest, history, assistant("a3"), [5], [6])
    const second = turn(forest, [user("q")], assistant("a1 again"), [1], [7])
    const branch = turn(forest, [user("q"), assistant("a1"), user("other")], assistant("b"), [8], [9])
    const again = turn(forest, history.slice(0, 3), assistant("a2"), [3], [4])
    const obsOnly = ForestCommit.commitObservation(forest, {
      parent: t1.resp,
      messages: [user("q4")],
      tokens: [10],
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 0
    })
    assert.strictEqual(second.obs, t1.obs)
    assert.strictEqual(
      again.resp,
      Matching.match(forest, state([...history.slice(0, 3), assistant("a2")]), { strict: true }).parent
    )
    for (
      const hash of [...Forest.leaves(forest), branch.obs, obsOnly, ...forest.nodes.keys()].filter((h) =>
        h !== forest.root
      )
    ) {
      assert.strictEqual(hash, StateHash.ofState(state(Forest.fullMessages(forest, hash))))
    }
    // Only leaves keep a running hash state.
    for (const n of forest.nodes.values()) {
      if (n.running !== undefined) assert.isTrue(forest.leaves.has(n.hash), `inner node ${n.hash} keeps a running hash`)
    }
  })

  it("hashes states of interleaved contexts as the reference does (each subtree's printed tools are kept)", () => {
    const forest = fresh()
    const otherTools: ReadonlyArray<Canonical.Tool> = [
      ...tools,
      {
        type: "function",
        function: { name: "g", parameters: { type: "object", properties: { x: { type: "string" } } } }
      }
    ]
    const contexts: ReadonlyArray<readonly [ReadonlyArray<Canonical.Tool>, Canonical.TemplateKwargs]> = [
      [tools, {}],
      [tools, { enable_thinking: false }],
      [otherTools, {}],
      [[], { enable_thinking: true }]
    ]
    const parents = contexts.map(() => forest.root)
    for (let k = 0; k < 4; k++) {
      contexts.forEach(([t, k2], c) => {
        const obs = ForestCommit.commitObservation(forest, {
          parent: parents[c] ?? forest.root,
          messages: [user(`q${k}`)],
          tokens: [k],
          tools: structuredClone(t),
          chatTemplateKwargs: structuredClone(k2),
          rolloutId: 0
        })
        parents[c] = ForestCommit.commitResponse(forest, {
          parent: obs,
          message: assistant(`a${k}`),
          tokens: [k],
          logprobs: [0],
          weightVersions: [],
          status: "completed",
          rolloutId: 0,
          requestId: `ctx${c}-${k}`,
          abortCount: 0,
          wallElapsedS: 0,
          generationElapsedS: 0
        })
      })
    }
    for (const n of forest.nodes.values()) {
      if (n.hash === forest.root) continue
      const [t, k2] = contexts.find(([t, k2]) =>
        StateHash.equalJson(t, Forest.subtreeTools(forest, n.hash)) &&
        StateHash.equalJson(k2, Forest.subtreeKwargs(forest, n.hash))
      ) ?? [[], {}]
      assert.strictEqual(n.hash, StateHash.ofState(state(Forest.fullMessages(forest, n.hash), t, k2)))
    }
    assert.strictEqual(forest.nodes.size, 1 + 4 * 4 * 2)
  })

  it("records the image URLs of each observation and joins them along the lineage for the engine", () => {
    const forest = fresh()
    const image = (url: string): Canonical.Message => ({
      role: "user",
      content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url } }]
    })
    const first = turn(forest, [image("data:image/png;base64,AAAA")], assistant("a cat"), [1, 2], [3])
    const second = turn(
      forest,
      [image("data:image/png;base64,AAAA"), assistant("a cat"), image("https://x.test/b.png"), user("and?")],
      assistant("a dog"),
      [4],
      [5]
    )
    const obs = Forest.node(forest, second.obs)
    assert.isTrue(obs.kind === "obs" && obs.media.length === 1 && obs.media[0] === "https://x.test/b.png")
    assert.deepStrictEqual(InferencePrefix.media(forest, first.obs), ["data:image/png;base64,AAAA"])
    assert.deepStrictEqual(InferencePrefix.media(forest, second.resp), [
      "data:image/png;base64,AAAA",
      "https://x.test/b.png"
    ])
    assert.deepStrictEqual(InferencePrefix.media(forest, forest.root), [])
  })

  it("rejects a response whose logprobs do not align with its tokens", () => {
    const forest = fresh()
    assert.throws(() =>
      ForestCommit.commitResponse(forest, {
        parent: forest.root,
        message: assistant("a"),
        tokens: [1, 2],
        logprobs: [0],
        weightVersions: [],
        status: "completed",
        rolloutId: 0,
        requestId: "r",
        abortCount: 0,
        wallElapsedS: 0,
        generationElapsedS: 0
      }), "response r has 2 tokens but 1 logprobs")
  })
})

describe("context checks", () => {
  it("rejects an observation that reaches the context limit, with the reference text", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1, 2, 3], [4, 5])
    assert.isTrue(Result.isSuccess(ContextLimit.checkObservation(forest, t1.resp, 4, 10)))
    assert.isTrue(Result.isSuccess(ContextLimit.checkObservation(forest, t1.resp, 1000, null)))
    const checked = ContextLimit.checkObservation(forest, t1.resp, 5, 10)
    assert(Result.isFailure(checked))
    assert.instanceOf(checked.failure, ContextLengthError.ContextLengthError)
    assert.strictEqual(
      checked.failure.message,
      "This model's maximum context length is 10 tokens. However, your messages resulted in 10 tokens. Please reduce the length of the messages."
    )
  })

  it("caps the generation budget by the remaining context", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1, 2, 3], [4, 5])
    assert.deepStrictEqual(ContextLimit.generationBudget(forest, t1.resp, 10, 100), Result.succeed(5))
    assert.deepStrictEqual(ContextLimit.generationBudget(forest, t1.resp, null, 100), Result.succeed(100))
    const exhausted = ContextLimit.generationBudget(forest, t1.resp, 5, 100)
    assert(Result.isFailure(exhausted))
    assert.instanceOf(exhausted.failure, ContextLengthError.ContextLengthError)
  })

  it("words every context-length variant like the reference", () => {
    assert.strictEqual(
      new ContextLengthError.ContextLengthError({ limit: null }).message,
      "This model's maximum context length was exceeded. Please reduce the length of the messages."
    )
    assert.strictEqual(
      new ContextLengthError.ContextLengthError({ limit: 8 }).message,
      "This model's maximum context length is 8 tokens. Please reduce the length of the messages."
    )
    assert.strictEqual(
      new ContextLengthError.ContextLengthError({ limit: 8, promptTokens: 6, completionTokens: 4 }).message,
      "This model's maximum context length is 8 tokens. However, your messages resulted in 6 tokens and requested 4 completion tokens (10 tokens total). Please reduce the length of the messages or max_completion_tokens."
    )
  })
})

const failureOf = (
  value: Result.Result<ReadonlyArray<Export.ExportedContext>, ForestError.ExportError>
): ForestError.ExportError | undefined => Result.isFailure(value) ? value.failure : undefined
const contextsOf = (value: Result.Result<ReadonlyArray<Export.ExportedContext>, ForestError.ExportError>) =>
  Result.isSuccess(value) ? value.success : undefined

describe("implicit export", () => {
  it("selects the one committed leaf with the output metadata and reward", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    const out = Export.exportImplicit(forest, { metadata: { score: 1 }, reward: 0.5 })
    assert.deepStrictEqual(contextsOf(out), [{ name: null, hash: t1.resp, metadata: { score: 1 }, reward: 0.5 }])
  })

  it("requires exactly one committed leaf", () => {
    const forest = fresh()
    const none = failureOf(Export.exportImplicit(forest, {}))
    assert.strictEqual(none?.message, "implicit export requires one committed leaf, found 0")
    turn(forest, [user("q")], assistant("a1"), [1], [2])
    turn(forest, [user("other")], assistant("a2"), [3], [4])
    const two = failureOf(Export.exportImplicit(forest, {}))
    assert.strictEqual(two?.reason, "leaf-count")
    assert.strictEqual(two?.message, "implicit export requires one committed leaf, found 2")
  })

  it("ignores observation-only leaves", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [user("never answered")],
      tokens: [7],
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 0
    })
    const out = Export.exportImplicit(forest, {})
    assert.deepStrictEqual(contextsOf(out)?.map((c) => c.hash), [t1.resp])
  })
})

describe("explicit export", () => {
  it("selects the committed state named by each record (not necessarily a leaf)", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    const t2 = turn(forest, [user("q"), assistant("a1"), user("q2")], assistant("a2"), [3], [4])
    const out = Export.exportExplicit(forest, [
      { name: "first", messages: [user("q"), assistant("a1")], tools, metadata: { k: 1 }, reward: 1 },
      { name: "whole", messages: [user("q"), assistant("a1"), user("q2"), assistant("a2")], tools }
    ], { base: true, k: 0 })
    assert.deepStrictEqual(contextsOf(out), [
      { name: "first", hash: t1.resp, metadata: { base: true, k: 1 }, reward: 1 },
      { name: "whole", hash: t2.resp, metadata: { base: true, k: 0 }, reward: null }
    ])
  })

  it("rejects a record matching no committed state", () => {
    const forest = fresh()
    turn(forest, [user("q")], assistant("a1"), [1], [2])
    const out = failureOf(
      Export.exportExplicit(forest, [{ name: "x", messages: [user("q"), assistant("nope")], tools }])
    )
    assert.strictEqual(out?.reason, "no-matching-state")
    assert.strictEqual(out?.message, "explicit export does not match a committed Forest state")
    assert.strictEqual(out?.record, "x")
    // tools are part of the state: the same messages without tools match nothing
    const noTools = failureOf(Export.exportExplicit(forest, [{ name: "y", messages: [user("q"), assistant("a1")] }]))
    assert.strictEqual(noTools?.message, "explicit export does not match a committed Forest state")
  })

  it("rejects a record whose state has no committed response", () => {
    const forest = fresh()
    turn(forest, [user("q")], assistant("a1"), [1], [2])
    const out = failureOf(Export.exportExplicit(forest, [{ name: "p", messages: [user("q")], tools }]))
    assert.strictEqual(out?.reason, "no-response")
    assert.strictEqual(out?.message, "export leaf has no committed response")
  })

  it("rejects a record that fails canonicalization", () => {
    const forest = fresh()
    const out = failureOf(Export.exportExplicit(forest, [{ name: "bad", messages: [{ role: "bot", content: "x" }] }]))
    assert.strictEqual(out?.reason, "invalid-record")
    assert.strictEqual(
      out?.message,
      "export record 0 (bad): messages[0].role must be one of: assistant, system, tool, user"
    )
  })

  it("matches records that drop reasoning_content unless strict", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1", "r"), [1], [2])
    const record = { name: "n", messages: [user("q"), assistant("a1")], tools }
    const out = Export.exportExplicit(forest, [record])
    assert.deepStrictEqual(contextsOf(out)?.map((c) => c.hash), [t1.resp])
    const strict = failureOf(Export.exportExplicit(forest, [record], {}, { strict: true }))
    assert.strictEqual(strict?.reason, "no-matching-state")
  })

  it("merges agentic_trace metadata instead of overwriting it", () => {
    assert.deepStrictEqual(
      Export.mergeMetadata({ agentic_trace: { events: { a: 1 } }, x: 1 }, {
        agentic_trace: { events: { b: 2 } },
        x: 2
      }),
      { agentic_trace: { events: { a: 1, b: 2 } }, x: 2 }
    )
  })
})

describe("Sample.build (docs/sessionforest.md)", () => {
  const decode = (ids: ReadonlyArray<number>) => ids.map((id) => `<${id}>`).join("")

  it("joins the lineage: prompt, then generated (mask 1) and observation (mask 0) tokens", () => {
    const forest = fresh()
    turn(forest, [user("q")], assistant("a1"), [1, 2], [3, 4])
    const t2 = turn(forest, [user("q"), assistant("a1"), user("q2")], assistant("a2"), [5], [6], {
      status: "truncated"
    })
    const sample = Sample.build(forest, t2.resp, decode, {
      rolloutId: 7,
      exportName: "e",
      reward: 1,
      metadata: { extra: true }
    })
    assert.deepStrictEqual(sample.tokens, [1, 2, 3, 4, 5, 6])
    assert.strictEqual(sample.response_length, 4)
    assert.deepStrictEqual(sample.loss_mask, [1, 1, 0, 1])
    assert.deepStrictEqual(sample.rollout_log_probs, [-0.03, -0.04, 0, -0.06])
    assert.deepStrictEqual(sample.turn_spans, [[0, 2], [3, 4]])
    assert.strictEqual(sample.prompt, "<1><2>")
    assert.strictEqual(sample.response, "<3><4><5><6>")
    assert.strictEqual(sample.status, "truncated")
    assert.deepStrictEqual(sample.weight_versions, ["v1", "v1"])
    assert.deepStrictEqual(
      [
        sample.rollout_id,
        sample.group_index,
        sample.index,
        sample.session_id,
        sample.export_name,
        sample.reward,
        sample.advantage,
        sample.label
      ],
      [7, 2, 5, "s1", "e", 1, null, "42"]
    )
    assert.strictEqual(sample.metadata["task"], "t")
    assert.strictEqual(sample.metadata["extra"], true)
    assert.strictEqual(sample.metadata["start_rollout_id"], 3)
    assert.strictEqual(sample.metadata["rollout_turns"], 2)
    assert.deepStrictEqual(sample.metadata["tools"], tools)
    const trace = JSON.parse(JSON.stringify(sample.metadata["agentic_trace"]))
    assert.deepStrictEqual([trace.session_id, trace.leaf_state_hash, trace.turn_count, trace.terminal_status], [
      "s1",
      t2.resp,
      2,
      "truncated"
    ])
    assert.deepStrictEqual(trace.turns.map((t: { request_id: string }) => t.request_id).length, 2)
  })

  it("marks a state ending in an observation as truncated", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2])
    const obs = ForestCommit.commitObservation(forest, {
      parent: t1.resp,
      messages: [user("q2")],
      tokens: [3, 4],
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 3
    })
    const sample = Sample.build(forest, obs, decode, { rolloutId: 0, exportName: null, reward: null, metadata: {} })
    assert.deepStrictEqual([sample.status, sample.loss_mask], ["truncated", [1, 0, 0]])
  })

  it("refuses a lineage without a response", () => {
    const forest = fresh()
    const obs = ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [user("q")],
      tokens: [1],
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 0
    })
    assert.throws(
      () => Sample.build(forest, obs, decode, { rolloutId: 0, exportName: null, reward: null, metadata: {} }),
      "A sample export leaf must have at least one resp node in its lineage."
    )
  })

  it("gives a debug view with hashes, status and per-turn timing", () => {
    const forest = fresh()
    const t1 = turn(forest, [user("q")], assistant("a1"), [1], [2, 3])
    const view = Sample.debugView(forest, t1.resp)
    assert.deepStrictEqual(view.state_hashes.map((s) => s.kind), ["obs", "obs", "resp"])
    assert.deepStrictEqual([view.terminal_status, view.turn_count], ["completed", 1])
    assert.deepStrictEqual(
      view.turns.map((
        t
      ) => [t.response_length, t.wall_elapsed_s, t.generation_elapsed_s, t.abort_count, t.weight_versions]),
      [[2, 2, 1.5, 0, ["v1"]]]
    )
  })
})

describe("processor-expanded observations (images)", () => {
  const image = "data:image/png;base64,AAAA"
  const withImage: Canonical.Message = {
    role: "user",
    content: [{ type: "image_url", image_url: { url: image } }, { type: "text", text: "what is it?" }]
  }
  const PAD = 151655

  it("keeps the inference tokens for the engine and counts the expanded training tokens against the context", () => {
    const forest = fresh()
    const obs = ForestCommit.commitObservation(forest, {
      parent: forest.root,
      messages: [withImage],
      tokens: [1, PAD, 2],
      train: { tokens: [1, PAD, PAD, PAD, PAD, 2], imageGrids: [[1, 4, 4]] },
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 0
    })
    assert.deepStrictEqual([...InferencePrefix.ids(forest, obs)], [1, PAD, 2])
    assert.deepStrictEqual(InferencePrefix.media(forest, obs), [image])
    assert.strictEqual(Forest.trainTokenCount(forest, obs), 6)
    // 6 expanded tokens + 1 observation token reach a limit of 7, although the engine sees only 4.
    const tooLong = ContextLimit.checkObservation(forest, obs, 1, 7)
    assert.isTrue(Result.isFailure(tooLong) && tooLong.failure instanceof ContextLengthError.ContextLengthError)
    assert.deepStrictEqual(ContextLimit.generationBudget(forest, obs, 10, 100), Result.succeed(4))
  })

  it("builds the sample from the expanded tokens, with the images and their grids", () => {
    const forest = fresh()
    const history = [withImage]
    const m = Matching.match(forest, state(history), { strict: true })
    const obs = ForestCommit.commitObservation(forest, {
      parent: m.parent,
      messages: m.suffix,
      tokens: [1, PAD, 2],
      train: { tokens: [1, PAD, PAD, PAD, PAD, 2], imageGrids: [[1, 4, 4]] },
      tools,
      chatTemplateKwargs: kwargs,
      rolloutId: 0
    })
    const { resp } = turn(forest, history, assistant("a cat"), [], [7, 8])
    assert.strictEqual(Forest.node(forest, resp).parent, obs)
    const sample = Sample.build(forest, resp, (ids) => ids.join(","), {
      rolloutId: 0,
      exportName: null,
      reward: 1,
      metadata: {}
    })
    assert.deepStrictEqual(sample.tokens, [1, PAD, PAD, PAD, PAD, 2, 7, 8])
    assert.deepStrictEqual(sample.loss_mask, [1, 1])
    assert.strictEqual(sample.response_length, 2)
    assert.deepStrictEqual(sample.multimodal_inputs, { images: [image] })
    assert.deepStrictEqual(sample.multimodal_train_inputs, { image_grid_thw: [[1, 4, 4]] })
  })

  it("adds no multimodal keys to a text-only sample", () => {
    const forest = fresh()
    const { resp } = turn(forest, [user("q")], assistant("a"), [1, 2], [3])
    const sample = Sample.build(forest, resp, (ids) => ids.join(","), {
      rolloutId: 0,
      exportName: null,
      reward: 1,
      metadata: {}
    })
    assert.notProperty(sample, "multimodal_inputs")
    assert.notProperty(sample, "multimodal_train_inputs")
  })
})

describe("the packed node layout against the earlier one (an Int32Array and a Float64Array per node)", () => {
  const decode = (ids: ReadonlyArray<number>) => ids.join(",")
  const anyId = fc.oneof(
    fc.integer({ min: 0, max: 300_000 }),
    fc.constantFrom(0, 65_535, 65_536, 2 ** 24 - 1, 2 ** 24, 2 ** 31 - 1, -1, -(2 ** 31), 2 ** 32 + 3, 7.5, -0)
  )
  const anyLogprob = fc.oneof(
    fc.double(),
    fc.float({ noDefaultInfinity: false }),
    fc.constantFrom(-0, 0, Number.NaN, Number.NEGATIVE_INFINITY, -1e-45, -3.4028234663852886e38)
  )
  const turnArbitrary = fc.record({
    observation: fc.array(anyId, { maxLength: 12 }),
    response: fc.array(fc.tuple(anyId, anyLogprob), { maxLength: 12 })
  })
  /** What the earlier layout read back: the ids through an Int32Array, the logprobs through a Float64Array. */
  const earlier = (
    turns: ReadonlyArray<
      { readonly observation: ReadonlyArray<number>; readonly response: ReadonlyArray<readonly [number, number]> }
    >
  ) => {
    const tokens: Array<number> = []
    const logprobs: Array<number> = []
    const mask: Array<number> = []
    let prompt = -1
    for (const t of turns) {
      const obs = [...Int32Array.from(t.observation)]
      tokens.push(...obs)
      if (prompt >= 0) {
        for (const _ of obs) {
          mask.push(0)
          logprobs.push(0)
        }
      }
      if (prompt < 0) prompt = tokens.length
      tokens.push(...Int32Array.from(t.response.map(([id]) => id)))
      for (const lp of Float64Array.from(t.response.map(([, lp]) => lp))) {
        mask.push(1)
        logprobs.push(lp)
      }
    }
    return { tokens, logprobs, mask }
  }
  // -0 and NaN compared as what JSON export sees and Object.is tells apart.
  const exact = (values: ReadonlyArray<number>) =>
    values.map((x) => (Object.is(x, -0) ? "-0" : Number.isNaN(x) ? "NaN" : x))

  it("reads back the same ids, logprobs, inference prefix and training sample", () => {
    fc.assert(
      fc.property(fc.array(turnArbitrary, { minLength: 1, maxLength: 5 }), (turns) => {
        const forest = fresh()
        let parent = forest.root
        const history: Array<Canonical.Message> = []
        for (const [i, t] of turns.entries()) {
          history.push(user(`q${i}`))
          parent = ForestCommit.commitObservation(forest, {
            parent,
            messages: [user(`q${i}`)],
            tokens: t.observation,
            tools,
            chatTemplateKwargs: kwargs,
            rolloutId: i
          })
          history.push(assistant(`a${i}`))
          parent = ForestCommit.commitResponse(forest, {
            parent,
            message: assistant(`a${i}`),
            tokens: t.response.map(([id]) => id),
            logprobs: t.response.map(([, lp]) => lp),
            weightVersions: ["v"],
            status: "completed",
            rolloutId: i,
            requestId: `r${i}`,
            abortCount: 0,
            wallElapsedS: 0,
            generationElapsedS: 0
          })
          for (const n of Forest.lineage(forest, parent).slice(-2)) {
            const ids = n.kind === "resp" ? t.response.map(([id]) => id) : t.observation
            assert.deepStrictEqual([...Forest.unpackTokens(n)], [...Int32Array.from(ids)])
            assert.deepStrictEqual([...Forest.unpackTrainTokens(n)], [...Int32Array.from(ids)])
            assert.strictEqual(Forest.tokenLength(n), ids.length)
            if (n.kind === "resp") {
              assert.deepStrictEqual(
                exact([...n.logprobs]),
                exact([...Float64Array.from(t.response.map(([, lp]) => lp))])
              )
            }
          }
        }
        const reference = earlier(turns)
        assert.deepStrictEqual([...InferencePrefix.ids(forest, parent)], reference.tokens)
        assert.deepStrictEqual(Forest.fullMessages(forest, parent), history)
        const sample = Sample.build(forest, parent, decode, {
          rolloutId: 0,
          exportName: null,
          reward: null,
          metadata: {}
        })
        assert.deepStrictEqual(sample.tokens, reference.tokens)
        assert.deepStrictEqual(sample.loss_mask, reference.mask)
        assert.deepStrictEqual(exact(sample.rollout_log_probs), exact(reference.logprobs))
      }),
      { numRuns: 200 }
    )
  })
})
