/**
 * The forest's kept inference prefix (`InferencePrefix.ids`, extended in place) against the path it replaced (a new
 * `Int32Array` of the lineage's ids every call, `InferencePrefix.copy`), over random trees of commits, branches
 * and reads with and without a tail (and the kept buffer taken by a collection): the same ids every call,
 * no prefix handed out earlier ever changes (the branch read later must not write into a view an engine may still
 * hold), and two views under one stamp (src/ids/StableIds.ts) from one offset agree as far as both reach.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import * as StableIds from "../../src/ids/StableIds.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ForestCommits from "../support/forestCommits.ts"

/** Ids that pack in 3 bytes, mostly from a small range (so branches often repeat ids), a few that do not. */
const id = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0, max: 5 }) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: (1 << 24) - 1 }) },
  { weight: 1, arbitrary: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }) }
)
const ids = fc.array(id, { maxLength: 12 })

type Op =
  | { readonly _tag: "commit"; readonly at: number; readonly ids: ReadonlyArray<number> }
  | { readonly _tag: "read"; readonly at: number; readonly tail: ReadonlyArray<number> | undefined }
  | { readonly _tag: "collect" }

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ _tag: fc.constant("commit" as const), at: fc.nat(), ids }) },
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("read" as const),
      at: fc.nat(),
      tail: fc.option(fc.array(id, { maxLength: 6 }), { nil: undefined })
    })
  },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("collect" as const) }) }
)

/** What the forest's weak hold on its prefix gives once a collection took the buffer. */
const collected: WeakRef<Int32Array> = { deref: () => undefined, [Symbol.toStringTag]: "WeakRef" }
const collect = (forest: Forest.Forest): void => {
  if (forest.prefix !== undefined) forest.prefix.ids = collected
}

const tools: ReadonlyArray<Canonical.Tool> = []

describe("InferencePrefix.ids", () => {
  it("reads what the concatenated copy reads, and never changes a prefix handed out", () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 60 }), (ops) => {
        const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
        const states: Array<string> = [forest.root]
        const held: Array<{ readonly view: Int32Array; readonly ids: ReadonlyArray<number> }> = []
        let n = 0
        for (const o of ops) {
          if (o._tag === "collect") {
            // A collection took the kept buffer (views handed out keep theirs): the next read builds it again.
            collect(forest)
            continue
          }
          const at = states[o.at % states.length]!
          if (o._tag === "commit") {
            // Under an observation a response, else an observation: any state may get more children (branches).
            const parent = Forest.node(forest, at)
            n++
            states.push(
              parent.kind === "obs" && parent.hash !== forest.root
                ? ForestCommits.completedResponse(forest, at, `a${n}`, o.ids, `r${n}`)
                : ForestCommit.commitObservation(forest, {
                  parent: at,
                  messages: [{ role: "user", content: `q${n}` }],
                  tokens: o.ids,
                  tools,
                  chatTemplateKwargs: {},
                  rolloutId: 0
                })
            )
          } else {
            const view = InferencePrefix.ids(forest, at, o.tail)
            const expected = [...InferencePrefix.copy(forest, at, o.tail)]
            assert.deepStrictEqual([...view], expected)
            held.push({ view, ids: expected })
          }
          for (const h of held) assert.deepStrictEqual([...h.view], h.ids)
        }
        // What the embedded engine relies on to skip comparing: views under one stamp from one offset agree.
        for (const a of held) {
          for (const b of held) {
            if (StableIds.stampOf(a.view) !== StableIds.stampOf(b.view) || a.view.byteOffset !== b.view.byteOffset) {
              continue
            }
            const n = Math.min(a.ids.length, b.ids.length)
            assert.deepStrictEqual(a.ids.slice(0, n), b.ids.slice(0, n))
          }
        }
      }),
      { numRuns: 500 }
    )
  })

  it("extends the kept prefix in place, carries its stamp on after a collection, and copies it for a branch", () => {
    const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
    const observe = (parent: string, tokens: ReadonlyArray<number>, q: string) =>
      ForestCommit.commitObservation(forest, {
        parent,
        messages: [{ role: "user", content: q }],
        tokens,
        tools,
        chatTemplateKwargs: {},
        rolloutId: 0
      })
    const respond = (parent: string, tokens: ReadonlyArray<number>, a: string) =>
      ForestCommits.completedResponse(forest, parent, a, tokens, a)
    const o1 = observe(forest.root, [1, 2, 3], "q1")
    const first = InferencePrefix.ids(forest, o1)
    // A resumed attempt: the pending output after the prefix, in the same buffer (past what was handed out).
    const resumed = InferencePrefix.ids(forest, o1, [4])
    assert.strictEqual(resumed.buffer, first.buffer)
    const r1 = respond(o1, [4, 5], "a1")
    const o2 = observe(r1, [6], "q2")
    const second = InferencePrefix.ids(forest, o2)
    assert.strictEqual(second.buffer, first.buffer)
    assert.deepStrictEqual([...second], [1, 2, 3, 4, 5, 6])
    // A collection took the buffer: the next one is built again from the lineage. A tail was handed out past o2's
    // ids, so it gets a stamp of its own; without one, the stamp carries on (the engine compares the new ids only).
    InferencePrefix.ids(forest, o2, [7])
    collect(forest)
    const r2 = respond(o2, [9], "a2")
    const o3 = observe(r2, [10], "q3")
    const third = InferencePrefix.ids(forest, o3)
    assert.notStrictEqual(third.buffer, second.buffer)
    assert.notStrictEqual(StableIds.stampOf(third), StableIds.stampOf(second))
    collect(forest)
    const o4 = observe(o3, [11], "q4")
    const fourth = InferencePrefix.ids(forest, o4)
    assert.notStrictEqual(fourth.buffer, third.buffer)
    assert.strictEqual(StableIds.stampOf(fourth), StableIds.stampOf(third))
    assert.deepStrictEqual([...fourth], [1, 2, 3, 4, 5, 6, 9, 10, 11])
    // Another response at o1: its ids differ from the ones handed out after o1, so a buffer of its own.
    const r1b = respond(o1, [7], "a1b")
    const o2b = observe(r1b, [8], "q2b")
    const branch = InferencePrefix.ids(forest, o2b)
    assert.notStrictEqual(branch.buffer, first.buffer)
    assert.deepStrictEqual([...branch], [1, 2, 3, 7, 8])
    assert.deepStrictEqual([...second], [1, 2, 3, 4, 5, 6])
    assert.deepStrictEqual([...resumed], [1, 2, 3, 4])
  })
})
