/**
 * CPU and allocation profiles of one stretch of a benchmark, taken in process (not the whole process as `npm run
 * bench:profile` does), with the call frames of our TypeScript sources mapped to their original lines.
 *
 * **Details**
 * Run node with `--enable-source-maps` (as `npm run bench:cost` does) for the mapping: tsx compiles each file to one
 * line, so without it every frame of a file points at line 1. `node test/bench/profile/summary.mjs <file>` reads a
 * CPU profile (sampled every 200 µs); an allocation profile (`.heapprofile`, V8's sampling heap profiler every 1 KiB
 * with the objects minor and major collections freed included) opens in Chrome DevTools.
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

interface HeapNode {
  readonly callFrame: CallFrame
  readonly selfSize: number
  readonly children: ReadonlyArray<HeapNode>
}

/** Run `run` under the sampling heap profiler; write the profile (source-mapped) to `file`; the bytes allocated. */
export const allocationProfile = async <A>(
  file: string,
  run: () => Promise<A>
): Promise<{ readonly result: A; readonly bytes: number }> => {
  const session = new Session()
  session.connect()
  try {
    await post(session, "HeapProfiler.enable")
    await post(session, "HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true
    })
    const result = await run()
    const { profile } = (await post(session, "HeapProfiler.stopSampling")) as { readonly profile: { head: HeapNode } }
    let bytes = 0
    const mapped = (node: HeapNode): HeapNode => {
      bytes += node.selfSize
      return { ...node, callFrame: originalFrame(node.callFrame), children: node.children.map(mapped) }
    }
    writeFileSync(file, JSON.stringify({ ...profile, head: mapped(profile.head) }))
    return { result, bytes }
  } finally {
    session.disconnect()
  }
}
