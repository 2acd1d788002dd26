/**
 * What a rollout run has done so far, and the one line an interrupted run ends with: which step (or Eval) was
 * interrupted, what was written and where (docs/runtime.md "Shutdown").
 *
 * **Details**
 * `rollout` prints `interruptedLine` last when a signal stops it, after every agent was reaped, so the last line of
 * an interrupted run never leaves the operator guessing whether the step's samples exist.
 */
import * as Path from "node:path"

/** What the run is doing now. */
export type Activity =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Step"; readonly rolloutId: number; readonly writing: boolean }
  | { readonly _tag: "Eval"; readonly afterSteps: number; readonly writing: boolean }
  | { readonly _tag: "Between"; readonly lastStep: number | undefined }

/** An output that could not be written where asked and was saved elsewhere. */
export interface Salvaged {
  readonly path: string
  readonly fallback: string
}

/** The run's position and its files. */
export interface Progress {
  readonly activity: Activity
  /** Files written where asked, in first-write order. */
  readonly written: ReadonlyArray<string>
  readonly salvaged: ReadonlyArray<Salvaged>
  /** Writes in flight (abandoned if the process ends now). */
  readonly inFlight: ReadonlyArray<string>
}

const describeActivity = (activity: Activity): string => {
  switch (activity._tag) {
    case "Starting":
      return "before the first step"
    case "Step":
      return `during step ${activity.rolloutId}${activity.writing ? " while writing its outputs" : ""}`
    case "Eval":
      return `during the Eval after ${activity.afterSteps} step(s)${
        activity.writing ? " while writing its outputs" : ""
      }`
    case "Between":
      return activity.lastStep === undefined ? "before the first step" : `after step ${activity.lastStep}`
  }
}

const listFiles = (files: ReadonlyArray<string>, outputDir: string | undefined): string => {
  if (outputDir === undefined) return files.join(", ")
  const root = Path.resolve(outputDir)
  const inside = files.filter((file) => Path.dirname(file) === root).map((file) => Path.basename(file))
  const outside = files.filter((file) => Path.dirname(file) !== root)
  return [...(inside.length > 0 ? [`${inside.join(", ")} in ${root}`] : []), ...outside].join("; ")
}

/**
 * The last line of an interrupted run, e.g. `Interrupted by SIGINT during step 1: its samples were not written;
 * written before: rollout_0.jsonl, metrics.jsonl in /abs/out`.
 */
export const interruptedLine = (signal: string, progress: Progress, outputDir: string | undefined): string => {
  const activity = progress.activity
  const unfinished = activity._tag === "Step"
    ? `: step ${activity.rolloutId}'s samples were not written`
    : activity._tag === "Eval"
    ? ": its Eval samples were not written"
    : ""
  const parts = [`Interrupted by ${signal} ${describeActivity(activity)}${unfinished}`]
  if (progress.inFlight.length > 0) parts.push(`abandoned unfinished write(s) of ${progress.inFlight.join(", ")}`)
  for (const s of progress.salvaged) parts.push(`${s.path} was saved to ${s.fallback} instead`)
  parts.push(
    progress.written.length === 0
      ? `nothing was written${outputDir === undefined ? "" : ` to ${Path.resolve(outputDir)}`}`
      : `written: ${listFiles(progress.written, outputDir)}`
  )
  return parts.join("; ")
}
