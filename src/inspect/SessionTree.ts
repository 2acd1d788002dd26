/**
 * A Session's detail as `inspect` opens it, as pure data: its SessionForest tree (depth-first, drift points marked), its
 * samples' token views, and the search over a run (docs/inspect.md).
 *
 * **Details**
 * The run, its Sessions and their summary rows are src/inspect/RunView.ts; this module is what is built only when a
 * Session is opened (the bulk: trees and token rows) and the search that finds Sessions by id, name or token text.
 */
import type * as Drift from "../forest/Drift.ts"
import type * as Canonical from "../protocol/Canonical.ts"
import type * as ForestDump from "./ForestDump.ts"
import * as RunView from "./RunView.ts"
import * as Tokens from "./Tokens.ts"

/** One state of a RunView.Session's tree as the page draws it (depth-first, a parent before its children). */
export interface TreeNode {
  readonly hash: string
  /** Position of the parent in the list; null for the root. */
  readonly parent: number | null
  readonly depth: number
  readonly kind: "obs" | "resp"
  readonly tokens: number
  readonly children: number
  /** The messages this state added (empty when only the lineage's hashes are known). */
  readonly messages: ReadonlyArray<Canonical.Message>
  /** Export names of the samples exported at this state (null: the implicit export). */
  readonly exports: ReadonlyArray<string | null>
  readonly leaf: boolean
  readonly drift: Drift.Divergence | null
  readonly status: "completed" | "truncated" | null
  readonly request_id: string | null
  readonly weight_versions: ReadonlyArray<string>
  readonly abort_count: number
  readonly attempt_lengths: ReadonlyArray<number>
  /** Attempts whose SGLang worker died under them (resumed on a live worker). */
  readonly moved_attempts: ReadonlyArray<{ readonly attempt: number; readonly worker: string; readonly cause: string }>
  readonly parser_failures: number
  readonly wall_s: number | null
  readonly generation_s: number | null
}

/** A RunView.Session opened: its row, its tree and each sample's token view. */
export interface SessionDetail {
  readonly row: RunView.SessionRow
  /** Where the tree came from: the whole forest, or only the exported lineages (older dumps), or nothing. */
  readonly tree_source: "forest" | "lineages" | "none"
  readonly tree: ReadonlyArray<TreeNode>
  readonly samples: ReadonlyArray<Tokens.TokenView>
}

interface Draft {
  hash: string
  parent: string | null
  kind: "obs" | "resp"
  tokens: number
  messages: ReadonlyArray<Canonical.Message>
  node: ForestDump.DumpNode | undefined
}

const parserFailuresByRequest = (session: RunView.Session): Map<string, number> => {
  const out = new Map<string, number>()
  for (const s of session.samples) {
    for (const [rid, n] of Object.entries(s.debug?.parser_failures_by_request ?? {})) out.set(rid, n)
  }
  return out
}

/** A RunView.Session's tree, depth-first: from its forest, or else from its exported lineages' hashes. */
export const tree = (
  session: RunView.Session
): { readonly source: SessionDetail["tree_source"]; readonly nodes: ReadonlyArray<TreeNode> } => {
  const drafts = new Map<string, Draft>()
  let root: string | undefined
  let source: SessionDetail["tree_source"] = "none"
  if (session.forest !== undefined) {
    source = "forest"
    root = session.forest.root
    for (const n of session.forest.nodes) {
      drafts.set(n.hash, {
        hash: n.hash,
        parent: n.parent,
        kind: n.kind,
        tokens: n.tokens.length,
        messages: n.messages,
        node: n
      })
    }
  } else {
    for (const s of session.samples) {
      const lineage = s.debug?.state_hashes ?? []
      lineage.forEach((h, i) => {
        if (i === 0) root ??= h.hash
        if (!drafts.has(h.hash)) {
          drafts.set(h.hash, {
            hash: h.hash,
            parent: i === 0 ? null : lineage[i - 1]!.hash,
            kind: h.kind,
            tokens: h.tokens,
            messages: [],
            node: undefined
          })
        }
      })
    }
    if (drafts.size > 0) source = "lineages"
  }
  if (root === undefined) return { source, nodes: [] }
  const children = new Map<string, Array<string>>()
  for (const d of drafts.values()) {
    if (d.parent === null) continue
    const list = children.get(d.parent)
    if (list === undefined) children.set(d.parent, [d.hash])
    else list.push(d.hash)
  }
  const exportsAt = new Map<string, Array<string | null>>()
  for (const s of session.samples) {
    const leaf = s.debug?.leaf_state_hash
    if (leaf === undefined || leaf === null) continue
    const list = exportsAt.get(leaf)
    if (list === undefined) exportsAt.set(leaf, [s.exportName])
    else list.push(s.exportName)
  }
  const drift = session.forest === undefined ? new Map<string, Drift.Divergence>() : RunView.driftPoints(session.forest)
  const failures = parserFailuresByRequest(session)
  const out: Array<TreeNode> = []
  // Iterative depth-first walk (a long conversation is a deep chain).
  const stack: Array<{ readonly hash: string; readonly parent: number | null; readonly depth: number }> = [{
    hash: root,
    parent: null,
    depth: 0
  }]
  while (stack.length > 0) {
    const { hash, parent, depth } = stack.pop()!
    const d = drafts.get(hash)
    if (d === undefined) continue
    const kids = children.get(hash) ?? []
    const n = d.node
    out.push({
      hash,
      parent,
      depth,
      kind: d.kind,
      tokens: d.tokens,
      children: kids.length,
      messages: d.messages,
      exports: exportsAt.get(hash) ?? [],
      leaf: kids.length === 0 && parent !== null,
      drift: drift.get(hash) ?? null,
      status: n?.status ?? null,
      request_id: n?.request_id ?? null,
      weight_versions: n?.weight_versions ?? [],
      abort_count: n?.abort_count ?? 0,
      attempt_lengths: n?.attempt_lengths ?? [],
      moved_attempts: n?.moved_attempts ?? [],
      parser_failures: n?.request_id === undefined ? 0 : failures.get(n.request_id) ?? 0,
      wall_s: n?.wall_elapsed_s ?? null,
      generation_s: n?.generation_elapsed_s ?? null
    })
    const me = out.length - 1
    for (let i = kids.length - 1; i >= 0; i--) stack.push({ hash: kids[i]!, parent: me, depth: depth + 1 })
  }
  return { source, nodes: out }
}

/** A RunView.Session's detail: its tree and the token view of every sample (`vocab`: the run's tokenizer). */
export const detail = (run: RunView.Run, session: RunView.Session, vocab: Tokens.Vocabulary): SessionDetail => {
  const { source, nodes } = tree(session)
  const byHash = new Map<string, ForestDump.DumpNode>()
  for (const n of session.forest?.nodes ?? []) byHash.set(n.hash, n)
  return {
    row: RunView.sessionRow(session, run.options),
    tree_source: source,
    tree: nodes,
    samples: session.samples.map((s) => Tokens.view(s, byHash, parserFailuresByRequest(session), vocab))
  }
}

/** Sessions whose id contains `query`, or whose prompt or response text does (case-insensitive); their keys. */
export const search = (run: RunView.Run, query: string): ReadonlyArray<string> => {
  const q = query.toLowerCase()
  if (q === "") return run.sessions.map((s) => s.key)
  return run.sessions
    .filter((s) =>
      s.sessionId.toLowerCase().includes(q) ||
      s.samples.some((x) => x.prompt.toLowerCase().includes(q) || x.response.toLowerCase().includes(q))
    )
    .map((s) => s.key)
}
