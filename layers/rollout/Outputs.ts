/**
 * The files a rollout writes (docs/outputs.md): `rollout_<id>.jsonl` and `metrics.jsonl` per step, the Eval files and
 * `eval_metrics.jsonl` under `--output-dir`, and the debug dumps of `--save-debug-rollout-data`.
 * A samples file with `pixel_values` gets its sidecar (`<name>.pixel_values.npy`, src/rollout/PixelSidecar.ts).
 *
 * **Details**
 * Before anything runs (building the layer), `--output-dir` and every directory the debug dump template names for the
 * first step are created and proved writable (a probe file written and removed): a bad path fails at startup with
 * `OutputPathError`, before any agent starts. Every file is written atomically (`Files.writeFileAtomic`), and the
 * metric files are rewritten whole after each step or Eval dataset. A write that fails is retried once; if it fails
 * again its content is saved to a fallback file under `relax-agentic-unsaved-<time>-<pid>/` in the temporary
 * directory, the failure (`OutputWriteError`, naming the path, the fallback and the fix) is kept in `failed`, and the
 * rollout stops at the end of the step. A write interrupted by a shutdown is saved to the fallback the same way (within
 * a few seconds). Without `--output-dir` (or `--save-debug-rollout-data`) the corresponding writes do nothing. The
 * records themselves are shaped by `src/rollout/Records.ts`.
 */
import { Context, Effect, Layer, Ref } from "effect"
import * as Os from "node:os"
import { basename, join } from "node:path"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as OutputPaths from "../../src/rollout/OutputPaths.ts"
import * as PixelSidecar from "../../src/rollout/PixelSidecar.ts"
import * as Records from "../../src/rollout/Records.ts"
import type * as RunReport from "../../src/rollout/RunReport.ts"
import * as Telemetry from "../observability/Telemetry.ts"
import * as Files from "./Files.ts"
import * as RolloutConfig from "./RolloutConfig.ts"

/** The output files of one `run`: the metric files accumulate over its steps and Eval runs. */
export interface RunOutputs {
  /** Write a step's samples (`rollout_<id>.jsonl`) and rewrite `metrics.jsonl` with its line appended. */
  readonly step: (
    rolloutId: number,
    samples: ReadonlyArray<TrainingSample.TrainingSample>,
    metricLine: unknown
  ) => Effect.Effect<void, Telemetry.OutputWriteError>
  /** Write one Eval dataset's samples (`eval_<after>_<name>.jsonl`) and remember its `eval_metrics.jsonl` line. */
  readonly evalDataset: (
    afterSteps: number,
    dataset: string,
    samples: ReadonlyArray<TrainingSample.TrainingSample>,
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
   * tagged with `rolloutId`. A dump that cannot be written does not cost the step its samples (they still reach the
   * caller): the error is printed as an `ERROR` line, the dump saved to the fallback file, and `failed` stops the
   * rollout before its next step.
   */
  readonly writeDebug: (
    file: number | string,
    rolloutId: number | string,
    samples: ReadonlyArray<TrainingSample.TrainingSample>,
    debug: ReadonlyArray<Records.ContextDebug | undefined>
  ) => Effect.Effect<void>
  /** The first write that failed (its content saved to a fallback file when possible); the rollout stops on it. */
  readonly failed: Effect.Effect<Telemetry.OutputWriteError | undefined>
  /** Files written where asked, outputs saved elsewhere, and writes in flight (for the end-of-run line). */
  readonly report: Effect.Effect<Pick<RunReport.Progress, "written" | "salvaged" | "inFlight">>
}

/** How long saving an interrupted write's content to the fallback may take during a shutdown. */
const salvageLimit = "5 seconds"

const make = Effect.gen(function*() {
  const settings = yield* RolloutConfig.RolloutConfig
  const telemetry = yield* Telemetry.Telemetry
  const dir = settings.outputDir
  for (const target of OutputPaths.firstStepTargets(settings)) yield* Files.probeDirectory(target)

  const startedAt = new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15)
  const fallbackDir = OutputPaths.fallbackDirectory(Os.tmpdir(), process.pid, startedAt)
  const written: Array<string> = []
  const salvaged: Array<RunReport.Salvaged> = []
  const failure = yield* Ref.make<Telemetry.OutputWriteError | undefined>(undefined)

  /** Save `text` under the fallback directory; the fallback path, or `undefined` when that failed too. */
  const salvage = (path: string, text: Files.Content) => {
    const fallback = join(fallbackDir, basename(path))
    return Files.writeFileAtomic(fallback, text).pipe(
      Effect.as(fallback),
      Effect.tap(() => Effect.sync(() => salvaged.push({ path, fallback }))),
      Effect.catch(() => Effect.succeed(undefined))
    )
  }

  const save = (path: string, text: Files.Content): Effect.Effect<void, Telemetry.OutputWriteError> =>
    Files.writeFileAtomic(path, text).pipe(
      Effect.retry({ times: 1 }),
      Effect.tap(() =>
        Effect.sync(() => {
          if (!written.includes(path)) written.push(path)
        })
      ),
      Effect.catch((error) =>
        Effect.gen(function*() {
          const fallback = yield* salvage(path, text)
          const failed = new Telemetry.OutputWriteError({ path, detail: OutputPaths.describeFsError(error), fallback })
          yield* Ref.update(failure, (first) => first ?? failed)
          return yield* failed
        })
      ),
      Effect.onInterrupt(() => salvage(path, text).pipe(Effect.timeout(salvageLimit), Effect.ignore))
    )

  const openRun = Effect.fn("Outputs.openRun")(function*() {
    const files: Array<string> = []
    // The metric files' text so far (kept as text: a step's line as objects takes several times its bytes).
    let metricsText = ""
    let evalMetricsText = ""
    const write = (path: string, values: ReadonlyArray<unknown>) => writeText(path, Records.jsonl(values))
    /** A samples file, its `pixel_values` sidecar first (so no line names a file not yet there). */
    const writeSamples = (path: string, samples: ReadonlyArray<TrainingSample.TrainingSample>) =>
      Effect.gen(function*() {
        const sidecar = PixelSidecar.fileFor(path)
        const split = PixelSidecar.split(samples, basename(sidecar))
        if (typeof split === "string") return yield* Effect.die(new Error(`${sidecar}: ${split}`))
        if (split.chunks.length > 0) yield* writeText(sidecar, split.chunks)
        yield* write(path, split.samples)
      })
    const writeText = (path: string, text: Files.Content) =>
      save(path, text).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            if (!files.includes(path)) files.push(path)
          })
        )
      )

    const step = Effect.fn("Outputs.step")(
      function*(rolloutId: number, samples: ReadonlyArray<TrainingSample.TrainingSample>, metricLine: unknown) {
        if (dir === undefined) return
        metricsText += Records.jsonl([metricLine])
        yield* writeSamples(join(dir, `rollout_${rolloutId}.jsonl`), samples)
        yield* writeText(join(dir, "metrics.jsonl"), metricsText)
      }
    )
    const evalDataset = Effect.fn("Outputs.evalDataset")(
      function*(
        afterSteps: number,
        dataset: string,
        samples: ReadonlyArray<TrainingSample.TrainingSample>,
        metricLine: unknown
      ) {
        if (dir !== undefined) yield* writeSamples(join(dir, `eval_${afterSteps}_${dataset}.jsonl`), samples)
        if (dir !== undefined) evalMetricsText += Records.jsonl([metricLine])
      }
    )
    const evalMetrics = Effect.fn("Outputs.evalMetrics")(function*() {
      if (dir !== undefined) yield* writeText(join(dir, "eval_metrics.jsonl"), evalMetricsText)
    })
    return { step, evalDataset, evalMetrics, files: () => [...files] } satisfies RunOutputs
  })

  const writeDebug = Effect.fn("Outputs.writeDebug")(function*(
    file: number | string,
    rolloutId: number | string,
    samples: ReadonlyArray<TrainingSample.TrainingSample>,
    debug: ReadonlyArray<Records.ContextDebug | undefined>
  ) {
    if (settings.saveDebugRolloutData === undefined) return
    yield* save(
      OutputPaths.debugDumpPath(settings.saveDebugRolloutData, file),
      Records.jsonl(Records.debugRecords(samples, debug, rolloutId))
    ).pipe(Effect.catch((error) => telemetry.error(error.message)))
  })

  return {
    openRun,
    writeDebug,
    failed: Ref.get(failure),
    report: Effect.sync(() => ({ written: [...written], salvaged: [...salvaged], inFlight: Files.inFlight() }))
  } satisfies OutputsShape
})

/** The rollout's output files. */
export class Outputs extends Context.Service<Outputs, OutputsShape>()("relax-agentic/Outputs") {
  /** Proves the first step's output directories writable (`OutputPathError` otherwise), then serves the writes. */
  static readonly layer: Layer.Layer<
    Outputs,
    OutputPaths.OutputPathError,
    RolloutConfig.RolloutConfig | Telemetry.Telemetry
  > = Layer.effect(
    Outputs,
    make
  )
}
