/**
 * The coding example's task repositories: what a dataset row carries, how a working copy is made from it, how the
 * tests run, and how big a change is. Shared by the agent server (`agent.ts`) and the reward hook (`reward.ts`).
 *
 * **Details**
 * A repository travels in the row's metadata as `files` (path → content). Commands run with the Node that runs this
 * code first on `PATH`, so `node test/x.test.js` uses the project's Node 22 whatever the login shell's `node` is.
 */
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as Path from "node:path"

/** The task part of a row's metadata (make_tasks.ts). */
export interface TaskMetadata {
  readonly task_id: string
  readonly files: Readonly<Record<string, string>>
  readonly test_command: ReadonlyArray<string>
  readonly test_files: ReadonlyArray<string>
}

/** Read the task fields of `metadata`, or say which one is missing. */
export const taskOf = (metadata: unknown): TaskMetadata => {
  const m = (typeof metadata === "object" && metadata !== null ? metadata : {}) as Record<string, unknown>
  const files = m["files"]
  const command = m["test_command"]
  if (typeof files !== "object" || files === null) throw new Error("task metadata has no `files` (path → content)")
  if (!Array.isArray(command) || command.length === 0) throw new Error("task metadata has no `test_command` (argv)")
  return {
    task_id: String(m["task_id"] ?? "unknown"),
    files: files as Record<string, string>,
    test_command: command.map(String),
    test_files: Array.isArray(m["test_files"]) ? m["test_files"].map(String) : []
  }
}

/** A path inside `root`, or an error for one that leaves it (`../x`, `/etc/passwd`). */
export const inside = (root: string, path: string): string => {
  const full = Path.resolve(root, path)
  if (full !== root && !full.startsWith(root + Path.sep)) throw new Error(`${path} is outside the repository`)
  return full
}

/** Write `files` under `root`. */
export const writeFiles = (root: string, files: Readonly<Record<string, string>>): void => {
  for (const [path, content] of Object.entries(files)) {
    const full = inside(root, path)
    mkdirSync(Path.dirname(full), { recursive: true })
    writeFileSync(full, content)
  }
}

/** A fresh working copy of `files` in a temporary directory; `remove` deletes it. */
export const workingCopy = (
  files: Readonly<Record<string, string>>
): { readonly root: string; readonly remove: () => void } => {
  const root = mkdtempSync(Path.join(tmpdir(), "coding-task-"))
  writeFiles(root, files)
  return { root, remove: () => rmSync(root, { recursive: true, force: true }) }
}

/** The files of the task that the working copy at `root` changed (or deleted, as `null`). */
export const changedFiles = (root: string, files: Readonly<Record<string, string>>): Record<string, string | null> => {
  const changes: Record<string, string | null> = {}
  for (const [path, before] of Object.entries(files)) {
    let after: string | null
    try {
      after = readFileSync(inside(root, path), "utf8")
    } catch {
      after = null
    }
    if (after !== before) changes[path] = after
  }
  return changes
}

/** The environment commands run with: this Node's directory first on PATH. */
export const commandEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${Path.dirname(process.execPath)}${Path.delimiter}${process.env["PATH"] ?? ""}`
})

/** What a finished command printed and how it ended. */
export interface CommandResult {
  readonly exitCode: number
  readonly output: string
  readonly milliseconds: number
}

/**
 * Run `file args` in `cwd` (stdout and stderr together), killed after `timeoutMs` or when `signal` aborts; a
 * command that cannot start reports exit code 127, as a shell does.
 */
export const run = (
  file: string,
  args: ReadonlyArray<string>,
  cwd: string,
  options: { readonly timeoutMs: number; readonly signal?: AbortSignal | undefined }
): Promise<CommandResult> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    execFile(
      file === "node" ? process.execPath : file,
      [...args],
      {
        cwd,
        env: commandEnv(),
        timeout: options.timeoutMs,
        maxBuffer: 1 << 20,
        ...(options.signal === undefined ? {} : { signal: options.signal })
      },
      (error, stdout, stderr) => {
        if (options.signal?.aborted === true) return reject(options.signal.reason)
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : error.killed ? 124 : 127
        resolve({ exitCode: code, output: `${stdout}${stderr}`, milliseconds: performance.now() - started })
      }
    )
  })

/** Changed lines between two texts: removed plus added lines of a longest-common-subsequence line diff. */
export const changedLines = (before: string, after: string): number => {
  const a = before.split("\n")
  const b = after.split("\n")
  const lcs: Array<Array<number>> = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0))
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!)
    }
  }
  return a.length + b.length - 2 * lcs[0]![0]!
}
