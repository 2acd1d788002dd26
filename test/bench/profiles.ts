/**
 * CPU and allocation profiles of one stretch of a benchmark, taken in process (not the whole process as `npm run
 * bench:profile` does).
 *
 * **Details**
 * The call frames are the TypeScript sources' own lines and columns: Node's type stripping, which the benchmarks run
 * on, keeps every position. `node test/bench/profile/summary.mjs <file>` reads a
 * CPU profile (sampled every 200 µs); an allocation profile (`.heapprofile`, V8's sampling heap profiler every 1 KiB
 * with the objects minor and major collections freed included) opens in Chrome DevTools.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}

/** Post one inspector command and wait for its answer. */
export const post = (session: Session, method: string, params?: object): Promise<unknown> =>
  new Promise<unknown>((resolve, reject) =>
    session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result)))
  )

/** Run `run` under the CPU profiler and write the profile  to `file`. */
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
    writeFileSync(file, JSON.stringify(profile))
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

/**
 * Run `run` under the sampling heap profiler; write the profile to `file`; the bytes allocated. `survivorsOnly`: only
 * the objects that outlived a young-generation collection (what the scavenger copied) are kept in the profile.
 */
export const allocationProfile = async <A>(
  file: string,
  run: () => Promise<A>,
  survivorsOnly = false
): Promise<{ readonly result: A; readonly bytes: number }> => {
  const session = new Session()
  session.connect()
  try {
    await post(session, "HeapProfiler.enable")
    await post(session, "HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: !survivorsOnly
    })
    const result = await run()
    const { profile } = (await post(session, "HeapProfiler.stopSampling")) as { readonly profile: { head: HeapNode } }
    let bytes = 0
    const mapped = (node: HeapNode): HeapNode => {
      bytes += node.selfSize
      return { ...node, children: node.children.map(mapped) }
    }
    writeFileSync(file, JSON.stringify({ ...profile, head: mapped(profile.head) }))
    return { result, bytes }
  } finally {
    session.disconnect()
  }
}
