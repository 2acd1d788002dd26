/**
 * The records a rollout hands out, as pure functions: Transfer order of a step's samples, debug-dump records, metric
 * lines and the log lines that quote samples and Eval results (docs/outputs.md).
 *
 * **Details**
 * `layers/rollout/Rollout.ts` orchestrates steps and Eval and `layers/rollout/Outputs.ts` writes the files; everything they print or
 * write is shaped here, so the exact field order and wording is tested without running a rollout.
 */
import { Result } from "effect"
import * as Reward from "../credit/Reward.ts"
import type * as DebugView from "../forest/DebugView.ts"
import * as Drift from "../forest/Drift.ts"
import type * as TrainingSample from "../forest/TrainingSample.ts"
import type * as ForestDump from "../inspect/ForestDump.ts"
import type * as ReplayRecord from "../replay/Record.ts"
import type * as Results from "../trainer/Results.ts"
import * as PixelSidecar from "./PixelSidecar.ts"

/** The per-Session counters a debug record reports (the generation core's counters of the exported Session). */
export interface DebugCounters {
  readonly requests: number
  readonly generations: number
  /** Tool-call blocks the parser could not read (committed as text). */
  readonly parserFailures: number
  /** Tool calls the parser dropped (an unknown tool name, ...). */
  readonly droppedToolCalls: number
  /** Request id → tool calls the parser dropped or could not read in that request (only requests with some). */
  readonly parserFailedRequests?: ReadonlyMap<string, number> | undefined
  /** Milliseconds its backend attempts waited for KV room (`--agentic-program-admission`); absent: none waited. */
  readonly admissionWaitMs?: number | undefined
}

/**
 * `rollout/parser_failures` and `rollout/parser_failures/<parser>`: tool calls the tool-call parser dropped or could not
 * read in the training Sessions that ended during the step, whatever became of their Groups. Empty without a tool-call
 * parser.
 */
export const parserFailureMetrics = (failures: number, parser: string | undefined): Record<string, number> =>
  parser === undefined ? {} : { "rollout/parser_failures": failures, [`rollout/parser_failures/${parser}`]: failures }

/**
 * `rollout/drift` and `rollout/drift/<cause>` (every cause of src/forest/Drift.ts, `-` as `_`): model requests whose
 * echoed history diverged from a response the gateway committed, in the training Sessions that ended during the step.
 */
export const driftMetrics = (counts: ReadonlyMap<Drift.Cause, number>): Record<string, number> => {
  const out: Record<string, number> = { "rollout/drift": 0 }
  for (const cause of Drift.causes) {
    const n = counts.get(cause) ?? 0
    out["rollout/drift"]! += n
    out[`rollout/drift/${cause.replaceAll("-", "_")}`] = n
  }
  return out
}

/** The debug facts of one exported context (`--save-debug-rollout-data`). */
export interface ContextDebug {
  readonly view: DebugView.DebugView
  readonly counters: DebugCounters
  /** The Session's whole SessionForest, on the first exported context of each Session only. */
  readonly forest?: ForestDump.ForestDump
  /** The Session's replay record (src/replay/Record.ts), beside its forest. */
  readonly replay?: ReplayRecord.SessionRecord
}

/** What Transfer needs of a scored Group: its start order, its size and its samples with their debug facts. */
export interface ScoredGroup {
  /** Start order of the Group in the rollout (the order Groups were planned). */
  readonly seq: number
  /** Sessions in the Group. */
  readonly size: number
  readonly samples: ReadonlyArray<TrainingSample.TrainingSample>
  readonly debug: ReadonlyArray<ContextDebug>
}

/**
 * Renumber a partition's Groups in start order: `group_index` = position in the partition, `index` =
 * `group_index * n +` the Session's position in its Group, `rollout_id` = the partition's step (docs/outputs.md
 * "`rollout_<id>.jsonl`"). `firstGroupIndex` is how many Groups the partition already delivered: under fully async a
 * partition is paid over two steps, and its late Groups continue its numbering instead of repeating it.
 */
export const transferOrder = (
  groups: ReadonlyArray<ScoredGroup>,
  rolloutId: number,
  firstGroupIndex = 0
): { readonly samples: Array<TrainingSample.TrainingSample>; readonly debug: Array<ContextDebug> } => {
  const ordered = [...groups].sort((a, b) => a.seq - b.seq)
  const samples: Array<TrainingSample.TrainingSample> = []
  const debug: Array<ContextDebug> = []
  ordered.forEach((group, position) => {
    const groupIndex = firstGroupIndex + position
    const sessionOrder = new Map<string, number>()
    for (const sample of group.samples) {
      if (!sessionOrder.has(sample.session_id)) sessionOrder.set(sample.session_id, sessionOrder.size)
      const inGroup = sessionOrder.get(sample.session_id) ?? 0
      samples.push({
        ...sample,
        rollout_id: rolloutId,
        group_index: groupIndex,
        index: groupIndex * group.size + inGroup
      })
    }
    debug.push(...group.debug)
  })
  return { samples, debug }
}

/** One debug-dump record per sample (docs/outputs.md "The debug dump"); `debug[i]` belongs to `samples[i]`. */
export const debugRecords = (
  samples: ReadonlyArray<TrainingSample.TrainingSample>,
  debug: ReadonlyArray<ContextDebug | undefined>,
  rolloutId: number | string
): Array<unknown> =>
  samples.map((sample, i) => {
    const facts = debug[i]
    const pixels = PixelSidecar.digests(sample)
    return {
      rollout_id: rolloutId,
      session_id: sample.session_id,
      group_index: sample.group_index,
      index: sample.index,
      export_name: sample.export_name,
      terminal_status: facts?.view.terminal_status ?? sample.status,
      turn_count: facts?.view.turn_count ?? 0,
      leaf_state_hash: facts?.view.leaf_state_hash ?? null,
      state_hashes: facts?.view.state_hashes ?? [],
      turns: facts?.view.turns ?? [],
      // A response's abort count includes its lineage's (as in Relax): the last turn's is the lineage's total.
      abort_count: facts?.view.turns.at(-1)?.abort_count ?? 0,
      request_count: facts?.counters.requests ?? 0,
      generation_count: facts?.counters.generations ?? 0,
      weight_versions: sample.weight_versions,
      reward: sample.reward,
      advantage: sample.advantage,
      response_length: sample.response_length,
      tokens: sample.tokens,
      prompt: sample.prompt,
      response: sample.response,
      label: sample.label,
      metadata: sample.metadata,
      // Added for `inspect` (docs/inspect.md): the training view and the Session's whole forest.
      status: sample.status,
      loss_mask: sample.loss_mask,
      rollout_log_probs: sample.rollout_log_probs,
      turn_spans: sample.turn_spans,
      parser_failures: (facts?.counters.parserFailures ?? 0) + (facts?.counters.droppedToolCalls ?? 0),
      parser_failures_by_request: Object.fromEntries(facts?.counters.parserFailedRequests ?? []),
      // The Session's attempts' wait for KV room (docs/sglang.md "KV scheduling"), shown by `inspect`.
      ...(facts?.counters.admissionWaitMs === undefined
        ? {}
        : { admission_wait_s: facts.counters.admissionWaitMs / 1000 }),
      // The sidecar's check: per image, the shape and SHA-256 of the pixel_values rollout_<id>.jsonl points at.
      ...(pixels === undefined ? {} : { pixel_values: pixels }),
      ...(facts?.forest === undefined ? {} : { forest: facts.forest }),
      ...(facts?.replay === undefined ? {} : { replay: facts.replay })
    }
  })

/** A sample's primary reward (by `key`, or the reward itself when it is a number); null when missing. */
export const primaryReward = (sample: TrainingSample.TrainingSample, key: string | undefined): number | null => {
  if (sample.reward === null) return null
  const value = Reward.primaryValue(sample.reward, key)
  return Result.isSuccess(value) ? value.success : null
}

/** Group counts of a training step (its Schema: `src/trainer/Results.ts`). */
export type GroupCounts = Results.GroupCounts

/** One line of `metrics.jsonl` (docs/outputs.md "`metrics.jsonl`"). */
export const stepMetricLine = (
  rolloutId: number,
  groups: GroupCounts,
  metrics: Readonly<Record<string, number>>
): unknown => ({ rollout_id: rolloutId, ...groups, metrics })

/** One line of `eval_metrics.jsonl` (docs/outputs.md "Eval files"). */
export const evalMetricLine = (
  afterSteps: number,
  dataset: string,
  metrics: Readonly<Record<string, number>>,
  dropped: number
): unknown => ({ rollout_id: afterSteps, dataset, metrics, dropped })

/** Eval metrics are reported under `eval/<dataset>/`. */
export const evalMetrics = (
  dataset: string,
  metrics: Readonly<Record<string, number>>
): Record<string, number> => Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`eval/${dataset}/${k}`, v]))

const quoted = (sample: TrainingSample.TrainingSample): string => JSON.stringify([sample.prompt + sample.response])

const quotedLabel = (sample: TrainingSample.TrainingSample): string => `${JSON.stringify(sample.label).slice(0, 100)}`

/** The log line quoting a step's first sample before credit. */
export const firstSampleLine = (sample: TrainingSample.TrainingSample): string =>
  `First rollout sample: ${quoted(sample)}, label: ${quotedLabel(sample)}, reward: ${JSON.stringify(sample.reward)}`

/** The log line quoting a step's last credited sample. */
export const finishLine = (sample: TrainingSample.TrainingSample): string =>
  `Finish rollout: ${quoted(sample)}, label: ${quotedLabel(sample)}, reward: ${JSON.stringify(sample.reward)}`

/** The log line quoting an Eval dataset's first sample. */
export const evalExampleLine = (sample: TrainingSample.TrainingSample): string =>
  `eval_rollout_single_dataset example data: ${quoted(sample)} reward=${JSON.stringify(sample.reward)}`

/** The one-line summary of an Eval dataset: mean primary reward and pass rate (reward exactly 1) over its samples. */
export const evalSummaryLine = (
  dataset: string,
  afterSteps: number,
  sampleCount: number,
  rewards: ReadonlyArray<number | null>
): string => {
  const present = rewards.filter((r): r is number => r !== null)
  const passed = rewards.filter((r) => r === 1).length
  const reward = present.length === 0 ? "n/a" : (present.reduce((a, b) => a + b, 0) / present.length).toFixed(4)
  const passrate = rewards.length === 0 ? "n/a" : (passed / rewards.length).toFixed(4)
  return `eval ${dataset}: rollout=${afterSteps} samples=${sampleCount} reward=${reward} passrate=${passrate}`
}

/** JSON Lines text (one value per line, trailing newline). */
export const jsonl = (values: ReadonlyArray<unknown>): string =>
  values.map((value) => JSON.stringify(value)).join("\n") + (values.length > 0 ? "\n" : "")
