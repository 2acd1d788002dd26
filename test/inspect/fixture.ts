/**
 * A small debug dump built from a real SessionForest, for the inspect tests that need no rollout.
 */
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as ForestDump from "../../src/inspect/ForestDump.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as Records from "../../src/rollout/Records.ts"

export const user = (content: string): Canonical.Message => ({ role: "user", content })
export const assistant = (content: string, extra: Partial<Canonical.Message> = {}): Canonical.Message => ({
  role: "assistant",
  content,
  ...extra
})
export const vocab = { text: (id: number) => `<${id}>`, special: (id: number) => id >= 900 }
const decode = (ids: ReadonlyArray<number>) => ids.map((id) => `<${id}>`).join("")
export const call = (args: string): Canonical.ToolCall => ({
  id: "c1",
  type: "function",
  function: { name: "add", arguments: args }
})

/**
 * A Session whose agent edited the first answer before sending it back (drift: the forest branches at the first
 * observation) and whose second response was resumed after an engine abort (attempts of 3 and 2 tokens on weight
 * versions 1 and 2); both contexts exported by name.
 */
export const session = () => {
  const forest = Forest.make({ sessionId: "s1", groupIndex: 0, index: 0, label: null, metadata: {} })
  const base = { tools: [], chatTemplateKwargs: {}, rolloutId: 0 }
  const o1 = ForestCommit.commitObservation(forest, {
    ...base,
    parent: forest.root,
    messages: [user("What is 2 + 2?")],
    tokens: [900, 1, 2, 3]
  })
  const r1 = ForestCommit.commitResponse(forest, {
    parent: o1,
    message: assistant("Four."),
    tokens: [10, 11, 901],
    logprobs: [-0.1, -0.2, -0.01],
    weightVersions: ["1"],
    status: "completed",
    rolloutId: 0,
    requestId: "req-1",
    abortCount: 0,
    wallElapsedS: 0.5,
    generationElapsedS: 0.4
  })
  const o2 = ForestCommit.commitObservation(forest, {
    ...base,
    parent: o1,
    messages: [assistant("Four. (edited)"), user("Sure?")],
    tokens: [902, 10, 11, 12, 901, 900, 4, 901]
  })
  const r2 = ForestCommit.commitResponse(forest, {
    parent: o2,
    message: assistant("Yes, 4."),
    tokens: [20, 21, 22, 23, 901],
    logprobs: [-1, -2, -3, -4, -0.5],
    weightVersions: ["1", "2"],
    attemptLengths: [3, 2],
    status: "completed",
    rolloutId: 0,
    requestId: "req-2",
    abortCount: 1,
    wallElapsedS: 1.5,
    generationElapsedS: 1
  })
  const contexts = [{ name: "main", hash: r2 }, { name: "first", hash: r1 }]
  const samples = contexts.map((c) => ({
    ...Sample.build(forest, c.hash, decode, {
      rolloutId: 0,
      exportName: c.name,
      reward: c.name === "main" ? 1 : 0,
      metadata: {}
    }),
    advantage: 0.5
  }))
  const counters = {
    requests: 2,
    generations: 3,
    parserFailures: 1,
    droppedToolCalls: 0,
    parserFailedRequests: new Map([["req-2", 1]])
  }
  const debug = contexts.map((c, i): Records.ContextDebug => ({
    view: Sample.debugView(forest, c.hash),
    counters,
    ...(i === 0 ? { forest: ForestDump.ofForest(forest) } : {})
  }))
  const jsonl = Records.debugRecords(samples, debug, 0).map((r) => JSON.stringify(r)).join("\n")
  return { forest, samples, jsonl, o2 }
}
