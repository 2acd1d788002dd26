/**
 * Where a rollout writes, decided before it runs: the directories the first step writes into (proved writable at
 * startup), the debug dump file of a step, and the errors that name the flag, the path and the fix.
 *
 * **Details**
 * A bad output path must cost nothing (docs/outputs.md "Before the first step"): `--output-dir` and every directory the
 * `--save-debug-rollout-data` template names for the first step (step 0, and the Eval before training when it runs)
 * are created and probed before any agent starts. A write that still fails later keeps the samples in a fallback file
 * (`OutputWriteError.fallback`) and stops the run.
 */
import { Data } from "effect"
import * as Path from "node:path"
import * as Thrown from "../Thrown.ts"

/** Replace `{rollout_id}` in a `--save-debug-rollout-data` template. */
export const debugDumpPath = (template: string, rolloutId: number | string): string =>
  template.replaceAll("{rollout_id}", String(rolloutId))

/** A directory the rollout writes into, and the flag that names it. */
export interface Target {
  readonly flag: "--output-dir" | "--save-debug-rollout-data"
  readonly directory: string
}

/** What decides the first step's paths. */
export interface PathSettings {
  readonly outputDir?: string | undefined
  readonly saveDebugRolloutData?: string | undefined
  readonly evalInterval?: number | undefined
  readonly skipEvalBeforeTrain: boolean
  readonly evalDatasets: ReadonlyArray<{ readonly name: string }>
}

/**
 * The directories the first step (and the Eval before training, when it runs) writes into, each once, with the flag
 * that names it.
 */
export const firstStepTargets = (settings: PathSettings): ReadonlyArray<Target> => {
  const targets: Array<Target> = []
  const add = (flag: Target["flag"], directory: string) => {
    const resolved = Path.resolve(directory)
    if (!targets.some((t) => t.directory === resolved)) targets.push({ flag, directory: resolved })
  }
  if (settings.outputDir !== undefined) add("--output-dir", settings.outputDir)
  const template = settings.saveDebugRolloutData
  if (template !== undefined) {
    const evalFirst = settings.evalInterval !== undefined && !settings.skipEvalBeforeTrain
    const files = [
      ...(evalFirst ? settings.evalDatasets.map((d) => debugDumpPath(template, `eval_0_${d.name}`)) : []),
      debugDumpPath(template, 0)
    ]
    for (const file of files) add("--save-debug-rollout-data", Path.dirname(file))
  }
  return targets
}

/** An output directory that cannot be created or written, found before the first step. */
export class OutputPathError extends Data.TaggedError("OutputPathError")<{
  readonly flag: Target["flag"]
  readonly path: string
  /** `create`: the directory cannot be created; `write`: a file cannot be written in it. */
  readonly reason: "create" | "write"
  readonly detail: string
}> {
  override get message(): string {
    const what = this.reason === "create" ? "cannot create the directory" : "cannot write a file in the directory"
    return `${this.flag} ${this.path}: ${what}: ${this.detail}. Nothing was started; give a directory you can write ` +
      `to (or fix this one's permissions or space) and run again.`
  }
}

/**
 * A one-line reason for a file-system error: its code and what it means here (`ENOTDIR`: a parent is a file,
 * `ENOENT` on a parent that exists: the file system refuses new entries there, as `/proc` does).
 */
export const describeFsError = (error: unknown): string => {
  const code = Thrown.codeOf(error)
  const text = Thrown.messageOf(error)
  switch (code) {
    case "ENOTDIR":
      return `a part of the path is a file, not a directory (${text})`
    case "EEXIST":
      return `it exists and is not a directory (${text})`
    case "ENOENT":
      return `the file system refuses new entries there (${text})`
    case "EACCES":
    case "EPERM":
      return `permission denied (${text})`
    case "EROFS":
      return `read-only file system (${text})`
    case "ENOSPC":
    case "EDQUOT":
      return `no space left (${text})`
    default:
      return text
  }
}

/** The fallback directory for outputs that could not be written where asked: under the temporary directory. */
export const fallbackDirectory = (tmpdir: string, pid: number, startedAt: string): string =>
  Path.join(tmpdir, `relax-agentic-unsaved-${startedAt}-${pid}`)
