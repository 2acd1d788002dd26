/**
 * `rescore` (docs/debugging.md "Rescore"): recompute the rewards and credit of a run's saved training samples with
 * the Credit service a rollout uses (its Reward, GRPO, custom advantage, dynamic filter, whitening and metrics), with
 * no agent and no engine, and write new sample files, metrics and a summary.
 *
 * **Details**
 * Each `rollout_<id>.jsonl` is one step; its Groups are its samples by `group_index`, its Sessions by `session_id`,
 * in file order. Unlike a rollout, where a reward the agent exported wins over `--custom-rm-path`, the given RM
 * scores every sample (re-scoring is the point): each sample's reward is cleared before Credit scores it, and the
 * recorded one is kept as `metadata.original_reward`; `keepAgentRewards` keeps the recorded rewards and scores only
 * samples without one (the rollout's precedence). The ordinary RM runs as Credit's Reward step in Eval mode (so a
 * custom advantage hook does not skip it, as it does in a training rollout), then Credit scores the Group for training
 * with the rewards set. Groups a rollout dropped are not in the files, so they stay dropped; Groups the new hooks
 * filter are left out of the new files and counted. A sample line that lacks a field of a training sample is an
 * error naming the file, the line and the field.
 */
import { Data, Effect, Exit, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type * as CreditOptions from "../../src/credit/CreditOptions.ts"
import type * as CreditGroup from "../../src/credit/Group.ts"
import * as Metrics from "../../src/credit/Metrics.ts"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as SchemaMessage from "../../src/json/SchemaMessage.ts"
import * as PixelSidecar from "../../src/rollout/PixelSidecar.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as Credit from "../credit/Credit.ts"
import * as Files from "../rollout/Files.ts"

/** What `rescore` changes, and where it writes. */
export interface RescoreOptions {
  readonly customRmPath?: string | undefined
  readonly groupRm?: boolean | undefined
  readonly customAdvantagePath?: string | undefined
  readonly dynamicSamplingFilterPath?: string | undefined
  readonly rewardKey?: string | undefined
  /** Keep the recorded rewards; the RM scores only samples without one (the rollout's precedence). */
  readonly keepAgentRewards?: boolean | undefined
  readonly disableGrpoStdNormalization?: boolean | undefined
  readonly disableRewardsNormalization?: boolean | undefined
  readonly normalizeAdvantages?: boolean | undefined
  readonly logPassrate?: boolean | undefined
  /** Where the new files go (default: `<run dir>/rescore`). */
  readonly outputDir?: string | undefined
  /** Directory hook paths are relative to (default: the working directory). */
  readonly cwd?: string | undefined
}

/** A sample whose primary reward changed. */
export interface ChangedReward {
  readonly sessionId: string
  readonly exportName: string | null
  readonly before: number | null
  readonly after: number | null
}

/** Mean and extremes of a step's values (all 0 for none). */
export interface Spread {
  readonly mean: number
  readonly min: number
  readonly max: number
}

/** One step's rescoring. */
export interface StepSummary {
  readonly rolloutId: number
  readonly file: string
  readonly samples: number
  readonly groups: number
  readonly changedRewards: ReadonlyArray<ChangedReward>
  /** Share of samples with a primary reward of 1, before and after. */
  readonly passrate: { readonly before: number; readonly after: number }
  /** The samples' advantages (a per-token advantage by its mean), before and after. */
  readonly advantage: { readonly before: Spread; readonly after: Spread }
  /** Groups the new hooks filtered (their `group_index`). */
  readonly filteredGroups: ReadonlyArray<number>
  readonly metrics: Readonly<Record<string, number>>
}

export interface RescoreReport {
  readonly outputDir: string
  readonly steps: ReadonlyArray<StepSummary>
}

/** The run cannot be re-scored: what was wrong, where, and what to do. */
export class RescoreError extends Data.TaggedError("RescoreError")<{
  readonly reason: "read" | "no-samples" | "sample" | "credit" | "write"
  readonly path: string
  readonly detail: string
}> {
  override get message() {
    switch (this.reason) {
      case "read":
        return `${this.path}: cannot read it (${this.detail}); give a run's --output-dir`
      case "no-samples":
        return `${this.path}: no rollout_<id>.jsonl in it; give the --output-dir of a training rollout`
      case "sample":
        return `${this.path}: ${this.detail}; rescore reads the training samples a rollout writes (docs/outputs.md)`
      case "credit":
        return `${this.path}: ${this.detail}`
      case "write":
        return `${this.path}: cannot write it (${this.detail}); choose another --output-dir`
    }
  }
}

const decodeSample = Schema.decodeUnknownExit(TrainingSample.TrainingSample)

/** The training sample files of a run directory, by step. */
const stepFiles = (dir: string) =>
  Effect.try({
    try: () =>
      Fs.readdirSync(dir).flatMap((name) => {
        const m = /^rollout_(\d+)\.jsonl$/.exec(name)
        return m === null ? [] : [{ rolloutId: Number(m[1]), file: Path.join(dir, name) }]
      }).sort((a, b) => a.rolloutId - b.rolloutId),
    catch: (error) => new RescoreError({ reason: "read", path: dir, detail: String(error) })
  })

/** A step file's samples; a line that is not a whole training sample names its first missing or wrong field. */
const readSamples = (file: string) =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => Fs.readFileSync(file, "utf8"),
      catch: (error) => new RescoreError({ reason: "read", path: file, detail: String(error) })
    })
    const samples: Array<TrainingSample.TrainingSample> = []
    const lines = text.split("\n")
    for (let i = 0; i < lines.length; i++) {
      if (lines[i]!.trim() === "") continue
      const at = `${file}:${i + 1}`
      const value = yield* Effect.try({
        try: () => JSON.parse(lines[i]!) as unknown,
        catch: (error) => new RescoreError({ reason: "sample", path: at, detail: `not JSON (${String(error)})` })
      })
      const decoded = decodeSample(value)
      if (Exit.isFailure(decoded)) {
        const reason = decoded.cause.reasons[0]
        const detail = reason?._tag === "Fail" ? SchemaMessage.format(reason.error.issue) : String(decoded.cause)
        return yield* new RescoreError({ reason: "sample", path: at, detail: `not a training sample: ${detail}` })
      }
      samples.push(decoded.value)
    }
    return samples
  })

/** The step's Groups in file order, each with its Sessions in file order. */
const groupsOf = (samples: ReadonlyArray<TrainingSample.TrainingSample>): Array<CreditGroup.Group> => {
  const groups = new Map<number, Map<string, Array<TrainingSample.TrainingSample>>>()
  for (const sample of samples) {
    const sessions = groups.get(sample.group_index) ?? new Map()
    groups.set(sample.group_index, sessions)
    sessions.set(sample.session_id, [...(sessions.get(sample.session_id) ?? []), sample])
  }
  return [...groups].map(([groupIndex, sessions]) => ({
    groupIndex,
    sessions: [...sessions].map(([sessionId, exports]) => ({ sessionId, exports }))
  }))
}

const primary = (sample: TrainingSample.TrainingSample, key: string | undefined): number | null =>
  Records.primaryReward(sample, key)

const meanAdvantage = (sample: TrainingSample.TrainingSample): number | undefined => {
  const a = sample.advantage
  if (a === null) return undefined
  if (typeof a === "number") return a
  return a.length === 0 ? 0 : a.reduce((s, x) => s + x, 0) / a.length
}

const spread = (values: ReadonlyArray<number>): Spread =>
  values.length === 0 ? { mean: 0, min: 0, max: 0 } : (({ mean, min, max }) => ({ mean, min, max }))(
    Metrics.statistics(values)
  )

const passrate = (samples: ReadonlyArray<TrainingSample.TrainingSample>, key: string | undefined): number =>
  samples.length === 0 ? 0 : samples.filter((s) => primary(s, key) === 1).length / samples.length

/** The credit options of a rescoring, for Groups of `groupSize` Sessions. */
export const creditOptionsOf = (options: RescoreOptions, groupSize: number): CreditOptions.CreditOptions => ({
  groupRm: options.groupRm ?? false,
  disableGrpoStdNormalization: options.disableGrpoStdNormalization ?? false,
  disableRewardsNormalization: options.disableRewardsNormalization ?? false,
  normalizeAdvantages: options.normalizeAdvantages ?? false,
  nSamplesPerPrompt: groupSize,
  logPassrate: options.logPassrate ?? false,
  useDynamicBatchSize: false,
  ...(options.rewardKey === undefined ? {} : { rewardKey: options.rewardKey }),
  ...(options.customRmPath === undefined ? {} : { customRmPath: options.customRmPath }),
  ...(options.customAdvantagePath === undefined ? {} : { customAdvantagePath: options.customAdvantagePath }),
  ...(options.dynamicSamplingFilterPath === undefined
    ? {}
    : { dynamicSamplingFilterPath: options.dynamicSamplingFilterPath })
})

/** One step through Credit: the re-scored rows of its kept Groups, and the Groups filtered. */
const rescoreStep = (
  credit: Credit.CreditShape,
  samples: ReadonlyArray<TrainingSample.TrainingSample>,
  options: RescoreOptions
) =>
  Effect.gen(function*() {
    const rescoring = options.customRmPath !== undefined && options.keepAgentRewards !== true
    const kept: Array<TrainingSample.TrainingSample> = []
    const filtered: Array<number> = []
    for (const group of groupsOf(samples)) {
      // The recorded reward stays beside the new one; the RM then scores every row.
      const cleared: CreditGroup.Group = {
        groupIndex: group.groupIndex,
        sessions: group.sessions.map((session) => ({
          sessionId: session.sessionId,
          exports: session.exports.map((sample) =>
            rescoring
              ? { ...sample, reward: null, metadata: { ...sample.metadata, original_reward: sample.reward } }
              : sample
          )
        }))
      }
      // An ordinary RM scores in Credit's Reward step (Eval mode: a custom advantage hook does not skip it there).
      const rewarded = options.customRmPath !== undefined && options.groupRm !== true
        ? yield* credit.scoreGroup(cleared, "eval")
        : undefined
      const scored = rewarded === undefined || rewarded === "filtered"
        ? cleared
        : { groupIndex: group.groupIndex, sessions: reGroup(cleared, rewarded) }
      const credited = yield* credit.scoreGroup(scored, "train")
      if (credited === "filtered") filtered.push(group.groupIndex)
      else kept.push(...credited)
    }
    return { kept, filtered }
  })

/** The Sessions of `group` with their rows replaced by `rows` (in the order the Group lists them). */
const reGroup = (
  group: CreditGroup.Group,
  rows: ReadonlyArray<TrainingSample.TrainingSample>
): ReadonlyArray<CreditGroup.Session> => {
  let next = 0
  return group.sessions.map((session) => ({
    sessionId: session.sessionId,
    exports: session.exports.map(() => rows[next++]!)
  }))
}

/** Re-score the training samples of the run in `runDir`. */
export const rescore = (runDir: string, options: RescoreOptions = {}) =>
  Effect.gen(function*() {
    const dir = Path.resolve(runDir)
    const files = yield* stepFiles(dir)
    if (files.length === 0) return yield* new RescoreError({ reason: "no-samples", path: dir, detail: "" })
    const outputDir = Path.resolve(options.outputDir ?? Path.join(dir, "rescore"))
    yield* Effect.tryPromise({
      try: () => Files.ensureDirectory(outputDir),
      catch: (error) => new RescoreError({ reason: "write", path: outputDir, detail: String(error) })
    })
    const steps: Array<StepSummary> = []
    const metricLines: Array<unknown> = []
    for (const { rolloutId, file } of files) {
      const samples = yield* readSamples(file)
      const groups = groupsOf(samples)
      const groupSize = groups[0]?.sessions.length ?? 1
      const credit = yield* Credit.make(creditOptionsOf(options, groupSize), { cwd: options.cwd ?? process.cwd() })
      const { kept, filtered } = yield* rescoreStep(credit, samples, options)
      const finished = yield* credit.finishStep(kept, "train")
      const key = options.rewardKey
      const before = new Map(samples.map((s) => [`${s.session_id}\u0000${s.export_name}`, s]))
      const changedRewards = finished.samples.flatMap((after): Array<ChangedReward> => {
        const old = before.get(`${after.session_id}\u0000${after.export_name}`)
        const was = old === undefined ? null : primary(old, key)
        const now = primary(after, key)
        return was === now
          ? []
          : [{ sessionId: after.session_id, exportName: after.export_name, before: was, after: now }]
      })
      yield* Files.writeFileAtomic(
        Path.join(outputDir, `rollout_${rolloutId}.jsonl`),
        // A vision sample's pixel_values stay in the run's sidecar, named relative to the new file.
        finished.samples.map((s) => JSON.stringify(PixelSidecar.relocate(s, dir, outputDir))).join("\n") +
          (finished.samples.length > 0 ? "\n" : "")
      ).pipe(Effect.mapError((error) => new RescoreError({ reason: "write", path: outputDir, detail: String(error) })))
      metricLines.push(Records.stepMetricLine(
        rolloutId,
        { accepted: groups.length - filtered.length, dropped: 0, filtered: filtered.length },
        finished.metrics
      ))
      steps.push({
        rolloutId,
        file,
        samples: samples.length,
        groups: groups.length,
        changedRewards,
        passrate: { before: passrate(samples, key), after: passrate(finished.samples, key) },
        advantage: {
          before: spread(samples.flatMap((s) => meanAdvantage(s) ?? [])),
          after: spread(finished.samples.flatMap((s) => meanAdvantage(s) ?? []))
        },
        filteredGroups: filtered,
        metrics: finished.metrics
      })
    }
    const write = (name: string, text: string) =>
      Files.writeFileAtomic(Path.join(outputDir, name), text).pipe(
        Effect.mapError((error) => new RescoreError({ reason: "write", path: outputDir, detail: String(error) }))
      )
    yield* write("metrics.jsonl", metricLines.map((line) => JSON.stringify(line)).join("\n") + "\n")
    const report: RescoreReport = { outputDir, steps }
    yield* write("rescore_summary.json", JSON.stringify(report, null, 2) + "\n")
    return report
  }).pipe(
    Effect.catchTags({
      RewardError: (error) => Effect.fail(new RescoreError({ reason: "credit", path: runDir, detail: error.message })),
      GroupRewardError: (error) =>
        Effect.fail(new RescoreError({ reason: "credit", path: runDir, detail: error.message })),
      AdvantageError: (error) =>
        Effect.fail(new RescoreError({ reason: "credit", path: runDir, detail: error.message })),
      FilterError: (error) => Effect.fail(new RescoreError({ reason: "credit", path: runDir, detail: error.message })),
      NormalizationError: (error) =>
        Effect.fail(new RescoreError({ reason: "credit", path: runDir, detail: error.message })),
      CreditConfigError: (error) =>
        Effect.fail(new RescoreError({ reason: "credit", path: runDir, detail: error.message })),
      BatchingError: (error) => Effect.fail(new RescoreError({ reason: "credit", path: runDir, detail: error.message }))
    })
  )

/** The lines `rescore` prints: per step, what changed. */
export const reportLines = (report: RescoreReport): ReadonlyArray<string> => [
  ...report.steps.map((step) =>
    `rescore rollout_${step.rolloutId}: ${step.samples} sample(s) in ${step.groups} Group(s); ` +
    `${step.changedRewards.length} reward(s) changed; passrate ${step.passrate.before.toFixed(3)} -> ` +
    `${step.passrate.after.toFixed(3)}; advantage mean ${step.advantage.before.mean.toFixed(3)} -> ` +
    `${step.advantage.after.mean.toFixed(3)}, range [${step.advantage.before.min.toFixed(3)}, ` +
    `${step.advantage.before.max.toFixed(3)}] -> [${step.advantage.after.min.toFixed(3)}, ` +
    `${step.advantage.after.max.toFixed(3)}]; ${step.filteredGroups.length} Group(s) filtered`
  ),
  `rescore: wrote ${report.outputDir} (rollout_<id>.jsonl, metrics.jsonl, rescore_summary.json)`
]
