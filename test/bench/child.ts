/**
 * Helper processes for the benchmarks: a load generator or an SGLang stand-in runs in its own node process, so its
 * work does not share the measured server's event loop.
 *
 * **Details**
 * The child is this repository's TypeScript on Node's type stripping (as the benchmarks run), with an IPC channel: `call` sends one JSON message and
 * resolves with the child's next answer (one call at a time). A child that exits early rejects the pending call.
 */
import { type ChildProcess, fork, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

export interface Child {
  /** The child's process id (its CPU: processCpu.ts). */
  readonly pid: number | undefined
  readonly call: <A>(message: unknown) => Promise<A>
  readonly close: () => Promise<void>
}

/**
 * Start `file` (a path relative to this directory) as a child process with IPC; with `nice`, at that CPU priority
 * (`nice -n`, every thread of the child: a load generator that must not take the measured process's cores).
 */
export const start = (
  file: string,
  args: ReadonlyArray<string> = [],
  options: { readonly nice?: number } = {}
): Child => {
  const path = fileURLToPath(new URL(file, import.meta.url))
  const child: ChildProcess = options.nice === undefined
    ? fork(path, [...args], { execArgv: [], stdio: ["ignore", "inherit", "inherit", "ipc"] })
    : spawn("nice", ["-n", String(options.nice), process.execPath, path, ...args], {
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
  let pending: { readonly resolve: (value: unknown) => void; readonly reject: (error: Error) => void } | undefined
  child.on("message", (message) => {
    const current = pending
    pending = undefined
    current?.resolve(message)
  })
  child.on("exit", (code) => {
    const current = pending
    pending = undefined
    current?.reject(new Error(`benchmark child ${file} exited with code ${code ?? "null"}`))
  })
  return {
    pid: child.pid,
    call: <A>(message: unknown) =>
      new Promise<A>((resolve, reject) => {
        if (pending !== undefined) return reject(new Error(`benchmark child ${file} is busy`))
        // Decoding boundary: the child answers with the shape its protocol documents.
        pending = { resolve: (value) => resolve(value as A), reject }
        child.send(message as object)
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve()
        child.once("exit", () => resolve())
        child.kill()
      })
  }
}

/** In a child: answer every IPC message with what `handle` returns. */
export const serve = (handle: (message: unknown) => Promise<unknown>): void => {
  process.on("message", (message: unknown) => {
    handle(message).then(
      (answer) => process.send?.(answer as object),
      (error: unknown) => {
        console.error(error)
        process.exit(1)
      }
    )
  })
  process.on("disconnect", () => process.exit(0))
}
