// `node test/support/sessionMemoryProbe.ts [sessions]`: prints the JSON of `SessionMemory.measure` (the memory guard's
// child process: vitest's workers cannot force collections; this process enables them, test/bench/harness.ts). With HEAP_SNAPSHOTS=<dir> it also writes
// `before.heapsnapshot` and `after.heapsnapshot` there, for `node test/bench/profile/heapDiff.mjs` (what a Session's
// bytes are: docs/performance.md, section 3).
import { join } from "node:path"
import { writeHeapSnapshot } from "node:v8"
import * as Harness from "../bench/harness.ts"
import * as SessionMemory from "./sessionMemory.ts"

const gc = Harness.garbageCollector()
if (gc === undefined) throw new Error("this runtime cannot force garbage collections")
const sessions = Number(process.argv[2] ?? 1000)
const dir = process.env["HEAP_SNAPSHOTS"]
const result = await SessionMemory.measure(sessions, gc, (at) => {
  if (dir !== undefined) writeHeapSnapshot(join(dir, `${at}.heapsnapshot`))
})
process.stdout.write(`${JSON.stringify(result)}\n`)
