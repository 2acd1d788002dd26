/**
 * A sample's token view: every token of the training view with its text, id, loss mask and logprob, the response
 * turns, and the engine attempts a resumed turn was generated in (docs/inspect.md "Token view").
 *
 * **Details**
 * Columns cover the whole sample (prompt and continuation), so position `i` is `tokens[i]`. `mask` is -1 on the
 * prompt, then the sample's loss mask; `logprob` is null where the engine gave none (prompt, observations). A sample
 * without the training view (a debug record written before `inspect`) gets its mask from the lineage's node kinds
 * and its logprobs from the forest's responses, when the record has them.
 */
import type * as TrainingSample from "../forest/TrainingSample.ts"
import type * as ForestDump from "./ForestDump.ts"
import type * as RunView from "./RunView.ts"

/** One token's text and whether it is a special token, from the tokenizer the run used. */
export interface Vocabulary {
  readonly text: (id: number) => string
  readonly special: (id: number) => boolean
}

/** One engine attempt of a response turn, in sample positions. */
export interface Attempt {
  readonly start: number
  readonly end: number
  readonly weight_version: string
}

/** One response turn, in sample positions `[start, end)`. */
export interface TurnSpan {
  readonly turn_idx: number
  readonly start: number
  readonly end: number
  readonly request_id: string | null
  readonly status: "completed" | "truncated" | null
  readonly weight_versions: ReadonlyArray<string>
  readonly abort_count: number
  /** The attempts when the turn was resumed after an engine abort and their lengths were recorded; else null. */
  readonly attempts: ReadonlyArray<Attempt> | null
  readonly parser_failures: number
}

/** The token view of one sample. */
export interface TokenView {
  readonly export_name: string | null
  readonly index: number
  readonly reward: TrainingSample.Reward
  readonly advantage: TrainingSample.Advantage
  readonly status: "completed" | "truncated"
  readonly leaf: string | null
  readonly prompt_length: number
  readonly ids: ReadonlyArray<number>
  readonly text: ReadonlyArray<string>
  /** -1 on the prompt, else the loss mask (1 generated, 0 observation). */
  readonly mask: ReadonlyArray<number>
  readonly logprob: ReadonlyArray<number | null>
  /** Positions of special tokens. */
  readonly special: ReadonlyArray<number>
  readonly turns: ReadonlyArray<TurnSpan>
  /** How many tokens have loss mask 1. */
  readonly generated: number
  /** Where the mask came from: the sample's `loss_mask`, or the lineage's node kinds (older dumps). */
  readonly mask_source: "loss_mask" | "lineage"
}

/** The continuation's mask and logprobs from the lineage (node kinds, and the forest's responses when known). */
const fromLineage = (
  sample: RunView.Sample,
  nodes: ReadonlyMap<string, ForestDump.DumpNode>
): {
  readonly mask: Array<number>
  readonly logprob: Array<number | null>
  readonly spans: Array<readonly [number, number]>
} => {
  const mask: Array<number> = []
  const logprob: Array<number | null> = []
  const spans: Array<readonly [number, number]> = []
  let started = false
  for (const h of sample.debug?.state_hashes ?? []) {
    if (h.kind === "resp") started = true
    if (!started) continue
    const node = nodes.get(h.hash)
    if (h.kind === "resp") spans.push([mask.length, mask.length + h.tokens])
    for (let i = 0; i < h.tokens; i++) {
      mask.push(h.kind === "resp" ? 1 : 0)
      logprob.push(h.kind === "resp" ? node?.logprobs?.[i] ?? null : null)
    }
  }
  return { mask, logprob, spans }
}

/** The token view of a sample; `nodes` are its Session's forest nodes by hash (empty without a forest). */
export const view = (
  sample: RunView.Sample,
  nodes: ReadonlyMap<string, ForestDump.DumpNode>,
  parserFailures: ReadonlyMap<string, number>,
  vocab: Vocabulary
): TokenView => {
  const ids = sample.tokens
  const promptLength = ids.length - sample.responseLength
  const lineage = fromLineage(sample, nodes)
  const own = sample.lossMask !== undefined && sample.lossMask.length === sample.responseLength
    ? sample.lossMask
    : undefined
  const haveMask = own !== undefined
  const continuationMask = own ?? lineage.mask
  const continuationLogprob: ReadonlyArray<number | null> = sample.logprobs !== undefined && haveMask
    ? sample.logprobs.map((lp, i) => (continuationMask[i] === 1 ? lp : null))
    : lineage.logprob
  const spans = sample.turnSpans ?? lineage.spans
  const mask = new Array<number>(ids.length)
  const logprob = new Array<number | null>(ids.length)
  const text = new Array<string>(ids.length)
  const special: Array<number> = []
  let generated = 0
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!
    text[i] = vocab.text(id)
    if (vocab.special(id)) special.push(i)
    if (i < promptLength) {
      mask[i] = -1
      logprob[i] = null
    } else {
      const m = continuationMask[i - promptLength] ?? 0
      mask[i] = m
      if (m === 1) generated++
      logprob[i] = continuationLogprob[i - promptLength] ?? null
    }
  }
  const turns = spans.map(([s, e], k): TurnSpan => {
    const t = sample.debug?.turns[k]
    const node = t === undefined ? undefined : nodes.get(t.resp_state_hash)
    const start = promptLength + s
    const end = promptLength + e
    const lengths = node?.attempt_lengths
    let attempts: Array<Attempt> | null = null
    if (lengths !== undefined && lengths.length > 1) {
      const list: Array<Attempt> = []
      let at = start
      lengths.forEach((n, a) => {
        list.push({ start: at, end: Math.min(end, at + n), weight_version: node?.weight_versions?.[a] ?? "?" })
        at += n
      })
      attempts = list
    }
    return {
      turn_idx: k,
      start,
      end,
      request_id: t?.request_id ?? null,
      status: t?.status ?? null,
      weight_versions: t?.weight_versions ?? [],
      abort_count: t?.abort_count ?? 0,
      attempts,
      parser_failures: t === undefined ? 0 : parserFailures.get(t.request_id) ?? 0
    }
  })
  return {
    export_name: sample.exportName,
    index: sample.index,
    reward: sample.reward,
    advantage: sample.advantage,
    status: sample.status,
    leaf: sample.debug?.leaf_state_hash ?? null,
    prompt_length: promptLength,
    ids,
    text,
    mask,
    logprob,
    special,
    turns,
    generated,
    mask_source: haveMask ? "loss_mask" : "lineage"
  }
}
