/**
 * What the forest keeps of its last lineage between requests, against a walk of the lineage every call: the full
 * message list (`Forest.fullMessages`, the last list given kept for the next call), the echo's identity check
 * (`Forest.startsWithMessagesOf`, through `fullMessages` and its kept list) and the images along the lineage
 * (`InferencePrefix.media`, from the last image-free state down). Over random trees of observations of one to three
 * messages (some with an image), responses and reads anywhere (the same state again, a state below the kept one,
 * another branch, an ancestor): the same answers every call, and no list handed out earlier ever changes.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as InferencePrefix from "../../src/forest/InferencePrefix.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as ForestCommits from "../support/forestCommits.ts"

type Op =
  | { readonly _tag: "commit"; readonly at: number; readonly messages: number; readonly image: boolean }
  | { readonly _tag: "read"; readonly at: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("commit" as const),
      at: fc.nat(),
      messages: fc.integer({ min: 1, max: 3 }),
      image: fc.integer({ min: 0, max: 4 }).map((k) => k === 0)
    })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("read" as const), at: fc.nat() }) }
)

/** The lineage's messages, root first: what `fullMessages` gave before it kept anything. */
const walked = (forest: Forest.Forest, hash: string): ReadonlyArray<Canonical.Message> =>
  Forest.lineage(forest, hash).flatMap((n) => n.kind === "resp" ? [n.message] : n.messages)

const tools: ReadonlyArray<Canonical.Tool> = []

describe("Forest.fullMessages", () => {
  it("gives what a walk of the lineage gives, and never changes a list handed out", () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 60 }), fc.nat(), (ops, seed) => {
        const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
        const states: Array<string> = [forest.root]
        const held: Array<{ readonly list: ReadonlyArray<Canonical.Message>; readonly copy: string }> = []
        let n = 0
        for (const o of ops) {
          // The newest states most of the time (a conversation going on), any state otherwise.
          const index = (o.at + seed) % 3 === 0 ? o.at % states.length : states.length - 1 - (o.at % 2)
          const at = states[Math.max(0, index)]!
          if (o._tag === "commit") {
            const parent = Forest.node(forest, at)
            n++
            states.push(
              parent.kind === "obs" && parent.hash !== forest.root
                ? ForestCommits.completedResponse(forest, at, `a${n}`, [n], `r${n}`)
                : ForestCommit.commitObservation(forest, {
                  parent: at,
                  messages: Array.from({ length: o.messages }, (_, i) => ({
                    role: "user",
                    content: o.image && i === 0
                      ? [{ type: "image_url", image_url: { url: `img${n}` } }, { type: "text", text: `q${n}.${i}` }]
                      : `q${n}.${i}`
                  })),
                  tokens: [n],
                  tools,
                  chatTemplateKwargs: {},
                  rolloutId: 0
                })
            )
          } else {
            const list = Forest.fullMessages(forest, at)
            const expected = walked(forest, at)
            assert.deepStrictEqual(list, expected)
            // The very message objects the nodes hold.
            list.forEach((message, i) => assert.strictEqual(message, expected[i]))
            held.push({ list, copy: JSON.stringify(list) })
            // A request starting with these very objects starts with the state's messages (the kept list is this
            // state's now); equal copies of them do not count, nor does any other state's list.
            const node = Forest.node(forest, at)
            const request = [...list, { role: "user" as const, content: "next" }]
            assert.isTrue(Forest.startsWithMessagesOf(forest, node, request))
            if (list.length > 0) {
              const copied = request.map((m, i) => i === request.length - 2 ? { ...m } : m)
              assert.isFalse(Forest.startsWithMessagesOf(forest, node, copied))
            }
            // The images along the lineage, as a walk finds them (the forest keeps the last image-free state).
            assert.deepStrictEqual(
              InferencePrefix.media(forest, at),
              Forest.lineage(forest, at).flatMap((n) => n.kind === "obs" ? n.media : [])
            )
            const other = Forest.node(forest, states[(o.at * 7 + 1) % states.length]!)
            assert.strictEqual(
              Forest.startsWithMessagesOf(forest, other, request),
              other.messageCount <= request.length &&
                walked(forest, other.hash).every((message, i) => request[i] === message)
            )
          }
          for (const h of held) assert.strictEqual(JSON.stringify(h.list), h.copy)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("gives the kept list again for the same state, and builds a child's from it", () => {
    const forest = Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })
    const observe = (parent: string, q: string) =>
      ForestCommit.commitObservation(forest, {
        parent,
        messages: [{ role: "user", content: q }],
        tokens: [1],
        tools,
        chatTemplateKwargs: {},
        rolloutId: 0
      })
    const o1 = observe(forest.root, "q1")
    const first = Forest.fullMessages(forest, o1)
    assert.strictEqual(Forest.fullMessages(forest, o1), first)
    const o2 = observe(ForestCommits.completedResponse(forest, o1, "a1", [2], "r1"), "q2")
    const second = Forest.fullMessages(forest, o2)
    assert.deepStrictEqual(second.map((m) => m.content), ["q1", "a1", "q2"])
    assert.strictEqual(second[0], first[0])
    assert.deepStrictEqual(first.map((m) => m.content), ["q1"])
  })
})
