/**
 * A CPU profile of one stretch of a benchmark, taken in process (not the whole process as `npm run bench:profile`
 * does), with the call frames of our TypeScript sources mapped to their original lines.
 *
 * **Details**
 * Run node with `--enable-source-maps` (as `npm run bench:cost` does) for the mapping: tsx compiles each file to one
 * line, so without it every frame of a file points at line 1. `node test/bench/profile/summary.mjs <file>` reads the
 * result. Sampling every 200 µs.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector"
import { findSourceMap } from "node:module"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}

/** A call frame at its TypeScript line and column when a source map knows it, else as it is. */
export const originalFrame = (cf: CallFrame): CallFrame => {
  const entry = cf.url.includes("/work/") ? findSourceMap(cf.url)?.findEntry(cf.lineNumber, cf.columnNumber) : undefined
  return entry !== undefined && "originalLine" in entry && "originalColumn" in entry &&
      typeof entry.originalLine === "number" && typeof entry.originalColumn === "number"
    ? { ...cf, lineNumber: entry.originalLine, columnNumber: entry.originalColumn }
    : cf
}

/** Post one inspector command and wait for its answer. */
export const post = (session: Session, method: string, params?: object): Promise<unknown> =>
  new Promise<unknown>((resolve, reject) =>
    session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result)))
  )

/** Run `run` under the CPU profiler and write the profile (source-mapped) to `file`. */
export const cpuProfile = async <A>(file: string, run: () => Promise<A>): Promise<A> => {
  const session = new Session()
  session.connect()
  try {
    await post(session, "Profiler.enable")
    await post(session, "Profiler.setSamplingInterval", { interval: 200 })
    await post(session, "Profiler.start")
    const result = await run()
    const { profile } = (await post(session, "Profiler.stop")) as {
      readonly profile: { readonly nodes: ReadonlyArray<{ readonly callFrame: CallFrame }> }
    }
    const nodes = profile.nodes.map((node) => ({ ...node, callFrame: originalFrame(node.callFrame) }))
    writeFileSync(file, JSON.stringify({ ...profile, nodes }))
    return result
  } finally {
    session.disconnect()
  }
}
