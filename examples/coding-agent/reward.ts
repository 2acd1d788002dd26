/**
 * The coding example's reward hook (`--custom-rm-path examples/coding-agent/reward.ts#reward`): runs the task's tests
 * on the agent's changes.
 *
 * **Details**
 * The sample's metadata is the dataset row's (the repository, `test_command`, `test_files`) overlaid with the agent's
 * output (`changes`, `tool_calls`). The hook writes the original repository to a temporary directory, applies the
 * changes except to the test files (an agent that edits the tests gains nothing), runs `test_command`, and returns
 * `{score, tool_calls, patch_lines, test_ms}`: `score` (1 when the tests pass, else 0, selected by `--reward-key
 * score`) is the outcome; the others are helper metrics (`rollout/tool_calls/mean`, ...).
 */
import * as Repo from "./repo.ts"

/** The fields of the training sample the hook reads. */
interface Sample {
  readonly metadata: Readonly<Record<string, unknown>>
}

export interface CodingReward {
  readonly score: number
  readonly tool_calls: number
  /** Lines removed plus lines added over every changed file (tests excluded). */
  readonly patch_lines: number
  readonly test_ms: number
}

export const reward = async (sample: Sample): Promise<CodingReward> => {
  const task = Repo.taskOf(sample.metadata)
  const raw = sample.metadata["changes"]
  const changes = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, string | null>
  const kept = Object.entries(changes).filter(([path]) => !task.test_files.includes(path))
  const files: Record<string, string> = { ...task.files }
  let patchLines = 0
  for (const [path, after] of kept) {
    patchLines += Repo.changedLines(task.files[path] ?? "", after ?? "")
    if (after === null) delete files[path]
    else files[path] = after
  }
  const copy = Repo.workingCopy(files)
  try {
    const [file, ...args] = task.test_command
    const result = await Repo.run(file!, args, copy.root, { timeoutMs: 60_000 })
    const toolCalls = sample.metadata["tool_calls"]
    return {
      score: result.exitCode === 0 ? 1 : 0,
      tool_calls: typeof toolCalls === "number" ? toolCalls : 0,
      patch_lines: patchLines,
      test_ms: Math.round(result.milliseconds)
    }
  } finally {
    copy.remove()
  }
}

export default reward
