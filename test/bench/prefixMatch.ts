/**
 * Prefix matching cost: the reference algorithm (docs/sessionforest.md "Matching a request": for k = n..1 hash
 * `messages[:k]` with `StateHash.ofState` and look it up) against `Matching.match` (a walk down the forest's message index
 * with structural comparison, no hashing), and against the one-pass `StateHash.prefixHashes` variant of the reference, on
 * conversations of 8–256 messages of ~300 bytes.
 */
import * as Forest from "../../src/forest/Forest.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as StateHash from "../../src/forest/StateHash.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as Conversation from "./conversation.ts"
import * as Harness from "./harness.ts"

interface Found {
  readonly parent: string
  readonly suffixLength: number
}

/** The reference: the longest committed prefix found by hashing every prefix from the longest down. */
const referenceMatch = (forest: Forest.Forest, state: Canonical.State): Found => {
  for (let k = state.messages.length; k >= 1; k--) {
    const hash = StateHash.ofState({
      messages: state.messages.slice(0, k),
      tools: state.tools,
      chat_template_kwargs: state.chat_template_kwargs
    })
    if (forest.nodes.has(hash)) return { parent: hash, suffixLength: state.messages.length - k }
  }
  return { parent: forest.root, suffixLength: state.messages.length }
}

/** The reference rule with every prefix hash computed in one pass over the bytes. */
const prefixHashesMatch = (forest: Forest.Forest, state: Canonical.State): Found => {
  const hashes = StateHash.prefixHashes(state)
  for (let k = hashes.length; k >= 1; k--) {
    const hash = hashes[k - 1]
    if (hash !== undefined && forest.nodes.has(hash)) return { parent: hash, suffixLength: state.messages.length - k }
  }
  return { parent: forest.root, suffixLength: state.messages.length }
}

const projectMatch = (forest: Forest.Forest, state: Canonical.State): Found => {
  const found = Matching.match(forest, state, { strict: false })
  return { parent: found.parent, suffixLength: found.suffix.length }
}

interface Case {
  readonly name: string
  readonly state: Canonical.State
  /** What every exact matcher must find (sanity check before timing). */
  readonly exact: Found
  /** What `Matching.match` must find (differs from `exact` only where the reasoning tolerance applies). */
  readonly project: Found
}

const cases = (n: number): { readonly forest: Forest.Forest; readonly cases: ReadonlyArray<Case> } => {
  const messages = Conversation.conversation(n)
  const forest = Conversation.emptyForest()
  // Everything up to the last assistant turn is committed; the request adds one new tool result.
  const leaf = Conversation.commitConversation(forest, messages.slice(0, n - 1), 8)
  const next: Canonical.State = { messages, tools: Conversation.tools, chat_template_kwargs: {} }
  const stripped: Canonical.State = { ...next, messages: messages.map(Canonical.withoutReasoning) }
  const firstTurn = Forest.lineage(forest, leaf)[1]?.hash ?? forest.root
  return {
    forest,
    cases: [
      {
        name: "next turn",
        state: next,
        exact: { parent: leaf, suffixLength: 1 },
        project: { parent: leaf, suffixLength: 1 }
      },
      {
        name: "new subtree",
        state: { ...next, tools: [] },
        exact: { parent: forest.root, suffixLength: n },
        project: { parent: forest.root, suffixLength: n }
      },
      {
        name: "tolerated",
        state: stripped,
        exact: { parent: firstTurn, suffixLength: n - 2 },
        project: { parent: leaf, suffixLength: 1 }
      }
    ]
  }
}

const check = (label: string, got: Found, want: Found): void => {
  if (got.parent !== want.parent || got.suffixLength !== want.suffixLength) {
    throw new Error(
      `prefix-match bench setup is wrong: ${label} found (${got.parent.slice(0, 8)}, suffix ${got.suffixLength}), ` +
        `expected (${want.parent.slice(0, 8)}, suffix ${want.suffixLength})`
    )
  }
}

const run = async (): Promise<Harness.BenchResult> => {
  const rows: Array<Record<string, string>> = []
  for (const n of [8, 32, 128, 256]) {
    const setup = cases(n)
    for (const c of setup.cases) {
      check(`reference ${c.name} n=${n}`, referenceMatch(setup.forest, c.state), c.exact)
      check(`prefixHashes ${c.name} n=${n}`, prefixHashesMatch(setup.forest, c.state), c.exact)
      check(`Matching.match ${c.name} n=${n}`, projectMatch(setup.forest, c.state), c.project)
      const times = Harness.compare([
        { name: "reference", run: () => referenceMatch(setup.forest, c.state) },
        { name: "prefixHashes", run: () => prefixHashesMatch(setup.forest, c.state) },
        { name: "match", run: () => projectMatch(setup.forest, c.state) }
      ])
      const reference = times.get("reference") ?? Number.NaN
      const onePass = times.get("prefixHashes") ?? Number.NaN
      const match = times.get("match") ?? Number.NaN
      rows.push({
        messages: String(n),
        request: c.name,
        "reference k=n..1": Harness.formatMs(reference),
        "prefixHashes": Harness.formatMs(onePass),
        "Matching.match": Harness.formatMs(match),
        "ref/match": Harness.formatRatio(reference / match),
        "1-pass/match": Harness.formatRatio(onePass / match)
      })
    }
  }
  return {
    title: "Prefix matching (time per match; ~300-byte messages)",
    rows,
    notes: [
      "ref/match: how many times longer the reference's hash-every-prefix loop takes than Matching.match (>1 = match is faster).",
      "1-pass/match: the reference rule with StateHash.prefixHashes (one pass over the bytes) relative to Matching.match.",
      "next turn = committed history + one new tool message; new subtree = same messages with changed tools (nothing " +
      "matches, the reference's O(n²)-byte worst case); tolerated = every assistant message echoed without its " +
      "reasoning_content (the reference finds only the first observation, Matching.match tolerates and finds the leaf)."
    ]
  }
}

export const bench: Harness.Bench = { name: "prefix", run }
