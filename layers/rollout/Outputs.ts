/**
 * The files a rollout writes (docs/outputs.md): `rollout_<id>.jsonl` and `metrics.jsonl` per step, the Eval files and
 * `eval_metrics.jsonl` under `--output-dir`, and the debug dumps of `--save-debug-rollout-data`.
 *
 * **Details**
 * Every file is written atomically (temporary file, then rename), and the metric files are rewritten whole after each
 * step or Eval dataset, so a reader never sees a half-written line. Without `--output-dir` (or
 * `--save-debug-rollout-data`) the corresponding writes do nothing. The records themselves are shaped by
 * `src/rollout/Records.ts`.
 */
import { Context, Effect, Layer } from "effect"
import { join } from "node:path"
import type { TrainingSample } from "../../src/forest/TrainingSample.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as RolloutConfig from "./RolloutConfig.ts"
import * as Telemetry from "./Telemetry.ts"

/** The output files of one `run`: the metric files accumulate over its steps and Eval runs. */
export interface RunOutputs {
  /** Write a step's samples (`rollout_<id>.jsonl`) and rewrite `metrics.jsonl` with its line appended. */
  readonly step: (
    rolloutId: number,
    samples: ReadonlyArray<TrainingSample>,
    metricLine: unknown
  ) => Effect.Effect<void, Telemetry.OutputWriteError>
  /** Write one Eval dataset's samples (`eval_<after>_<name>.jsonl`) and remember its `eval_metrics.jsonl` line. */
  readonly evalDataset: (
    afterSteps: number,
    dataset: string,
    samples: ReadonlyArray<TrainingSample>,
    metricLine: unknown
  ) => Effect.Effect<void, Telemetry.OutputWriteError>
  /** Rewrite `eval_metrics.jsonl` after an Eval run. */
  readonly evalMetrics: () => Effect.Effect<void, Telemetry.OutputWriteError>
  /** Files written so far, each once, in first-write order. */
  readonly files: () => ReadonlyArray<string>
}

export interface OutputsShape {
  /** Start the outputs of one run. */
  readonly openRun: () => Effect.Effect<RunOutputs>
  /**
   * Write a debug dump (`--save-debug-rollout-data` with `{rollout_id}` replaced by `file`), one record per sample
   * tagged with `rolloutId`.
   */
  readonly writeDebug: (
    file: number | string,
    rolloutId: number | string,
    samples: ReadonlyArray<TrainingSample>,
    debug: ReadonlyArray<Records.ContextDebug | undefined>
  ) => Effect.Effect<void, Telemetry.OutputWriteError>
}

const make = Effect.gen(function*() {
  const settings = yield* RolloutConfig.RolloutConfig
  const dir = settings.outputDir

  const openRun = Effect.fn("Outputs.openRun")(function*() {
    const files: Array<string> = []
    const metricLines: Array<unknown> = []
    const evalLines: Array<unknown> = []
    const write = (path: string, values: ReadonlyArray<unknown>) =>
      Telemetry.writeFileAtomic(path, Telemetry.jsonl(values)).pipe(
        Effect.tap(() => Effect.sync(() => {
          if (!files.includes(path)) files.push(path)
        }))
      )

    const step = Effect.fn("Outputs.step")(
      function*(rolloutId: number, samples: ReadonlyArray<TrainingSample>, metricLine: unknown) {
        metricLines.push(metricLine)
        if (dir === undefined) return
        yield* write(join(dir, `rollout_${rolloutId}.jsonl`), samples)
        yield* write(join(dir, "metrics.jsonl"), metricLines)
      }
    )
    const evalDataset = Effect.fn("Outputs.evalDataset")(
      function*(afterSteps: number, dataset: string, samples: ReadonlyArray<TrainingSample>, metricLine: unknown) {
        if (dir !== undefined) yield* write(join(dir, `eval_${afterSteps}_${dataset}.jsonl`), samples)
        evalLines.push(metricLine)
      }
    )
    const evalMetrics = Effect.fn("Outputs.evalMetrics")(function*() {
      if (dir !== undefined) yield* write(join(dir, "eval_metrics.jsonl"), evalLines)
    })
    return { step, evalDataset, evalMetrics, files: () => [...files] } satisfies RunOutputs
  })

  const writeDebug = Effect.fn("Outputs.writeDebug")(function*(
    file: number | string,
    rolloutId: number | string,
    samples: ReadonlyArray<TrainingSample>,
    debug: ReadonlyArray<Records.ContextDebug | undefined>
  ) {
    if (settings.saveDebugRolloutData === undefined) return
    yield* Telemetry.writeFileAtomic(
      Telemetry.debugDumpPath(settings.saveDebugRolloutData, file),
      Telemetry.jsonl(Records.debugRecords(samples, debug, rolloutId))
    )
  })

  return { openRun, writeDebug } satisfies OutputsShape
})

/** The rollout's output files. */
export class Outputs extends Context.Service<Outputs, OutputsShape>()("relax-agentic/Outputs") {
  static readonly layer: Layer.Layer<Outputs, never, RolloutConfig.RolloutConfig> = Layer.effect(Outputs, make)
}
